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
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := Main(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr, os.LookupEnv)
	stop()
	os.Exit(code)
}
