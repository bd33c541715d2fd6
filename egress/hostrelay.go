package egress

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/pflag"

	"github.com/sbxhq/sbx/spec"
)

// A port on the host's loopback (network.hostPorts) is reached through
// a relay, `sbx __host-relay`, in a container on the host's network,
// that listens on a Unix socket only the egress proxy's container mounts.
// For a request to spec.HostAlias:PORT that the policy lets through, the
// proxy connects and writes DIAL PORT\n (the published ports' protocol);
// the relay dials 127.0.0.1:PORT (then [::1]:PORT) only when PORT is one
// of its own --port flags, fixed when the driver made it, and answers
// OK\n or ERR reason\n, then carries the bytes. The agent never talks to
// the relay: its requests reach it only through the proxy's checks.

// HostRelayVerb is the relay's hidden sbx verb.
const HostRelayVerb = "__host-relay"

// hostPortsRule is the rule a decision about spec.HostAlias names in the
// log.
const hostPortsRule = "network.hostPorts"

// hostAlias reports whether d is the host's loopback, by its alias.
func (d dest) hostAlias() bool {
	return !d.ip.IsValid() && strings.EqualFold(d.host, spec.HostAlias)
}

// HostRelayMain is `sbx __host-relay`: it serves DIAL requests on
// --socket for the --port ports of the host's loopback, until SIGTERM.
func HostRelayMain(ctx context.Context, args []string, stderr io.Writer) int {
	fs := pflag.NewFlagSet("sbx "+HostRelayVerb, pflag.ContinueOnError)
	fs.SetOutput(stderr)
	socket := fs.String("socket", "", "the Unix socket the egress proxy connects to")
	ports := fs.IntSlice("port", nil, "a port of the host's loopback the proxy may reach (repeatable)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *socket == "" || len(*ports) == 0 {
		fmt.Fprintf(stderr, "sbx %s: --socket and at least one --port are required\n", HostRelayVerb)
		return 2
	}
	for _, p := range *ports {
		if p < 1 || p > 65535 {
			fmt.Fprintf(stderr, "sbx %s: invalid port %d\n", HostRelayVerb, p)
			return 2
		}
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	ln, err := listenOn("unix:" + *socket)
	if err != nil {
		fmt.Fprintf(stderr, "sbx %s: %v\n", HostRelayVerb, err)
		return 1
	}
	if err := ServeHostRelay(ctx, ln, *ports, nil); err != nil {
		fmt.Fprintf(stderr, "sbx %s: %v\n", HostRelayVerb, err)
		return 1
	}
	return 0
}

// ServeHostRelay serves the relay's connections on ln: each asks for one
// of ports, dialled on loopback with dial (nil: net.Dialer), until ctx
// ends. At most PortsActive connections are served at once.
func ServeHostRelay(ctx context.Context, ln net.Listener, ports []int, dial func(ctx context.Context, network, addr string) (net.Conn, error)) error {
	if dial == nil {
		d := net.Dialer{Timeout: 5 * time.Second}
		dial = d.DialContext
	}
	slots := make(chan struct{}, PortsActive)
	return serveConns(ctx, ln, slots, closeConn, func(c net.Conn) {
		defer c.Close()
		c.SetReadDeadline(time.Now().Add(portsHelloTimeout))
		line, err := readProtoLine(c)
		if err != nil {
			return
		}
		port, ok := dialPort(line)
		if !ok || !slices.Contains(ports, port) {
			io.WriteString(c, "ERR not a port of network.hostPorts\n")
			return
		}
		c.SetReadDeadline(time.Time{})
		serveLoopback(ctx, c, port, dial)
	})
}

// dialHostRelay connects to the relay at socket for the host's loopback
// port, as the proxy's upstream.
func dialHostRelay(ctx context.Context, socket string, port int) (net.Conn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", socket)
	if err != nil {
		return nil, fmt.Errorf("the relay to the host is not there: %v", err)
	}
	if gone, err := askDial(c, port); err != nil {
		c.Close()
		if gone {
			return nil, fmt.Errorf("the relay to the host did not answer: %v", err)
		}
		return nil, err
	}
	return c, nil
}

// hostAddr is how the log names the host's loopback port.
func hostAddr(port int) string { return "host loopback:" + strconv.Itoa(port) }
