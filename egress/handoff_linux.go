package egress

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// canHandOff: Linux passes sockets over Unix sockets (unix(7)), and the
// proxy can check what it was given (SO_DOMAIN, SO_PROTOCOL: socket(7)).
const canHandOff = true

// sendConn sends c's socket over u with handoffMessage, in one message.
// It returns errNoHandoff when the system refuses to pass it at all: gVisor
// (runsc) fails the sendmsg with EINVAL, its sockets being its own, not
// the host's, and sends nothing.
func sendConn(c, u net.Conn) error {
	tc, ok := c.(*net.TCPConn)
	uc, ok2 := u.(*net.UnixConn)
	if !ok || !ok2 {
		return errNoHandoff
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return err
	}
	var werr error
	err = rc.Control(func(fd uintptr) {
		_, _, werr = uc.WriteMsgUnix([]byte(handoffMessage), unix.UnixRights(int(fd)), nil)
	})
	if err == nil {
		err = werr
	}
	if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.EOPNOTSUPP) {
		return fmt.Errorf("%w: %v", errNoHandoff, err)
	}
	return err
}

// firstRead is the most a connection's first read on the Unix socket
// takes; it must not exceed the request reader's buffer (4 KiB), which
// takes it whole on its first fill.
const firstRead = 512

// serveUnix serves a connection on the proxy's Unix socket: either the
// hand-over of one TCP connection, or of the listening socket, from the
// sandbox's bridge, or requests on the Unix connection itself (the bridge
// copying, or anything else connecting to the socket). A listener it
// takes it serves in a goroutine that leases adds to.
//
// Whatever connects to the socket may be the agent, and may send any
// bytes with any descriptors. The first read takes the first message
// with room for exactly one descriptor (the kernel closes those that do
// not fit, and says so with MSG_CTRUNC; on 64-bit two fit in that room).
// A request that came without one is served as always; anything else
// with a descriptor, or that starts with the marker, is a hand-over,
// which take accepts only as handoffMessage with one connected TCP
// socket or listenMessage with one listening TCP socket on loopback.
// What arrived is closed otherwise, and the connection dropped. Reads
// after the first carry no room for descriptors, so the kernel closes any
// that come with them.
func (p *Proxy) serveUnix(ctx context.Context, c *net.UnixConn, leases *sync.WaitGroup) {
	c.SetReadDeadline(time.Now().Add(p.opts.HeaderTimeout))
	buf := make([]byte, firstRead)
	oob := make([]byte, unix.CmsgSpace(4))
	n, oobn, flags, _, err := c.ReadMsgUnix(buf, oob)
	n, oobn = max(n, 0), max(oobn, 0)
	fds, others := rights(oob[:oobn])
	truncated := flags&unix.MSG_CTRUNC != 0
	if len(fds) == 0 && others == 0 && !truncated && (n == 0 || buf[0] != handoffMarker) {
		if n == 0 && err == nil {
			err = io.EOF
		}
		p.handle(ctx, c, &prefixed{pre: buf[:n], err: err, r: c})
		return
	}
	if string(buf[:n]) == listenMessage {
		p.takeListener(ctx, c, fds, others, truncated, leases)
		return
	}
	fd, why := take(fds, others, truncated, buf[:n], handoffMessage, checkTCP)
	var hc *handedConn
	if why == "" {
		hc, why = newHandedConn(fd)
	}
	if hc == nil {
		p.log(entry{Decision: "deny", Reason: "refused a handed-over connection: " + why})
		if why == whyNoFD {
			c.Write([]byte{ackNone})
		}
		c.Close()
		return
	}
	_, err = c.Write([]byte{ackTaken})
	c.Close()
	if err != nil {
		// The bridge did not hear that the proxy took it, so it may
		// carry the connection itself: leave it whole.
		hc.release()
		return
	}
	hc.SetReadDeadline(time.Now().Add(p.opts.HeaderTimeout))
	p.handle(ctx, hc, hc)
}

