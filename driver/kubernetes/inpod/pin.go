package inpod

import (
	"context"
	"fmt"
	"io"
	"net/netip"

	"github.com/spf13/pflag"
)

// PinTable is the nftables table (family inet: IPv4 and IPv6 in one)
// that __k8s-pin writes in the sandbox pod's network namespace.
const PinTable = "sbx-pin"

// Pin is __k8s-pin --allow ADDR:PORT [--allow …]: the sandbox pod's
// first init container, the only one of its containers with NET_ADMIN,
// writes the pod's egress rules in the pod's own network namespace before
// the agent's container starts, as a service mesh's init container
// (Istio's istio-init, Linkerd's proxy-init) writes its redirection: what
// leaves the pod is loopback, replies, and TCP to each --allow address
// (its egress proxy pod); what comes in is loopback and replies. Every
// other packet, IPv4 or IPv6, is dropped. The rules replace the table
// atomically (one netlink batch) and are read back before it exits 0.
// The agent's container, which starts after this one has ended, has no
// NET_ADMIN and cannot change them.
func Pin(_ context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) int {
	fs := pflag.NewFlagSet("sbx __k8s-pin", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	allow := fs.StringArray("allow", nil, "an address:port the pod may open TCP connections to (its egress proxy)")
	remove := fs.Bool("remove", false, "remove the table instead (fails without NET_ADMIN: what a hostile agent would try)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *remove {
		if err := unpin(); err != nil {
			fmt.Fprintf(stderr, "sbx __k8s-pin --remove: %v\n", err)
			return 1
		}
		return 0
	}
	if len(*allow) == 0 {
		fmt.Fprintln(stderr, "usage: sbx __k8s-pin --allow ADDR:PORT [--allow ADDR:PORT…]")
		return 2
	}
	var to []netip.AddrPort
	for _, a := range *allow {
		ap, err := netip.ParseAddrPort(a)
		if err != nil || ap.Port() == 0 || ap.Addr().Zone() != "" || !ap.Addr().IsValid() || ap.Addr().IsUnspecified() {
			fmt.Fprintf(stderr, "sbx __k8s-pin: --allow %q is not an address:port\n", a)
			return 2
		}
		to = append(to, netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port()))
	}
	if err := pin(to); err != nil {
		fmt.Fprintf(stderr, "sbx __k8s-pin: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "sbx __k8s-pin: egress pinned to %v (table inet %s)\n", to, PinTable)
	return 0
}
