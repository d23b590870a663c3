package isolation

import (
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestHandledNetFailsClosedBelowABI4: proxy-only on a kernel without
// Landlock's network rules is an error (the job exits 125), never a job
// left free to connect anywhere.
func TestHandledNetFailsClosedBelowABI4(t *testing.T) {
	cfg := &JobConfig{Policy: Policy{Enabled: true, NetRestrict: true, NetConnectTCP: []uint16{18080}}}
	for abi := 1; abi < minNetABI; abi++ {
		if _, err := handledNet(cfg, abi); err == nil || !strings.Contains(err.Error(), "proxy-only needs Landlock ABI 4") {
			t.Errorf("ABI %d: err %v", abi, err)
		}
	}
	got, err := handledNet(cfg, minNetABI)
	if err != nil || got != unix.LANDLOCK_ACCESS_NET_BIND_TCP|unix.LANDLOCK_ACCESS_NET_CONNECT_TCP {
		t.Errorf("ABI 4: %#x %v", got, err)
	}
	if got, err := handledNet(&JobConfig{Policy: Policy{Enabled: true}}, 7); got != 0 || err != nil {
		t.Errorf("open policy: %#x %v", got, err)
	}
}
