package isolation

// Landlock's network rules (ABI 4, Linux 6.7): the egress proxy's
// proxy-only policy. The domain handles TCP bind and connect; connect is
// granted to the proxy's port (and --egress-allow-port ports) only, bind
// to none. UDP (so DNS) is not handled: Landlock had no UDP rights when
// this was written, and a job that resolves a name still has to connect
// to use it.

import (
	"fmt"
	"slices"
	"unsafe"

	"golang.org/x/sys/unix"
)

// landlockRuleNetPort is LANDLOCK_RULE_NET_PORT (not in x/sys/unix).
const landlockRuleNetPort = 2

// netPortAttr is struct landlock_net_port_attr.
type netPortAttr struct {
	allowedAccess uint64
	port          uint64
}

// minNetABI is the first Landlock ABI with network rules.
const minNetABI = 4

// handledNet is the network rights cfg's domain handles (0: none), or an
// error when the policy asks for them and the kernel cannot: proxy-only
// fails closed rather than leave jobs a direct way out.
func handledNet(cfg *JobConfig, abi int) (uint64, error) {
	if !cfg.Policy.NetRestrict {
		return 0, nil
	}
	if abi < minNetABI {
		return 0, fmt.Errorf("the egress policy proxy-only needs Landlock ABI %d (Linux 6.7) for network rules, this kernel has ABI %d: start the server with --egress=open, or on a newer kernel", minNetABI, abi)
	}
	return unix.LANDLOCK_ACCESS_NET_BIND_TCP | unix.LANDLOCK_ACCESS_NET_CONNECT_TCP, nil
}

// addNetRules grants TCP connect to each of ports.
func addNetRules(rulesetFD int, ports []uint16) error {
	for _, p := range ports {
		a := netPortAttr{allowedAccess: unix.LANDLOCK_ACCESS_NET_CONNECT_TCP, port: uint64(p)}
		_, _, e := unix.Syscall6(unix.SYS_LANDLOCK_ADD_RULE, uintptr(rulesetFD),
			landlockRuleNetPort, uintptr(unsafe.Pointer(&a)), 0, 0, 0)
		if e != 0 {
			return fmt.Errorf("landlock_add_rule (TCP connect to port %d): %w", p, e)
		}
	}
	return nil
}

// netNote says what the network rules were, for the record.
func netNote(ports []uint16) string {
	ps := slices.Clone(ports)
	slices.Sort(ps)
	return fmt.Sprintf("network: TCP connect only to ports %v (egress proxy-only), TCP bind to none; UDP not restricted", ps)
}
