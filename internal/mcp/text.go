package mcp

import "strings"

// cleanOutput makes a terminal's output easier for a model to read: line
// ends "\r\n" become "\n", and the terminal's control sequences (colours,
// cursor moves, titles: CSI "ESC [ … final" and OSC "ESC ] … BEL|ESC \")
// are dropped. The job's output.log keeps every byte.
func cleanOutput(s string) string {
	if !strings.ContainsAny(s, "\r\x1b") {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\r' && i+1 < len(s) && s[i+1] == '\n':
			continue
		case c == 0x1b && i+1 < len(s) && s[i+1] == '[':
			j := i + 2
			for j < len(s) && (s[j] < 0x40 || s[j] > 0x7e) {
				j++
			}
			i = j // the final byte (or the end) is skipped too
		case c == 0x1b && i+1 < len(s) && s[i+1] == ']':
			j := i + 2
			for j < len(s) && s[j] != 0x07 && !(s[j] == 0x1b && j+1 < len(s) && s[j+1] == '\\') {
				j++
			}
			if j < len(s) && s[j] == 0x1b {
				j++
			}
			i = j
		case c == 0x1b && i+1 < len(s) && (s[i+1] == '(' || s[i+1] == ')') && i+2 < len(s):
			i += 2 // character set selection
		case c == 0x1b && i+1 < len(s) && (s[i+1] == '=' || s[i+1] == '>' || s[i+1] == '7' || s[i+1] == '8'):
			i++ // keypad modes, cursor save and restore
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}
