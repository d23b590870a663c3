package runner

import (
	"testing"

	"github.com/creack/pty"
)

// masterPending tells drain what is left in the terminal: output waiting
// (keep reading), and whether every holder has closed it (the pump reaches
// the end by itself: never close the master under it, or a loaded
// machine's slow pump loses the job's last output).
func TestMasterPending(t *testing.T) {
	master, slave, err := pty.Open()
	if err != nil {
		t.Fatalf("open a terminal (a runner cannot run pty jobs without one): %v", err)
	}
	defer master.Close()
	if hup, in := masterPending(master); hup || in {
		t.Fatalf("idle terminal: hup %v in %v, want neither", hup, in)
	}
	if _, err := slave.Write([]byte("last words\n")); err != nil {
		t.Fatal(err)
	}
	if hup, in := masterPending(master); hup || !in {
		t.Fatalf("terminal with output: hup %v in %v, want in only", hup, in)
	}
	slave.Close()
	if hup, _ := masterPending(master); !hup {
		t.Fatalf("terminal whose last holder closed it: no hup")
	}
	buf := make([]byte, 64)
	n, _ := master.Read(buf)
	if string(buf[:n]) != "last words\r\n" {
		t.Fatalf("output after the hang-up = %q: it must still be readable", buf[:n])
	}
}
