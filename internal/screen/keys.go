package screen

import (
	"fmt"
	"strings"
)

// KeyNames is where the key names are documented for a client.
const KeyNames = "docs/api.md, \"Screen and keys\""

// named are the keys with a name (tmux's names and a few aliases), as an
// xterm sends them; the cursor keys, Home and End are in cursorKeys.
var named = map[string]string{
	"Enter": "\r", "Tab": "\t", "BTab": "\x1b[Z", "Escape": "\x1b", "Esc": "\x1b",
	"BSpace": "\x7f", "Backspace": "\x7f", "Space": " ",
	"PageUp": "\x1b[5~", "PPage": "\x1b[5~", "PgUp": "\x1b[5~",
	"PageDown": "\x1b[6~", "NPage": "\x1b[6~", "PgDn": "\x1b[6~",
	"Insert": "\x1b[2~", "IC": "\x1b[2~",
	"Delete": "\x1b[3~", "DC": "\x1b[3~",
	"F1": "\x1bOP", "F2": "\x1bOQ", "F3": "\x1bOR", "F4": "\x1bOS",
	"F5": "\x1b[15~", "F6": "\x1b[17~", "F7": "\x1b[18~", "F8": "\x1b[19~",
	"F9": "\x1b[20~", "F10": "\x1b[21~", "F11": "\x1b[23~", "F12": "\x1b[24~",
}

// cursorKeys end the sequence a cursor key sends: ESC [ X normally, ESC O X
// in application cursor mode (DECCKM).
var cursorKeys = map[string]byte{"Up": 'A', "Down": 'B', "Right": 'C', "Left": 'D', "Home": 'H', "End": 'F'}

// KeyError is a key that is neither a name nor literal text.
type KeyError struct {
	Index int
	Key   string
	Why   string
}

func (e *KeyError) Error() string {
	return fmt.Sprintf("keys[%d] %q %s (key names are listed in %s; anything that is not a name and has no C-/M- prefix is sent as literal text)", e.Index, e.Key, e.Why, KeyNames)
}

// Keys turns key names and literal text into the bytes a terminal sends;
// appCursor is the program's DECCKM state (Term.AppCursor).
//
// A key is, in this order: a name (Enter, Up, F5, …: case-sensitive, see
// named and cursorKeys); C-x (control: a letter, Space, @ [ \ ] ^ _ ?) or
// M-x (meta: ESC then x, x any key or one character), combinable (C-M-x);
// anything else is literal text, sent as it is. An empty key, a modifier
// on nothing or on what it cannot modify, and F0 or F13 and up are errors.
func Keys(keys []string, appCursor bool) ([]byte, error) {
	if len(keys) == 0 {
		return nil, &KeyError{Index: 0, Key: "", Why: "is missing: keys is an empty list; give at least one key"}
	}
	var out []byte
	for i, k := range keys {
		b, err := key(k, appCursor)
		if err != "" {
			return nil, &KeyError{Index: i, Key: k, Why: err}
		}
		out = append(out, b...)
	}
	return out, nil
}

func key(k string, appCursor bool) ([]byte, string) {
	if k == "" {
		return nil, "is empty"
	}
	if b, ok := name(k, appCursor); ok {
		return b, ""
	}
	if looksFunction(k) {
		return nil, "is not a function key: there are F1 to F12"
	}
	if rest, ok := strings.CutPrefix(k, "M-"); ok {
		if rest == "" {
			return nil, "has M- on nothing"
		}
		b, err := modified(rest, appCursor)
		if err != "" {
			return nil, err
		}
		return append([]byte{0x1b}, b...), ""
	}
	if rest, ok := strings.CutPrefix(k, "C-"); ok {
		if rest == "" {
			return nil, "has C- on nothing"
		}
		if inner, ok := strings.CutPrefix(rest, "M-"); ok && inner != "" {
			b, err := control(inner)
			if err != "" {
				return nil, err
			}
			return append([]byte{0x1b}, b...), ""
		}
		return control(rest)
	}
	return []byte(k), ""
}

// modified is what follows M-: a key name, C-x, or one character.
func modified(rest string, appCursor bool) ([]byte, string) {
	if b, ok := name(rest, appCursor); ok {
		return b, ""
	}
	if inner, ok := strings.CutPrefix(rest, "C-"); ok && inner != "" {
		return control(inner)
	}
	if len([]rune(rest)) == 1 {
		return []byte(rest), ""
	}
	return nil, "has M- on " + fmt.Sprintf("%q", rest) + ", which is neither a key name nor one character"
}

func name(k string, appCursor bool) ([]byte, bool) {
	if s, ok := named[k]; ok {
		return []byte(s), true
	}
	if c, ok := cursorKeys[k]; ok {
		if appCursor {
			return []byte{0x1b, 'O', c}, true
		}
		return []byte{0x1b, '[', c}, true
	}
	return nil, false
}

// control is the control character C-x sends.
func control(x string) ([]byte, string) {
	if x == "Space" {
		return []byte{0}, ""
	}
	if len(x) == 1 {
		c := x[0]
		switch {
		case c >= 'a' && c <= 'z':
			return []byte{c - 'a' + 1}, ""
		case c >= 'A' && c <= 'Z':
			return []byte{c - 'A' + 1}, ""
		case c == '@':
			return []byte{0}, ""
		case c >= '[' && c <= '_':
			return []byte{c - '@'}, ""
		case c == '?':
			return []byte{0x7f}, ""
		}
	}
	return nil, fmt.Sprintf("has C- on %q: control applies to a letter, Space, or one of @ [ \\ ] ^ _ ?", x)
}

// looksFunction: F and a number that is not a function key (F0, F13 …).
func looksFunction(k string) bool {
	if len(k) < 2 || k[0] != 'F' {
		return false
	}
	for _, c := range k[1:] {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}
