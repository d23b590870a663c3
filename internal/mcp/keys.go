package mcp

import (
	"fmt"
	"strings"
)

// keys are the named keys shell_input sends, as a terminal in its usual
// (cursor-key normal) mode sends them. Names are taken in any case.
var keys = map[string]string{
	"enter":     "\r",
	"tab":       "\t",
	"escape":    "\x1b",
	"esc":       "\x1b",
	"backspace": "\x7f",
	"space":     " ",
	"up":        "\x1b[A",
	"down":      "\x1b[B",
	"right":     "\x1b[C",
	"left":      "\x1b[D",
	"home":      "\x1b[H",
	"end":       "\x1b[F",
	"pageup":    "\x1b[5~",
	"pagedown":  "\x1b[6~",
	"delete":    "\x1b[3~",
}

// keyNames lists the names for messages and the tool's description.
func keyNames() string {
	names := []string{"Enter", "Tab", "Escape", "Backspace", "Space", "Up", "Down", "Left", "Right", "Home", "End", "PageUp", "PageDown", "Delete"}
	return strings.Join(names, ", ") + ", C-a … C-z (Ctrl+letter: C-c interrupts, C-d ends input), C-\\, C-]"
}

// keyBytes returns what the terminal sends for the named key.
func keyBytes(name string) (string, error) {
	n := strings.ToLower(strings.TrimSpace(name))
	if s, ok := keys[n]; ok {
		return s, nil
	}
	for _, p := range []string{"c-", "ctrl-", "ctrl+", "^"} {
		rest, ok := strings.CutPrefix(n, p)
		if !ok || len(rest) != 1 {
			continue
		}
		switch c := rest[0]; {
		case c >= 'a' && c <= 'z':
			return string(rune(c - 'a' + 1)), nil
		case c == '\\':
			return "\x1c", nil
		case c == ']':
			return "\x1d", nil
		case c == '@' || c == ' ':
			return "\x00", nil
		}
	}
	return "", fmt.Errorf("unknown key %q: use one of %s (or send it as text)", name, keyNames())
}

// keysText joins the bytes of the named keys.
func keysText(names []string) (string, error) {
	var b strings.Builder
	for _, k := range names {
		s, err := keyBytes(k)
		if err != nil {
			return "", err
		}
		b.WriteString(s)
	}
	return b.String(), nil
}
