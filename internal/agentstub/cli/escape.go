package cli

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// What this CLI prints comes partly from the backend (a downloaded file's
// name, an error body) and goes to a terminal or to a model reading it.
// A control character there is an instruction to the terminal, not text:
// ESC starts sequences that retitle the window, move the cursor over
// earlier output or, with OSC 52, write the clipboard; BEL ends them; a
// newline splits the one-line answer a caller parses. The functions below
// keep such characters out of names written to disk and out of what is
// printed.

// unsafeRune reports a rune that must not reach a terminal as is: the C0
// and C1 controls and DEL (unicode.IsControl; 0x9b alone is CSI to a
// terminal in 8-bit mode), the bidirectional formatting characters, which
// make a name display as another (an ".exe" that reads ".txt"), and the
// byte of an invalid UTF-8 sequence (RuneError of width 1), which a
// terminal may take for a C1 control.
func unsafeRune(r rune, width int) bool {
	if r == utf8.RuneError && width == 1 {
		return true
	}
	switch {
	case unicode.IsControl(r):
		return true
	case r == '\u061c', r == '\u200e', r == '\u200f',
		r >= '\u202a' && r <= '\u202e', r >= '\u2066' && r <= '\u2069':
		return true
	}
	return false
}

// hasUnsafe reports whether s holds a rune unsafeRune refuses.
func hasUnsafe(s string) bool {
	for i := 0; i < len(s); {
		r, w := utf8.DecodeRuneInString(s[i:])
		if unsafeRune(r, w) {
			return true
		}
		i += w
	}
	return false
}

// safeFileName replaces every rune unsafeRune refuses with "_", as
// browsers do with a downloaded file's name: the file gets a name that
// prints as what it is, and the printed path is the real one.
func safeFileName(name string) string {
	if !hasUnsafe(name) {
		return name
	}
	var b strings.Builder
	for i := 0; i < len(name); {
		r, w := utf8.DecodeRuneInString(name[i:])
		if unsafeRune(r, w) {
			b.WriteByte('_')
		} else {
			b.WriteString(name[i : i+w])
		}
		i += w
	}
	return b.String()
}

// escapeUnsafe writes every rune unsafeRune refuses as a Go escape (\n,
// \x1b, \u202e; an invalid byte as \xff), so it is seen, not obeyed.
// Everything else, backslashes included, is left as is: a string without
// such runes comes back unchanged.
func escapeUnsafe(s string) string {
	if !hasUnsafe(s) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, w := utf8.DecodeRuneInString(s[i:])
		switch {
		case !unsafeRune(r, w):
			b.WriteString(s[i : i+w])
		case r == utf8.RuneError && w == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x100:
			fmt.Fprintf(&b, `\x%02x`, r)
		default:
			fmt.Fprintf(&b, `\u%04x`, r)
		}
		i += w
	}
	return b.String()
}
