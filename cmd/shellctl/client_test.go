package main

import (
	"strings"
	"testing"
	"time"
)

func TestNormalizeServer(t *testing.T) {
	for in, want := range map[string]string{
		"127.0.0.1:8765":         "http://127.0.0.1:8765",
		"localhost:9":            "http://localhost:9",
		"http://127.0.0.1:8765/": "http://127.0.0.1:8765",
		"https://box.example":    "https://box.example",
		"[::1]:8765":             "http://[::1]:8765",
		" 10.0.0.2:80 ":          "http://10.0.0.2:80",
	} {
		if got, err := normalizeServer(in, "--server"); err != nil || got != want {
			t.Errorf("normalizeServer(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"", "http://", "ftp://x:1", "host:99999", "host:port", "http://h:1/?q=1"} {
		if got, err := normalizeServer(in, "--server"); err == nil {
			t.Errorf("normalizeServer(%q) = %q, want an error", in, got)
		} else if !strings.Contains(err.Error(), "--server") {
			t.Errorf("normalizeServer(%q): %v does not name the flag", in, err)
		}
	}
}

func TestDetacher(t *testing.T) {
	keys, err := parseDetachKeys("ctrl-p,ctrl-q")
	if err != nil || string(keys) != "\x10\x11" {
		t.Fatalf("parseDetachKeys: %q %v", keys, err)
	}
	for _, tc := range []struct {
		in     []string // reads
		send   string
		detach bool
	}{
		{[]string{"abc"}, "abc", false},
		{[]string{"ab\x10\x11cd"}, "ab", true},
		{[]string{"ab\x10", "\x11"}, "ab", true},     // split across reads
		{[]string{"\x10x"}, "\x10x", false},          // Ctrl-P alone goes on
		{[]string{"\x10", "\x10\x11"}, "\x10", true}, // Ctrl-P Ctrl-P Ctrl-Q
		{[]string{"\x11"}, "\x11", false},
	} {
		d := &detacher{keys: keys}
		var sent string
		detached := false
		for _, r := range tc.in {
			s, det := d.feed([]byte(r))
			sent += string(s)
			if det {
				detached = true
				break
			}
		}
		if sent != tc.send || detached != tc.detach {
			t.Errorf("feed %q: sent %q detach %v; want %q %v", tc.in, sent, detached, tc.send, tc.detach)
		}
	}
	for _, bad := range []string{"", "ctrl-", "ctrl-1", "meta-x", "ab"} {
		if _, err := parseDetachKeys(bad); err == nil {
			t.Errorf("parseDetachKeys(%q) accepted", bad)
		}
	}
	if k, err := parseDetachKeys("ctrl-a,d"); err != nil || string(k) != "\x01d" {
		t.Errorf("ctrl-a,d: %q %v", k, err)
	}
}

func TestOneLineAndAge(t *testing.T) {
	if got := oneLine("#!/bin/bash\nset -e\n\n  make   test\n"); got != "set -e; make test" {
		t.Errorf("oneLine: %q", got)
	}
	if got := clip("abcdef", 4); got != "abc…" {
		t.Errorf("clip: %q", got)
	}
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	for ts, want := range map[string]string{
		"2026-12-01T11:59:15.000Z": "45s",
		"2026-12-01T11:48:00Z":     "12m",
		"2026-12-01T06:59:59.5Z":   "5h",
		"2026-11-27T12:00:00Z":     "4d",
		"garbage":                  "?",
	} {
		if got := age(ts, now); got != want {
			t.Errorf("age(%s) = %s, want %s", ts, got, want)
		}
	}
}

func TestOptSecondsShowsNoDefault(t *testing.T) {
	c := killCmd(theClientFlags)
	f := c.Flags().Lookup("grace")
	if f.DefValue != "" {
		t.Errorf("--grace default %q: help would show it", f.DefValue)
	}
	if err := f.Value.Set("-1"); err == nil {
		t.Errorf("--grace -1 accepted")
	}
}
