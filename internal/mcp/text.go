package mcp

import "strings"

// maxHeld bounds the bytes of an unfinished control sequence held back for
// the next answer: a longer one is no sequence a terminal would wait for.
const maxHeld = 256

// cleanOutput makes a terminal's output easier for a model to read: line
// ends "\r\n" become "\n", and the terminal's control sequences (colours,
// cursor moves, titles: CSI "ESC [ … final", OSC "ESC ] … BEL|ESC \",
// charset and keypad selections) are dropped. The job's output.log keeps
// every byte.
//
// held is how many bytes at the end begin a sequence (or a "\r\n") that the
// text does not finish: a caller that expects more output leaves them for
// the next answer, so a sequence cut by a window is not shown in pieces.
func cleanOutput(s string) (text string, held int) {
	if !strings.ContainsAny(s, "\r\x1b") {
		return s, 0
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\r' && c != 0x1b {
			b.WriteByte(c)
			continue
		}
		n, complete := sequence(s[i:])
		if !complete {
			if len(s)-i <= maxHeld {
				return b.String(), len(s) - i
			}
			n = len(s) - i
		}
		if n == 0 { // a lone "\r", or ESC before something else
			b.WriteByte(c)
			continue
		}
		if c == '\r' {
			b.WriteByte('\n')
		}
		i += n - 1
	}
	return b.String(), 0
}

// sequence measures the "\r\n" or control sequence at the start of s (s[0]
// is '\r' or ESC): its length, 0 when there is none to drop, and whether s
// holds all of it.
func sequence(s string) (n int, complete bool) {
	if s[0] == '\r' {
		switch {
		case len(s) == 1:
			return 0, false
		case s[1] == '\n':
			return 2, true
		}
		return 0, true
	}
	if len(s) == 1 {
		return 0, false
	}
	switch s[1] {
	case '[':
		for j := 2; j < len(s); j++ {
			if s[j] >= 0x40 && s[j] <= 0x7e {
				return j + 1, true
			}
		}
		return 0, false
	case ']':
		for j := 2; j < len(s); j++ {
			if s[j] == 0x07 {
				return j + 1, true
			}
			if s[j] == 0x1b && j+1 < len(s) && s[j+1] == '\\' {
				return j + 2, true
			}
		}
		return 0, false
	case '(', ')':
		if len(s) < 3 {
			return 0, false
		}
		return 3, true
	case '=', '>', '7', '8':
		return 2, true
	}
	return 0, true
}
