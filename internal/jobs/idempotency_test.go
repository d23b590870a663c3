package jobs

import (
	"context"
	"strings"
	"testing"
	"time"
)

func TestRunFingerprintCoversTheWorkAndOnlyIt(t *testing.T) {
	base := RunPrint{ScriptSHA256: "aa", Mode: "pty", Cwd: "/w", Env: map[string]string{"A": "1", "B": "2"}, Cols: 200, Rows: 50, SessionID: "s"}
	fp := base.Fingerprint()
	if !strings.HasPrefix(fp, "v1:") || len(fp) != 3+64 {
		t.Fatalf("fingerprint %q: want v1: and 64 hex digits", fp)
	}
	// The same request built again (a map is a new map, in another order).
	same := base
	same.Env = map[string]string{"B": "2", "A": "1"}
	if same.Fingerprint() != fp {
		t.Fatal("the same request gave another fingerprint")
	}
	if (RunPrint{ScriptSHA256: "aa"}).Fingerprint() != (RunPrint{ScriptSHA256: "aa", Env: map[string]string{}}).Fingerprint() {
		t.Fatal("no env and an empty env differ")
	}
	for name, change := range map[string]func(p *RunPrint){
		"script":     func(p *RunPrint) { p.ScriptSHA256 = "ab" },
		"mode":       func(p *RunPrint) { p.Mode = "stdio" },
		"cwd":        func(p *RunPrint) { p.Cwd = "/x" },
		"env value":  func(p *RunPrint) { p.Env = map[string]string{"A": "1", "B": "3"} },
		"env name":   func(p *RunPrint) { p.Env = map[string]string{"A": "1", "C": "2"} },
		"cols":       func(p *RunPrint) { p.Cols = 80 },
		"rows":       func(p *RunPrint) { p.Rows = 24 },
		"session id": func(p *RunPrint) { p.SessionID = "t" },
	} {
		p := base
		p.Env = map[string]string{"A": "1", "B": "2"}
		change(&p)
		if p.Fingerprint() == fp {
			t.Errorf("a different %s gave the same fingerprint", name)
		}
	}
}

func TestInputFingerprintIsTheJobAndTheText(t *testing.T) {
	fp := InputFingerprint("0123456789abcdef", []byte("yes\n"))
	if InputFingerprint("0123456789abcdef", []byte("yes\n")) != fp {
		t.Fatal("same input, other fingerprint")
	}
	if InputFingerprint("0123456789abcdef", []byte("yes")) == fp || InputFingerprint("0123456789abcdee", []byte("yes\n")) == fp {
		t.Fatal("another text or job gave the same fingerprint")
	}
}

func TestFlightsMakeARepeatWaitForTheFirst(t *testing.T) {
	var f flights
	ctx := context.Background()
	release, err := f.acquire(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	// Another key is not held up.
	other, err := f.acquire(ctx, "other")
	if err != nil {
		t.Fatal(err)
	}
	other()
	got := make(chan func(), 1)
	go func() {
		r, err := f.acquire(ctx, "k")
		if err != nil {
			t.Error(err)
		}
		got <- r
	}()
	select {
	case <-got:
		t.Fatal("the repeat went ahead while the first held the key")
	case <-time.After(50 * time.Millisecond):
	}
	release()
	release() // twice is harmless
	select {
	case r := <-got:
		r()
	case <-time.After(5 * time.Second):
		t.Fatal("the repeat did not go on once the first let go")
	}
	// A repeat whose client gives up stops waiting.
	hold, _ := f.acquire(ctx, "k")
	defer hold()
	c, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if _, err := f.acquire(c, "k"); err == nil {
		t.Fatal("a cancelled repeat still took the key")
	}
}
