package egress

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/pflag"
)

// Published ports on the docker driver. The sandbox has no network
// interface but loopback, so a port the file publishes is served by a
// forwarder in a container of its own (`sbx __ports`), which Docker
// publishes on the host. The forwarder never dials anything: the
// sandbox's init keeps a few connections parked on the forwarder's Unix
// socket (on a volume the sandbox mounts read-only), and the forwarder
// hands each connection from the host to one of them. The sandbox never
// listens on a shared socket, which gVisor with --host-uds=open forbids.
//
// On a parked connection, the sandbox says
//
//	SBX-PORTS/1\n
//
// and waits. For a connection from the host to port P the forwarder
// writes
//
//	DIAL P\n
//
// and the sandbox dials its own loopback port P and answers OK\n or
// ERR reason\n; after OK the connection carries the bytes of the host's
// connection both ways. Every line is bounded, every wait has a deadline
// on the forwarder's side, and the forwarder holds at most PortsParked
// parked connections and PortsActive forwarded ones.
const (
	// PortsVerb is the forwarder's hidden sbx verb.
	PortsVerb  = "__ports"
	portsHello = "SBX-PORTS/1"
	// PortsParked bounds the connections the forwarder keeps parked (the
	// sandbox keeps portsIdle of them; the rest are refused).
	PortsParked = 16
	// PortsActive bounds the connections from the host the forwarder
	// carries at once; more are closed as they arrive.
	PortsActive = 256
	// portsIdle is how many connections the sandbox keeps parked.
	portsIdle = 4
	// portsLine bounds a line of the protocol.
	portsLine = 64
)

// Deadlines of the forwarder, variables for tests.
var (
	// portsHelloTimeout bounds a parked connection's hello.
	portsHelloTimeout = 5 * time.Second
	// portsWait bounds how long a connection from the host waits for a
	// parked connection (none while the sandbox is stopped).
	portsWait = 10 * time.Second
	// portsReplyTimeout bounds the sandbox's answer to DIAL.
	portsReplyTimeout = 10 * time.Second
)

