package nsprocs

import (
	"os"
	"testing"
)

// The caller's own namespace holds the caller, running, by its own pid.
func TestOfFindsTheCaller(t *testing.T) {
	ps, err := Of(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range ps {
		if p.Host == os.Getpid() {
			if p.State == 0 || p.Name == "" || p.NS == 0 {
				t.Fatalf("the caller's entry is incomplete: %+v", p)
			}
			return
		}
	}
	t.Fatalf("the caller %d is not among the %d processes of its namespace", os.Getpid(), len(ps))
}
