// Command sbx is GitOps for AI-agent sandboxes: it validates a committed
// sandbox.yaml, plans and applies it to a Docker Sandboxes backend or Docker
// Engine, and runs a bounded agent loop inside the result.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	os.Exit(run())
}

// run is main without the exit: Ctrl-C and SIGTERM (as `sbx loop stop`
// sends) cancel the context, so every verb finishes or abandons its current
// step cleanly.
func run() int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return Main(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr, os.Environ())
}
