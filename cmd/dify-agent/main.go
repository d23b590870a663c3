// Command dify-agent is the agent's CLI to its backend, the Agent Stub. It
// runs inside the sandbox; see docs/dify-agent.md.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/shellctl/shellctl/internal/agentstub/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Main(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr, os.Getenv)
	stop()
	os.Exit(code)
}
