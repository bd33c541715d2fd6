//go:build unix

package egress

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/pflag"
)

// InitMain is `sbx __sandbox-init`, PID 1 of a docker-driver sandbox: it
// runs the egress bridge on 127.0.0.1:3128, reaps the orphans that every
// init must, and exits on SIGTERM (docker stop). The agent's processes
// arrive through docker exec, not as its children.
func InitMain(ctx context.Context, args []string, stderr io.Writer) int {
	fs := pflag.NewFlagSet("sbx __sandbox-init", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	listen := fs.String("listen", "127.0.0.1:3128", "the sandbox's proxy address")
	socket := fs.String("socket", "", "the egress proxy's Unix socket")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *socket == "" {
		fmt.Fprintln(stderr, "sbx __sandbox-init: --socket is required")
		return 2
	}
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGTERM, os.Interrupt)
	defer stop()
	ln, err := ListenBridge(ctx, *listen)
	if err != nil {
		fmt.Fprintf(stderr, "sbx __sandbox-init: %v\n", err)
		return 1
	}
	go Bridge(ctx, ln, *socket)
	reap(ctx)
	return 0
}
