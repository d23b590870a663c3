package jobpeer

import (
	"net"
	"net/netip"
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

// The lookup finds our own client socket, with its inode and our cgroup.
func TestLookupSocketFindsOwnClient(t *testing.T) {
	for _, addr := range []string{"127.0.0.1:0", "[::1]:0"} {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			t.Logf("%s: %v", addr, err)
			continue
		}
		defer ln.Close()
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		sc, err := ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		defer sc.Close()
		p, err := lookupSocket(sc.RemoteAddr().(*net.TCPAddr).AddrPort(), sc.LocalAddr().(*net.TCPAddr).AddrPort())
		if err != nil {
			t.Fatalf("%s: %v", addr, err)
		}
		f, _ := c.(*net.TCPConn).File()
		var st unix.Stat_t
		unix.Fstat(int(f.Fd()), &st)
		f.Close()
		if uint64(p.inode) != st.Ino {
			t.Errorf("%s: inode %d, want %d", addr, p.inode, st.Ino)
		}
		if !p.hasCgroup {
			t.Errorf("%s: no cgroup id", addr)
		}
		t.Logf("%s: %+v uid %d", addr, p, os.Getuid())
		_, err = lookupSocket(netip.MustParseAddrPort("127.0.0.1:1"), sc.LocalAddr().(*net.TCPAddr).AddrPort())
		if err != errNoSocket {
			t.Errorf("lookup of nothing: %v", err)
		}
	}
}
