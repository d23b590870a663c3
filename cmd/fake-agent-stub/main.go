// Command fake-agent-stub serves the in-memory fake Agent Stub
// (internal/agentstub/fakestub) for trying dify-agent by hand and for tests
// that drive it as a process. It prints the base URL to use as
// DIFY_AGENT_STUB_API_BASE_URL and serves until stopped. Besides --token
// (token A), it accepts the purpose tokens fakestub.TokenHomeWrite and
// fakestub.TokenHomeRead and the expired token fakestub.TokenExpired.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/shellctl/shellctl/internal/agentstub/fakestub"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:0", "address to listen on")
	token := flag.String("token", "", "bearer token to accept (required)")
	modes := flag.String("mode", "", "comma-separated failure modes: "+strings.Join(fakestub.ModeNames(), ", "))
	var fails []string
	flag.Func("fail", "ROUTE=MODE: answer ROUTE (\"GET /drive/manifest\", \"*\", \"upload *\", \"download *\") with MODE "+
		"(401 403 404 409 422 500 502 503 raw-error bad-json stall cut drip early-answer read-only); repeatable",
		func(v string) error { fails = append(fails, v); return nil })
	flag.Parse()
	if *token == "" || flag.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "usage: fake-agent-stub --token TOKEN [--listen ADDR] [--mode M,...] [--fail ROUTE=MODE]...")
		os.Exit(2)
	}
	stub := fakestub.New(*token)
	if *modes != "" {
		if err := stub.SetMode(strings.Split(*modes, ",")...); err != nil {
			fmt.Fprintln(os.Stderr, "fake-agent-stub: --mode:", err)
			os.Exit(2)
		}
	}
	for _, f := range fails {
		route, name, ok := strings.Cut(f, "=")
		m, known := fakestub.ParseMode(name)
		if !ok || !known {
			fmt.Fprintf(os.Stderr, "fake-agent-stub: --fail %q: want ROUTE=MODE with a known MODE\n", f)
			os.Exit(2)
		}
		stub.Fail(route, m)
	}
	if err := run(*listen, stub); err != nil {
		fmt.Fprintln(os.Stderr, "fake-agent-stub:", err)
		os.Exit(1)
	}
}

func run(listen string, stub *fakestub.Server) error {
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: stub, ReadHeaderTimeout: 10 * time.Second}
	fmt.Printf("http://%s/agent-stub\n", ln.Addr())

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	stub.Close() // lets stalled requests go
	shutCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutCtx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
