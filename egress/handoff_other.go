//go:build !linux

package egress

import (
	"context"
	"net"
	"sync"
	"time"
)

// canHandOff: only Linux's proxy takes the sandbox's connections (the
// bridge and the proxy run in Linux containers); elsewhere the bridge
// copies.
const canHandOff = false

func sendConn(c, u net.Conn) error { return errNoHandoff }

// serveUnix serves requests on a Unix connection.
func (p *Proxy) serveUnix(ctx context.Context, c *net.UnixConn, _ *sync.WaitGroup) {
	c.SetReadDeadline(time.Now().Add(p.opts.HeaderTimeout))
	p.handle(ctx, c, c)
}

// listenSandbox listens on the sandbox's proxy address and returns what
// serves it through the proxy's Unix socket: Bridge, which copies here.
func listenSandbox(ctx context.Context, addr, socket string) (func() error, error) {
	ln, err := ListenBridge(ctx, addr)
	if err != nil {
		return nil, err
	}
	return func() error { return Bridge(ctx, ln, socket) }, nil
}