// takeListener checks a listener's hand-over on c and, if it takes it,
// serves the connections it accepts from it until c (the lease) ends, the
// proxy holds maxHeld newer ones, or ctx ends; then it closes it.
func (p *Proxy) takeListener(ctx context.Context, c *net.UnixConn, fds []int, others int, truncated bool, leases *sync.WaitGroup) {
	fd, why := take(fds, others, truncated, []byte(listenMessage), listenMessage, checkListener)
	var ln net.Listener
	if why == "" {
		f := os.NewFile(uintptr(fd), "handed-over listener")
		var err error
		// FileListener serves a descriptor of its own (a dup), which
		// joins the runtime's poller; the socket is non-blocking
		// already (checkListener), so no flag changes for the bridge.
		ln, err = net.FileListener(f)
		f.Close()
		if err != nil {
			why = "not a listener: " + err.Error()
		}
	}
	if why != "" {
		p.log(entry{Decision: "deny", Reason: "refused a handed-over listener: " + why})
		if why == whyNoFD {
			c.Write([]byte{ackNone})
		}
		c.Close()
		return
	}
	// Held before the bridge hears it is, so that listeners handed
	// over one after another are held in that order.
	lctx, end := context.WithCancel(ctx)
	remove := p.held.add(end)
	if _, err := c.Write([]byte{ackTaken}); err != nil {
		remove()
		end()
		ln.Close()
		c.Close()
		return
	}
	c.SetReadDeadline(time.Time{})
	leases.Add(1)
	go func() {
		defer leases.Done()
		defer remove()
		defer c.Close()
		defer end()
		go func() {
			// The bridge sends nothing more: any read's return, its
			// end or bytes, ends the lease.
			c.Read(make([]byte, 1))
			end()
		}()
		go func() {
			<-lctx.Done()
			c.Close()
		}()
		serveConns(lctx, ln, p.slots, p.refuseConn, func(conn net.Conn) { p.serveTCP(ctx, conn) })
	}()
}

// rights returns the descriptors in a message's control data, and the
// number of control messages of other kinds.
func rights(oob []byte) (fds []int, others int) {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		// The kernel writes whole headers; a truncated one holds no
		// descriptor.
		return nil, 1
	}
	for i := range msgs {
		if msgs[i].Header.Level != unix.SOL_SOCKET || msgs[i].Header.Type != unix.SCM_RIGHTS {
			others++
			continue
		}
		got, err := unix.ParseUnixRights(&msgs[i])
		if err != nil {
			others++
			continue
		}
		fds = append(fds, got...)
	}
	return fds, others
}

const whyNoFD = "the hand-over message came without a descriptor"

// take checks a hand-over of one descriptor with the message want, and
// returns the descriptor, or why it refused it; every descriptor it does
// not return it has closed.
func take(fds []int, others int, truncated bool, msg []byte, want string, check func(fd int) string) (int, string) {
	why := ""
	switch {
	case truncated:
		why = "descriptors cut short (more than one sent, or the proxy's table full)"
	case len(fds) > 1:
		why = "more than one descriptor"
	case others > 0:
		why = "control data other than one descriptor"
	case string(msg) != want && len(fds) > 0:
		why = "a descriptor with bytes other than the hand-over message"
	case string(msg) != want:
		why = "the hand-over marker without the hand-over message"
	case len(fds) == 0:
		why = whyNoFD
	default:
		why = check(fds[0])
	}
	if why != "" {
		for _, fd := range fds {
			unix.Close(fd)
		}
		return -1, why
	}
	return fds[0], ""
}

// newHandedConn makes a connection of a handed-over TCP socket, or says
// why not, having closed it. A non-blocking socket (the bridge's, as
// every socket Go makes) joins the runtime's poller, so that its
// deadlines work (os.NewFile); a blocking one would have none, and the
// proxy does not change the flags of a descriptor it shares with the
// sender.
func newHandedConn(fd int) (*handedConn, string) {
	f := os.NewFile(uintptr(fd), "handed-over connection")
	if f.SetReadDeadline(time.Time{}) != nil {
		f.Close()
		return nil, "a blocking socket"
	}
	return &handedConn{f: f}, ""
}

// checkTCP says why fd is not a connected TCP socket, or "" when it is.
// It only asks: it changes nothing on fd.
func checkTCP(fd int) string {
	if why := checkTCPSocket(fd); why != "" {
		return why
	}
	if listening, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_ACCEPTCONN); err != nil || listening != 0 {
		return "a listening socket"
	}
	if _, err := unix.Getpeername(fd); err != nil {
		return "not connected"
	}
	return ""
}

