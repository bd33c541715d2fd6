package egress

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"time"
)

// Bridge serves the sandbox's proxy address (127.0.0.1:3128) by carrying
// each connection over the Unix socket shared with the egress container:
// the sandbox has no network interface but loopback.
func Bridge(ctx context.Context, ln net.Listener, socket string) error {
	return bridge(ctx, ln, func() (string, string, error) { return "unix", socket, nil })
}

// BridgeFile serves the sandbox's proxy address by carrying each
// connection over TCP to the proxy whose address (host:port) the file at
// path holds when the connection arrives: the kubernetes driver's proxy
// is a pod whose address is known only once it runs, and changes when the
// pod is made again. A missing or malformed file refuses the connection.
// (The file is no boundary: the sandbox can dial anything its network
// policy allows without the bridge.)
func BridgeFile(ctx context.Context, ln net.Listener, path string) error {
	return bridge(ctx, ln, func() (string, string, error) {
		b, err := os.ReadFile(path)
		if err != nil {
			return "", "", err
		}
		addr := string(bytes.TrimSpace(b))
		if _, _, err := net.SplitHostPort(addr); err != nil || len(addr) > 300 {
			return "", "", fmt.Errorf("%s: not a host:port", path)
		}
		return "tcp", addr, nil
	})
}

func bridge(ctx context.Context, ln net.Listener, upstream func() (network, addr string, err error)) error {
	return serveConns(ctx, ln, 0, nil, func(c net.Conn) {
		defer c.Close()
		network, addr, err := upstream()
		if err != nil {
			return
		}
		u, err := dialRetry(ctx, network, addr)
		if err != nil {
			return
		}
		defer u.Close()
		splice(c, u)
	})
}

// dialRetry dials the proxy, waiting briefly for one that is still
// starting.
func dialRetry(ctx context.Context, network, addr string) (net.Conn, error) {
	var d net.Dialer
	deadline := time.Now().Add(5 * time.Second)
	for {
		c, err := d.DialContext(ctx, network, addr)
		if err == nil || time.Now().After(deadline) || ctx.Err() != nil {
			return c, err
		}
		var ne *net.OpError
		if !errors.As(err, &ne) {
			return nil, err
		}
		time.Sleep(50 * time.Millisecond)
	}
}
