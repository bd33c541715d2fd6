package egress

import (
	"context"
	"errors"
	"net"
	"time"
)

// Bridge serves the sandbox's proxy address (127.0.0.1:3128) by carrying
// each connection over the Unix socket shared with the egress container:
// the sandbox has no network interface but loopback.
func Bridge(ctx context.Context, ln net.Listener, socket string) error {
	return serveConns(ctx, ln, 0, nil, func(c net.Conn) {
		defer c.Close()
		u, err := dialRetry(ctx, socket)
		if err != nil {
			return
		}
		defer u.Close()
		splice(c, u)
	})
}

// dialRetry dials the socket, waiting briefly for a proxy that is still
// starting.
func dialRetry(ctx context.Context, socket string) (net.Conn, error) {
	var d net.Dialer
	deadline := time.Now().Add(5 * time.Second)
	for {
		c, err := d.DialContext(ctx, "unix", socket)
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
