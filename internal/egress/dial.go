package egress

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// dialTimeout bounds a connection to an upstream.
const dialTimeout = 15 * time.Second

// errAddressNotAllowed is a dial the guard refused.
var errAddressNotAllowed = errors.New("address_not_allowed")

// dialer connects to upstreams. The check is made in the dialer's Control
// hook, on the address actually connected to: a name that resolves to
// 169.254.169.254, or is re-resolved to it between a check and the
// connect (DNS rebinding), is refused all the same.
type dialer struct {
	hosts        map[string]string // --egress-hosts: name → address
	allowPrivate bool
	// forbidden are the server's own listeners (API, metrics, this
	// proxy): never reached through the proxy, whatever
	// --egress-allow-private says, or a job would use the API by proxy.
	forbidden func() []netip.AddrPort
}

func (d *dialer) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	if a, ok := d.hosts[strings.ToLower(host)]; ok {
		addr = net.JoinHostPort(a, port)
	}
	nd := net.Dialer{Timeout: dialTimeout, Control: d.control}
	return nd.DialContext(ctx, network, addr)
}

func (d *dialer) control(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("%w: %s: %v", errAddressNotAllowed, address, err)
	}
	return d.check(ap)
}

// check refuses the server's own listeners always, and loopback,
// link-local (cloud metadata), private and unspecified addresses unless
// allowPrivate.
func (d *dialer) check(ap netip.AddrPort) error {
	ip := ap.Addr().Unmap()
	if d.forbidden != nil {
		for _, f := range d.forbidden() {
			if f.Port() != ap.Port() {
				continue
			}
			// Any address of this host on a listener's port is taken
			// for that listener: which addresses reach a socket bound
			// to 0.0.0.0 or 127.0.0.1 is the kernel's business.
			if f.Addr().Unmap() == ip || isLocal(ip) {
				return fmt.Errorf("%w: %s is one of the server's own listeners", errAddressNotAllowed, ap)
			}
		}
	}
	if d.allowPrivate {
		return nil
	}
	switch {
	case ip.IsLoopback(), ip.IsLinkLocalUnicast(), ip.IsLinkLocalMulticast(), ip.IsPrivate(),
		ip.IsUnspecified(), ip.IsMulticast(), ip.IsInterfaceLocalMulticast(), isCGNAT(ip):
		return fmt.Errorf("%w: %s is a loopback, link-local, private or unspecified address (the server's --egress-allow-private lets it through)", errAddressNotAllowed, ap.Addr())
	}
	return nil
}

// isCGNAT: 100.64.0.0/10, shared address space (also where some clouds
// put their metadata services).
func isCGNAT(ip netip.Addr) bool {
	return ip.Is4() && netip.MustParsePrefix("100.64.0.0/10").Contains(ip)
}

// isLocal reports whether ip reaches this host: loopback, unspecified, or
// an address of one of its interfaces.
func isLocal(ip netip.Addr) bool {
	if ip.IsLoopback() || ip.IsUnspecified() {
		return true
	}
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return true // fail closed: unknown is taken for ours
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok {
			if x, ok := netip.AddrFromSlice(n.IP); ok && x.Unmap() == ip {
				return true
			}
		}
	}
	return false
}

// parseHosts reads hosts-file lines: an address, then names.
func parseHosts(path string) (map[string]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--egress-hosts %s: %w", path, err)
	}
	m := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for n := 1; sc.Scan(); n++ {
		line, _, _ := strings.Cut(sc.Text(), "#")
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if _, err := netip.ParseAddr(f[0]); err != nil || len(f) < 2 {
			return nil, fmt.Errorf("--egress-hosts %s line %d: want an address then names, got %q", path, n, strings.TrimSpace(line))
		}
		for _, name := range f[1:] {
			m[strings.ToLower(name)] = f[0]
		}
	}
	return m, sc.Err()
}

// listenerAddrs turns listener addresses into AddrPorts, dropping those
// that are not IP:port.
func listenerAddrs(addrs []string) []netip.AddrPort {
	var out []netip.AddrPort
	for _, a := range addrs {
		host, port, err := net.SplitHostPort(a)
		if err != nil {
			continue
		}
		p, err := strconv.ParseUint(port, 10, 16)
		if err != nil {
			continue
		}
		ip, err := netip.ParseAddr(host)
		if err != nil {
			ip = netip.IPv6Unspecified() // a name: take it for every local address
		}
		out = append(out, netip.AddrPortFrom(ip, uint16(p)))
	}
	return out
}
