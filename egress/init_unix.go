//go:build unix

package egress

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/pflag"
)

// InitMain is `sbx __sandbox-init`, PID 1 of a docker-driver or
// kubernetes-driver sandbox: it runs the egress bridge on 127.0.0.1:3128
// (to the proxy's Unix socket, --socket, or to the TCP address in
// --upstream-file), keeps connections parked on the forwarder of its
// published ports (--ports-socket, ParkPorts), reaps the orphans that
// every init must, and exits on SIGTERM (docker stop, pod deletion). The agent's processes arrive
// through exec, not as its children.
func InitMain(ctx context.Context, args []string, stderr io.Writer) int {
	fs := pflag.NewFlagSet("sbx __sandbox-init", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	listen := fs.String("listen", "127.0.0.1:3128", "the sandbox's proxy address")
	socket := fs.String("socket", "", "the egress proxy's Unix socket")
	upstreamFile := fs.String("upstream-file", "", "a file holding the egress proxy's TCP address (host:port)")
	portsSocket := fs.String("ports-socket", "", "the published ports' forwarder's Unix socket, to park connections on")
	services := fs.StringArray("service", nil, "NAME:PORT of a service, served on 127.0.0.1:PORT through the proxy (repeatable; with --socket)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if (*socket == "") == (*upstreamFile == "") {
		fmt.Fprintln(stderr, "sbx __sandbox-init: one of --socket and --upstream-file is required")
		return 2
	}
	var addrs []ServiceAddr
	for _, s := range *services {
		a, err := ParseServiceAddr(s)
		if err == nil && *socket == "" {
			err = errors.New("services need --socket")
		}
		if err != nil {
			fmt.Fprintf(stderr, "sbx __sandbox-init: --service: %v\n", err)
			return 2
		}
		addrs = append(addrs, a)
	}
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGTERM, os.Interrupt)
	defer stop()
	ln, err := ListenBridge(ctx, *listen)
	if err != nil {
		fmt.Fprintf(stderr, "sbx __sandbox-init: %v\n", err)
		return 1
	}
	if *socket != "" {
		go Bridge(ctx, ln, *socket)
	} else {
		go BridgeFile(ctx, ln, *upstreamFile)
	}
	if *portsSocket != "" {
		go ParkPorts(ctx, *portsSocket)
	}
	if len(addrs) > 0 {
		go func() {
			if err := ServeServices(ctx, addrs, *socket); err != nil {
				fmt.Fprintf(stderr, "sbx __sandbox-init: services: %v\n", err)
			}
		}()
	}
	reap(ctx)
	return 0
}
