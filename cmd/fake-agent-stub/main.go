// Command fake-agent-stub serves the in-memory fake Agent Stub
// (internal/agentstub/fakestub) for trying dify-agent by hand. It prints the
// base URL to use as DIFY_AGENT_STUB_API_BASE_URL and serves until stopped.
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
	"syscall"
	"time"

	"github.com/shellctl/shellctl/internal/agentstub/fakestub"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:0", "address to listen on")
	token := flag.String("token", "", "bearer token to accept (required)")
	flag.Parse()
	if *token == "" || flag.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "usage: fake-agent-stub --token TOKEN [--listen ADDR]")
		os.Exit(2)
	}
	if err := run(*listen, *token); err != nil {
		fmt.Fprintln(os.Stderr, "fake-agent-stub:", err)
		os.Exit(1)
	}
}

func run(listen, token string) error {
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return err
	}
	stub := fakestub.New(token)
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
