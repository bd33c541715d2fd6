package egress

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sbxhq/sbx/spec"
)

// Service containers. A service (a database, say) runs in a container of
// its own next to the sandbox, with no network interface but loopback,
// like the sandbox. Its PID 1 is `sbx __service-init` (ServiceInitMain),
// which runs the image's own command and keeps connections parked on a
// socket the egress proxy listens on (ParkPorts), so that the proxy can
// reach the service's ports. The agent reaches a service by name, db:5432,
// with plain TCP: the sandbox's /etc/hosts maps db to 127.0.0.1, and the
// sandbox's init listens on 127.0.0.1:5432 (ServeServices) and carries
// each connection through the proxy with
//
//	CONNECT db:5432 HTTP/1.1\r\n
//	Host: db:5432\r\n
//	\r\n
//
// The proxy decides; after its 200 the connection carries the bytes both
// ways.

// ServiceInitVerb is the hidden sbx verb of a service container's PID 1.
const ServiceInitVerb = "__service-init"

// serviceHeadMax bounds the proxy's response head to a CONNECT.
const serviceHeadMax = 4 << 10

// serviceHeadTimeout bounds the CONNECT exchange with the proxy, a
// variable for tests.
var serviceHeadTimeout = 30 * time.Second

// serviceBuffers are the copy buffers of services' connections.
var serviceBuffers sync.Pool

var errServiceHead = errors.New("proxy's response head too long")

// ServiceAddr is a service as the sandbox reaches it: Name:Port.
type ServiceAddr struct {
	Name string
	Port int
}

func (a ServiceAddr) String() string { return a.Name + ":" + strconv.Itoa(a.Port) }

// validate checks a's name and port: the name goes into a CONNECT line.
func (a ServiceAddr) validate() error {
	if !spec.ServiceName(a.Name) {
		return fmt.Errorf("invalid service name %q: want a DNS label (1 to 63 of a-z, 0-9 and -, not starting or ending with -)", a.Name)
	}
	if a.Port < 1 || a.Port > 65535 {
		return fmt.Errorf("invalid port %d of service %s: want 1 to 65535", a.Port, a.Name)
	}
	return nil
}

// ParseServiceAddr parses NAME:PORT, the value of the sandbox init's
// --service flag: NAME a DNS label in lower case, PORT 1 to 65535 in
// decimal without sign or leading zeros.
func ParseServiceAddr(s string) (ServiceAddr, error) {
	name, port, ok := strings.Cut(s, ":")
	if !ok {
		return ServiceAddr{}, fmt.Errorf("invalid service %q: want NAME:PORT", s)
	}
	p, err := strconv.Atoi(port)
	if err != nil || strconv.Itoa(p) != port {
		return ServiceAddr{}, fmt.Errorf("invalid service %q: port %q is not a decimal number", s, port)
	}
	a := ServiceAddr{Name: name, Port: p}
	if err := a.validate(); err != nil {
		return ServiceAddr{}, err
	}
	return a, nil
}

// ServeServices listens on 127.0.0.1:Port for each of services and
// carries each connection through the egress proxy's Unix socket
// proxySocket with a CONNECT to Name:Port. When one of them cannot be
// listened on, it closes the others and returns the error. Otherwise it
// serves until ctx ends, closing the listeners and the connections it
// carries, or until a listener fails (the error); it returns once every
// connection it served is closed. With no services it returns at once.
func ServeServices(ctx context.Context, services []ServiceAddr, proxySocket string) error {
	lc := net.ListenConfig{KeepAlive: -1} // the sandbox's own loopback
	lns := make([]net.Listener, 0, len(services))
	closeAll := func() {
		for _, ln := range lns {
			ln.Close()
		}
	}
	for _, s := range services {
		if err := s.validate(); err != nil {
			closeAll()
			return err
		}
		ln, err := lc.Listen(ctx, "tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(s.Port)))
		if err != nil {
			closeAll()
			return fmt.Errorf("service %s: %w", s, err)
		}
		lns = append(lns, ln)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make(chan error, len(lns))
	for i, ln := range lns {
		go func() {
			err := serveService(ctx, ln, services[i], proxySocket)
			if err != nil {
				err = fmt.Errorf("service %s: %w", services[i], err)
			}
			errs <- err
		}()
	}
	var first error
	for range lns {
		if err := <-errs; err != nil && first == nil {
			first = err
			cancel()
		}
	}
	return first
}

// serveService carries each connection of ln through the proxy to addr
// until ctx ends (which closes ln and the connections) or ln fails; it
// returns once every connection it served is closed.
func serveService(ctx context.Context, ln net.Listener, addr ServiceAddr, proxySocket string) error {
	return serveConns(ctx, ln, nil, nil, func(c net.Conn) {
		defer c.Close()
		u, err := dialRetry(ctx, "unix", proxySocket)
		if err != nil {
			return
		}
		defer u.Close()
		stop := context.AfterFunc(ctx, func() { c.Close(); u.Close() })
		defer stop()
		rest, err := connectService(u, addr)
		if err != nil {
			return
		}
		if len(rest) > 0 {
			if _, err := c.Write(rest); err != nil {
				return
			}
		}
		bridgeCopy(c, u, &serviceBuffers)
	})
}

// connectService asks the proxy on u for a tunnel to addr. It returns the
// bytes that came after the proxy's 200 head, which belong to the
// service, or an error when the proxy refused, answered too much or too
// late, or went away.
func connectService(u net.Conn, addr ServiceAddr) ([]byte, error) {
	u.SetDeadline(time.Now().Add(serviceHeadTimeout))
	if _, err := fmt.Fprintf(u, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", addr, addr); err != nil {
		return nil, err
	}
	br := bufio.NewReaderSize(u, serviceHeadMax)
	if err := readConnectHead(br); err != nil {
		return nil, err
	}
	u.SetDeadline(time.Time{})
	rest, _ := br.Peek(br.Buffered())
	return rest, nil
}

// readConnectHead reads a response head of at most serviceHeadMax bytes
// from br and reports an error unless its status is 200. It reads no
// further than the head's blank line but what br holds already.
func readConnectHead(br *bufio.Reader) error {
	n := 0
	for i := 0; ; i++ {
		line, err := br.ReadSlice('\n')
		n += len(line)
		if n > serviceHeadMax || err == bufio.ErrBufferFull {
			return errServiceHead
		}
		if err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return err
		}
		line = bytes.TrimSuffix(bytes.TrimSuffix(line, []byte("\n")), []byte("\r"))
		if i == 0 {
			if !connectOK(string(line)) {
				return fmt.Errorf("proxy refused: %.100q", line)
			}
			continue
		}
		if len(line) == 0 {
			return nil
		}
	}
}

// connectOK reports whether status line s is HTTP/1.x 200.
func connectOK(s string) bool {
	proto, rest, _ := strings.Cut(s, " ")
	if proto != "HTTP/1.1" && proto != "HTTP/1.0" {
		return false
	}
	code, _, _ := strings.Cut(rest, " ")
	return code == "200"
}