// PortsMain is `sbx __ports`, the forwarder of a docker sandbox's
// published ports: it listens on --socket for the sandbox's parked
// connections and on each --port (inside its own container, which Docker
// publishes on the host), and exits on SIGTERM.
func PortsMain(ctx context.Context, args []string, stderr io.Writer) int {
	fs := pflag.NewFlagSet("sbx __ports", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	socket := fs.String("socket", "", "the Unix socket the sandbox parks its connections on")
	ports := fs.IntSlice("port", nil, "a port to forward to the sandbox's own loopback port of the same number (repeatable)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *socket == "" || len(*ports) == 0 {
		fmt.Fprintln(stderr, "sbx __ports: --socket and at least one --port are required")
		return 2
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	ln, err := listenOn("unix:" + *socket)
	if err != nil {
		fmt.Fprintf(stderr, "sbx __ports: %v\n", err)
		return 1
	}
	var tcp []PortListener
	for _, p := range *ports {
		if p < 1 || p > 65535 {
			fmt.Fprintf(stderr, "sbx __ports: invalid port %d\n", p)
			return 2
		}
		l, err := net.Listen("tcp", ":"+strconv.Itoa(p))
		if err != nil {
			fmt.Fprintf(stderr, "sbx __ports: %v\n", err)
			return 1
		}
		tcp = append(tcp, PortListener{Listener: l, Port: p})
	}
	if err := NewForwarder().Serve(ctx, ln, tcp); err != nil {
		fmt.Fprintf(stderr, "sbx __ports: %v\n", err)
		return 1
	}
	return 0
}

// Forwarder carries connections from published ports to a sandbox's
// parked connections.
type Forwarder struct {
	parked chan net.Conn
}

// NewForwarder returns a forwarder with room for PortsParked parked
// connections.
func NewForwarder() *Forwarder { return &Forwarder{parked: make(chan net.Conn, PortsParked)} }

// PortListener is a listener for the sandbox's port Port.
type PortListener struct {
	net.Listener
	Port int
}

// Serve takes parked connections on sandbox and forwards the connections
// of each of ports to its sandbox port until ctx ends or a listener
// fails. It returns once every connection it served is closed.
func (f *Forwarder) Serve(ctx context.Context, sandbox net.Listener, ports []PortListener) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make(chan error, len(ports)+1)
	go func() {
		errs <- f.ServeParked(ctx, sandbox)
	}()
	active := make(chan struct{}, PortsActive)
	for _, ln := range ports {
		go func() {
			errs <- serveConns(ctx, ln, active, closeConn, func(c net.Conn) { f.forward(ctx, c, ln.Port) })
		}()
	}
	var first error
	for range len(ports) + 1 {
		if err := <-errs; err != nil && first == nil {
			first = err
			cancel()
		}
	}
	// What is still parked goes with the forwarder.
	for {
		select {
		case c := <-f.parked:
			c.Close()
		default:
			return first
		}
	}
}

func closeConn(c net.Conn) { c.Close() }

// park reads a parked connection's hello and keeps it, or closes it when
// the hello is wrong or late or PortsParked are parked already.
func (f *Forwarder) park(c net.Conn) {
	c.SetReadDeadline(time.Now().Add(portsHelloTimeout))
	line, err := readProtoLine(c)
	if err != nil || line != portsHello {
		c.Close()
		return
	}
	c.SetReadDeadline(time.Time{})
	select {
	case f.parked <- c:
	default:
		c.Close()
	}
}

// forward carries host connection c to the sandbox's port: over the first
// parked connection that answers DIAL with OK. A parked connection whose
// sandbox went away fails at DIAL and the next is tried; a sandbox that
// answers ERR (nothing listens on the port) or nothing, or no parked
// connection within portsWait, closes c.
func (f *Forwarder) forward(ctx context.Context, c net.Conn, port int) {
	defer c.Close()
	u, err := f.Take(ctx, port)
	if err != nil {
		return
	}
	defer u.Close()
	// SIGTERM (docker stop) ends what is being carried too.
	stop := context.AfterFunc(ctx, func() { c.Close(); u.Close() })
	defer stop()
	bridgeCopy(c, u, &portBuffers)
}

// Take returns a connection to port of the parked side's loopback: the
// first parked connection that answers DIAL with OK. A parked connection
// whose side went away fails at DIAL and the next is tried; one that
// answers ERR (nothing listens on the port) or nothing, or no parked
// connection within portsWait, is an error.
func (f *Forwarder) Take(ctx context.Context, port int) (net.Conn, error) {
	wait := time.NewTimer(portsWait)
	defer wait.Stop()
	for range PortsParked + 1 {
		var u net.Conn
		select {
		case u = <-f.parked:
		case <-wait.C:
			return nil, fmt.Errorf("nothing parked within %v", portsWait)
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		gone, err := askDial(u, port)
		if err != nil {
			u.Close()
			if gone {
				// Parked by a side that has gone since.
				continue
			}
			return nil, err
		}
		return u, nil
	}
	return nil, errors.New("connect failed: every parked connection had gone")
}

// askDial asks the side across u (a parked sandbox or service, the host
// relay) for its loopback port: DIAL port, then OK, after which u carries
// the connection (its deadline cleared), or why not. gone reports a side
// that closed u before it answered a word.
func askDial(u net.Conn, port int) (gone bool, err error) {
	u.SetDeadline(time.Now().Add(portsReplyTimeout))
	if _, err := fmt.Fprintf(u, "DIAL %d\n", port); err != nil {
		return true, err
	}
	line, err := readProtoLine(u)
	var ne net.Error
	switch {
	case err != nil && line == "" && !errors.Is(err, errLineTooLong) && !(errors.As(err, &ne) && ne.Timeout()):
		return true, err
	case err == nil && line == "OK":
		u.SetDeadline(time.Time{})
		return false, nil
	}
	if msg, ok := strings.CutPrefix(line, "ERR "); ok && err == nil {
		return false, fmt.Errorf("connect failed: %s", clip(msg))
	}
	return false, errors.New("connect failed: no answer")
}

// ServeParked takes parked connections on ln until ctx ends or ln fails,
// for Take.
func (f *Forwarder) ServeParked(ctx context.Context, ln net.Listener) error {
	return serveConns(ctx, ln, make(chan struct{}, PortsParked), closeConn, f.park)
}

// readProtoLine reads one line of at most portsLine bytes, a byte at a
// time so that nothing after it is read: after OK the connection carries
// the forwarded bytes.
func readProtoLine(c net.Conn) (string, error) {
	var line []byte
	b := make([]byte, 1)
	for len(line) <= portsLine {
		n, err := c.Read(b)
		if n == 1 {
			if b[0] == '\n' {
				return string(line), nil
			}
			line = append(line, b[0])
			continue
		}
		if err != nil {
			return string(line), err
		}
	}
	return "", errLineTooLong
}

// ParkPorts keeps portsIdle connections parked on the forwarder's socket
// and serves each DIAL it receives by dialling the sandbox's own loopback
// port, until ctx ends. A socket that is absent (no ports published) or
// refuses is tried again after a pause that grows to two seconds.
func ParkPorts(ctx context.Context, socket string) {
	var wg sync.WaitGroup
	for range portsIdle {
		wg.Go(func() { parkLoop(ctx, socket) })
	}
	wg.Wait()
}

func parkLoop(ctx context.Context, socket string) {
	var d net.Dialer
	pause := 100 * time.Millisecond
	for ctx.Err() == nil {
		c, port, err := parkOnce(ctx, &d, socket)
		if err != nil {
			select {
			case <-ctx.Done():
				return
			case <-time.After(pause):
			}
			pause = min(2*pause, 2*time.Second)
			continue
		}
		pause = 100 * time.Millisecond
		go serveDial(ctx, c, port)
	}
}

// parkOnce parks one connection and waits for its DIAL.
func parkOnce(ctx context.Context, d *net.Dialer, socket string) (net.Conn, int, error) {
	c, err := d.DialContext(ctx, "unix", socket)
	if err != nil {
		return nil, 0, err
	}
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	if _, err := io.WriteString(c, portsHello+"\n"); err != nil {
		c.Close()
		return nil, 0, err
	}
	line, err := readProtoLine(c)
	if err != nil {
		c.Close()
		return nil, 0, err
	}
	port, ok := dialPort(line)
	if !ok {
		c.Close()
		return nil, 0, fmt.Errorf("unexpected %q", line)
	}
	return c, port, nil
}

// dialPort reads "DIAL P".
func dialPort(line string) (int, bool) {
	rest, ok := bytes.CutPrefix([]byte(line), []byte("DIAL "))
	if !ok {
		return 0, false
	}
	p, err := strconv.Atoi(string(rest))
	if err != nil || p < 1 || p > 65535 || strconv.Itoa(p) != string(rest) {
		return 0, false
	}
	return p, true
}

// serveDial connects u to the sandbox's loopback port.
func serveDial(ctx context.Context, u net.Conn, port int) {
	defer u.Close()
	d := net.Dialer{Timeout: 5 * time.Second}
	serveLoopback(ctx, u, port, d.DialContext)
}

// serveLoopback connects u to loopback port: IPv4 first, then IPv6 (a
// server on "localhost" may listen on either), answering OK or ERR on u
// first. It is the sandbox's side of a published port and the host
// relay's.
func serveLoopback(ctx context.Context, u net.Conn, port int, dial func(ctx context.Context, network, addr string) (net.Conn, error)) {
	var c net.Conn
	var err error
	for _, host := range []string{"127.0.0.1", "::1"} {
		if c, err = dial(ctx, "tcp", net.JoinHostPort(host, strconv.Itoa(port))); err == nil {
			break
		}
	}
	if err != nil {
		io.WriteString(u, "ERR nothing listens on port "+strconv.Itoa(port)+"\n")
		return
	}
	defer c.Close()
	if _, err := io.WriteString(u, "OK\n"); err != nil {
		return
	}
	stop := context.AfterFunc(ctx, func() { c.Close(); u.Close() })
	defer stop()
	bridgeCopy(c, u, &portBuffers)
}

// portBuffers are the copy buffers of forwarded connections.
var portBuffers sync.Pool
