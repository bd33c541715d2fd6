package egress

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// listenSandbox listens on the sandbox's proxy address and returns what
// serves it through the proxy's Unix socket: bridgeListener.
//
// The listening socket is made here rather than by the net package so
// that it never joins this process's poller: while the proxy accepts from
// it, a connection arriving wakes the proxy alone, not the bridge too. It
// is plain TCP (not Multipath TCP, which the proxy would refuse) and
// non-blocking, as the proxy requires (checkListener).
func listenSandbox(ctx context.Context, addr, socket string) (func() error, error) {
	fd, err := listenTCP(addr)
	if err != nil {
		return nil, err
	}
	return func() error { return bridgeListener(ctx, fd, socket) }, nil
}

// listenBacklog is the backlog asked for; the kernel caps it at
// net.core.somaxconn (listen(2)).
const listenBacklog = 4096

// listenTCP returns a non-blocking TCP socket listening on addr, an IP
// address and port.
func listenTCP(addr string) (int, error) {
	ap, err := netip.ParseAddrPort(addr)
	if err != nil {
		return -1, fmt.Errorf("listen on %q: %v", addr, err)
	}
	family := unix.AF_INET6
	var sa unix.Sockaddr = &unix.SockaddrInet6{Port: int(ap.Port()), Addr: ap.Addr().As16()}
	if ap.Addr().Is4() {
		family, sa = unix.AF_INET, &unix.SockaddrInet4{Port: int(ap.Port()), Addr: ap.Addr().As4()}
	}
	fd, err := unix.Socket(family, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, unix.IPPROTO_TCP)
	if err != nil {
		return -1, fmt.Errorf("listen on %s: %v", addr, err)
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEADDR, 1); err == nil {
		if err = unix.Bind(fd, sa); err == nil {
			err = unix.Listen(fd, listenBacklog)
		}
	}
	if err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("listen on %s: %v", addr, err)
	}
	return fd, nil
}

// Backoff between hand-overs of the listener: from leaseWait, doubling up
// to leaseWaitMax while the proxy does not hold it for long (it is not
// there yet, or something else keeps taking its place).
const (
	leaseWait    = 20 * time.Millisecond
	leaseWaitMax = time.Second
	leaseLong    = 5 * time.Second // a lease this long resets the backoff
	leaseAckWait = 10 * time.Second
)

// lent is what became of an attempt to hand the listener over.
type lent int

const (
	leaseEnded lent = iota // the proxy held it until the lease ended
	notLent                // it did not take it this time; try again
	neverLent              // it does not take listeners; accept here
	cannotSend             // no socket crosses to the proxy (gVisor)
)

// bridgeListener hands the listening socket fd to the proxy on socket
// (listenMessage) and holds the lease while the proxy serves it, then
// hands it to the next proxy, until ctx ends. A proxy that does not take
// listeners leaves the bridge to accept from fd itself (Bridge: it hands
// each connection over, or copies it).
func bridgeListener(ctx context.Context, fd int, socket string) error {
	wait := leaseWait
	for ctx.Err() == nil {
		start := time.Now()
		out := notLent
		if u, err := dialRetry(ctx, "unix", socket); err == nil {
			out = lend(ctx, fd, u.(*net.UnixConn))
			u.Close()
		}
		switch {
		case out == neverLent || out == cannotSend:
			return bridgeAccepting(ctx, fd, socket, out == cannotSend)
		case out == leaseEnded && time.Since(start) > leaseLong:
			wait = leaseWait
		default:
			wait = min(2*wait, leaseWaitMax)
		}
		select {
		case <-ctx.Done():
		case <-time.After(wait):
		}
	}
	unix.Close(fd)
	return nil
}

// lend offers the listener fd to the proxy at the other end of u and,
// once it took it, holds the lease until the proxy ends it or ctx ends.
func lend(ctx context.Context, fd int, u *net.UnixConn) lent {
	_, _, err := u.WriteMsgUnix([]byte(listenMessage), unix.UnixRights(fd), nil)
	switch {
	case errors.Is(err, unix.EINVAL) || errors.Is(err, unix.EOPNOTSUPP):
		return cannotSend
	case err != nil:
		return notLent
	}
	u.SetReadDeadline(time.Now().Add(leaseAckWait))
	reply := make([]byte, 1)
	n, err := u.Read(reply)
	switch {
	case n == 0 && (err == io.EOF || errors.Is(err, unix.ECONNRESET)):
		// Closed without an answer: a proxy that refuses the message
		// (one from before listeners were handed over, which takes only
		// connections) or the listener.
		return neverLent
	case n == 0:
		return notLent
	case reply[0] != ackTaken:
		// ackNone, or an HTTP answer from a proxy that knows no
		// hand-over.
		return neverLent
	}
	u.SetReadDeadline(time.Time{})
	stop := context.AfterFunc(ctx, func() { u.Close() })
	defer stop()
	// The proxy sends nothing more: the read returns when the lease
	// ends.
	u.Read(reply)
	return leaseEnded
}

// bridgeAccepting accepts from the listener fd, which it closes, and
// serves each connection as Bridge does.
func bridgeAccepting(ctx context.Context, fd int, socket string, copyOnly bool) error {
	f := os.NewFile(uintptr(fd), "listener")
	ln, err := net.FileListener(f)
	f.Close()
	if err != nil {
		return err
	}
	b := &unixBridge{socket: socket}
	b.copyOnly.Store(copyOnly)
	return serveConns(ctx, ln, nil, nil, func(c net.Conn) { b.serve(ctx, c) })
}
