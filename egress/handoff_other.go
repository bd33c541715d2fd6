//go:build !linux

package egress

import (
	"context"
	"net"
	"time"
)

// canHandOff: only Linux's proxy takes the sandbox's connections (the
// bridge and the proxy run in Linux containers); elsewhere the bridge
// copies.
const canHandOff = false

func sendConn(c, u net.Conn) error { return errNoHandoff }

// serveUnix serves requests on a Unix connection.
func (p *Proxy) serveUnix(ctx context.Context, c *net.UnixConn) {
	c.SetReadDeadline(time.Now().Add(p.opts.HeaderTimeout))
	p.handle(ctx, c, c)
}
