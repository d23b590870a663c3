package screen

import (
	"errors"
	"strings"
	"testing"
)

func TestKeys(t *testing.T) {
	for _, c := range []struct {
		keys []string
		app  bool
		want string
	}{
		{[]string{"Down", "Down", "Enter"}, false, "\x1b[B\x1b[B\r"},
		{[]string{"Up", "Left", "Right", "Home", "End"}, false, "\x1b[A\x1b[D\x1b[C\x1b[H\x1b[F"},
		{[]string{"Up", "Left", "Home"}, true, "\x1bOA\x1bOD\x1bOH"},
		{[]string{"C-c", "C-a", "C-Z", "C-[", "C-Space", "C-?"}, false, "\x03\x01\x1a\x1b\x00\x7f"},
		{[]string{"Escape", ":wq", "Enter"}, false, "\x1b:wq\r"},
		{[]string{"M-x", "M-Enter", "C-M-a", "M-C-b", "M-Up"}, true, "\x1bx\x1b\r\x1b\x01\x1b\x02\x1b\x1bOA"},
		{[]string{"Tab", "BTab", "BSpace", "Space", "DC", "Delete", "IC", "PPage", "NPage", "PageUp", "PageDown"}, false,
			"\t\x1b[Z\x7f \x1b[3~\x1b[3~\x1b[2~\x1b[5~\x1b[6~\x1b[5~\x1b[6~"},
		{[]string{"F1", "F4", "F5", "F12"}, false, "\x1bOP\x1bOS\x1b[15~\x1b[24~"},
		{[]string{"end", "hello world", "Enterprise", "q"}, false, "endhello worldEnterpriseq"},
	} {
		got, err := Keys(c.keys, c.app)
		if err != nil {
			t.Errorf("%q: %v", c.keys, err)
			continue
		}
		if string(got) != c.want {
			t.Errorf("%q (app %v): %q, want %q", c.keys, c.app, got, c.want)
		}
	}
}

func TestKeysRejected(t *testing.T) {
	for _, c := range []struct {
		keys  []string
		index int
	}{
		{nil, 0},
		{[]string{"Enter", ""}, 1},
		{[]string{"C-1"}, 0},
		{[]string{"a", "M-"}, 1},
		{[]string{"C-"}, 0},
		{[]string{"F13"}, 0},
		{[]string{"M-Foo"}, 0},
		{[]string{"C-Enter"}, 0},
	} {
		_, err := Keys(c.keys, false)
		var ke *KeyError
		if !errors.As(err, &ke) {
			t.Errorf("%q: error %v, want a KeyError", c.keys, err)
			continue
		}
		if ke.Index != c.index || !strings.Contains(err.Error(), "docs/api.md") {
			t.Errorf("%q: %v (index %d, want %d)", c.keys, err, ke.Index, c.index)
		}
	}
}

func TestDrawn(t *testing.T) {
	for _, c := range []struct {
		in   []string
		want int
	}{{nil, 0}, {[]string{"", ""}, 0}, {[]string{"a", "", "b", "", ""}, 3}, {[]string{"a"}, 1}} {
		if got := Drawn(c.in); len(got) != c.want {
			t.Errorf("Drawn(%q) = %q, want %d rows", c.in, got, c.want)
		}
	}
}
