package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/spf13/cobra"
)

// healthcheckCmd is `shellctl healthcheck [HOST:PORT]`: GET /healthz of a
// server on this machine, exit 0 when it answers 200 {"status":"ok"}, 1
// otherwise. It is the image's HEALTHCHECK: the hardened image has no
// curl to spare, and a container engine runs it inside the container,
// where the server listens. The request goes straight to the address (no
// proxy from the environment) with that address as its Host, an IP the
// server always accepts; no token is needed for /healthz.
func healthcheckCmd(cf *clientFlags) *cobra.Command {
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "healthcheck [HOST:PORT]",
		Short: "Exit 0 if the server at HOST:PORT (default " + defaultListen + ") answers GET /healthz, else 1",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			addr := defaultListen
			if len(args) == 1 {
				addr = args[0]
			}
			if _, _, err := net.SplitHostPort(addr); err != nil {
				return &usageError{fmt.Sprintf("healthcheck: %q is not HOST:PORT (e.g. 127.0.0.1:5004): %v", addr, err)}
			}
			if err := probeHealth(cmd.Context(), addr, timeout); err != nil {
				return &jobExit{code: 1, msg: "healthcheck: " + err.Error()}
			}
			fmt.Fprintln(cmd.OutOrStdout(), "ok")
			return nil
		},
	}
	cmd.Flags().DurationVar(&timeout, "timeout", 3*time.Second, "give up after this long (unhealthy)")
	withoutClientFlags(cmd, cf)
	return cmd
}

// probeHealth GETs http://addr/healthz and wants 200 with status "ok".
func probeHealth(ctx context.Context, addr string, timeout time.Duration) error {
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	url := "http://" + addr + "/healthz"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return fmt.Errorf("GET %s: %w", url, err)
	}
	hc := &http.Client{Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true}}
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("GET %s: %w", url, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s (want 200 OK)", url, resp.Status)
	}
	var h struct {
		Status string `json:"status"`
	}
	if err := json.Unmarshal(body, &h); err != nil || h.Status != "ok" {
		return fmt.Errorf("GET %s: 200 with %q, want {\"status\":\"ok\"}", url, body)
	}
	return nil
}