// checkListener says why fd is not a non-blocking TCP socket listening on
// a loopback address, or "" when it is. It only asks.
func checkListener(fd int) string {
	if why := checkTCPSocket(fd); why != "" {
		return why
	}
	if listening, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_ACCEPTCONN); err != nil || listening != 1 {
		return "not a listening socket"
	}
	sa, err := unix.Getsockname(fd)
	if err != nil {
		return "no local address"
	}
	var addr netip.Addr
	switch sa := sa.(type) {
	case *unix.SockaddrInet4:
		addr = netip.AddrFrom4(sa.Addr)
	case *unix.SockaddrInet6:
		addr = netip.AddrFrom16(sa.Addr)
	}
	if !canonical(addr).IsLoopback() {
		return "not listening on a loopback address"
	}
	flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0)
	if err != nil || flags&unix.O_NONBLOCK == 0 {
		return "a blocking socket"
	}
	return ""
}

// checkTCPSocket says why fd is not a TCP socket, or "" when it is.
func checkTCPSocket(fd int) string {
	domain, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_DOMAIN)
	if err != nil {
		return "not a socket"
	}
	if domain != unix.AF_INET && domain != unix.AF_INET6 {
		return "not an IPv4 or IPv6 socket"
	}
	if typ, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_TYPE); err != nil || typ != unix.SOCK_STREAM {
		return "not a stream socket"
	}
	if proto, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_PROTOCOL); err != nil || proto != unix.IPPROTO_TCP {
		return "not a TCP socket"
	}
	return ""
}

// handedConn is a TCP connection the bridge handed over. The proxy only
// reads, writes, shuts down and closes it: no socket option is set (the
// bridge's TCP_NODELAY, set when it accepted the connection, is the
// socket's own). Its Close shuts the sending side down first: the bridge
// may still hold its copy of the socket for a moment, and a close alone
// does not end a connection another process holds open, where a shutdown
// sends the client its end at once.
type handedConn struct {
	f *os.File
}

func (c *handedConn) Read(b []byte) (int, error)  { return c.f.Read(b) }
func (c *handedConn) Write(b []byte) (int, error) { return c.f.Write(b) }

// ReadFrom lets a tunnel's download splice from the upstream's socket to
// the client's, as between two of Go's TCP connections.
func (c *handedConn) ReadFrom(r io.Reader) (int64, error) { return c.f.ReadFrom(r) }

func (c *handedConn) CloseWrite() error { return c.shutdown() }

func (c *handedConn) Close() error {
	c.shutdown()
	return c.f.Close()
}

// release closes the proxy's copy and leaves the connection as it is.
func (c *handedConn) release() { c.f.Close() }

func (c *handedConn) shutdown() error {
	rc, err := c.f.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) { serr = unix.Shutdown(int(fd), unix.SHUT_WR) }); err != nil {
		return err
	}
	return serr
}

// A handed-over connection's addresses are not asked for (the proxy logs
// none), so as not to make system calls for them.
func (c *handedConn) LocalAddr() net.Addr  { return handedAddr{} }
func (c *handedConn) RemoteAddr() net.Addr { return handedAddr{} }

func (c *handedConn) SetDeadline(t time.Time) error      { return c.f.SetDeadline(t) }
func (c *handedConn) SetReadDeadline(t time.Time) error  { return c.f.SetReadDeadline(t) }
func (c *handedConn) SetWriteDeadline(t time.Time) error { return c.f.SetWriteDeadline(t) }

type handedAddr struct{}

func (handedAddr) Network() string { return "tcp" }
func (handedAddr) String() string  { return "handed-over connection" }

// prefixed reads pre, then err if there is one, then r: the bytes of a
// connection's first read, then the rest of it.
type prefixed struct {
	pre []byte
	err error
	r   io.Reader
}

func (p *prefixed) Read(b []byte) (int, error) {
	if len(p.pre) > 0 {
		n := copy(b, p.pre)
		p.pre = p.pre[n:]
		return n, nil
	}
	if p.err != nil {
		return 0, p.err
	}
	return p.r.Read(b)
}
