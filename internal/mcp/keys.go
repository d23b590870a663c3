package mcp

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/shellctl/shellctl/internal/screen"
)

// Named keys are the screen routes' (internal/screen, docs/api.md "Screen and
// keys"): the same names drive POST /v1/jobs/{id}/keys. Here they are sent
// through input, as a terminal in normal cursor mode sends them. A model
// is forgiven the case of a name and a few spellings of Ctrl and Alt, but
// not a word that is no key: that goes in text.

// keyNames lists the names for messages and the tool's description.
func keyNames() string {
	return "Enter, Tab, BTab (Shift-Tab), Escape, Backspace, Space, Up, Down, Left, Right, Home, End, PageUp, PageDown, Insert, Delete, F1…F12, " +
		"C-x for Ctrl+x (C-c interrupts, C-d ends input, C-z suspends), M-x for Alt+x, or one character"
}

// canonical maps a lowercased name to the screen package's spelling.
var canonical = func() map[string]string {
	m := map[string]string{}
	for _, n := range []string{"Enter", "Tab", "BTab", "Escape", "Esc", "BSpace", "Backspace", "Space", "PageUp", "PPage", "PgUp",
		"PageDown", "NPage", "PgDn", "Insert", "IC", "Delete", "DC", "Up", "Down", "Left", "Right", "Home", "End"} {
		m[strings.ToLower(n)] = n
	}
	for i := 1; i <= 12; i++ {
		m[fmt.Sprintf("f%d", i)] = fmt.Sprintf("F%d", i)
	}
	m["return"], m["del"], m["shift-tab"] = "Enter", "Delete", "BTab"
	return m
}()

// normalize spells a key name as the screen package does.
func normalize(k string) string {
	if c, ok := canonical[strings.ToLower(k)]; ok {
		return c
	}
	lk := strings.ToLower(k)
	for _, p := range []struct{ from, to string }{{"ctrl-", "C-"}, {"ctrl+", "C-"}, {"c-", "C-"}, {"^", "C-"}, {"alt-", "M-"}, {"alt+", "M-"}, {"m-", "M-"}} {
		if strings.HasPrefix(lk, p.from) && len(k) > len(p.from) {
			return p.to + normalize(k[len(p.from):])
		}
	}
	return k
}

// keyBytes returns what the terminal sends for the named key.
func keyBytes(name string) (string, error) {
	k := normalize(strings.TrimSpace(name))
	b, err := screen.Keys([]string{k}, false)
	if err != nil {
		return "", fmt.Errorf("key %q: %w", name, err)
	}
	if string(b) == k && utf8.RuneCountInString(k) > 1 {
		// The screen package types a word that is no name as text.
		return "", fmt.Errorf("unknown key %q: put text to type in \"text\"; keys are %s", name, keyNames())
	}
	return string(b), nil
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
