package egress

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The tests of the published-ports forwarder (ports.go). The forwarder's
// side is Forwarder.Serve; the sandbox's side is ParkPorts, or the test
// itself dialling the forwarder's Unix socket as a hostile agent would.

// portsWithin bounds every wait of these tests that a handshake cannot
// end sooner: far above what a passing run takes, far below go test's
// timeout.
const portsWithin = 5 * time.Second

// portsSet sets one of the forwarder's deadlines for the test. It must be
// called before newPortsHarness, so that it is restored after Serve has
// returned (cleanups run last first).
func portsSet(t *testing.T, v *time.Duration, d time.Duration) {
	t.Helper()
	old := *v
	*v = d
	t.Cleanup(func() { *v = old })
}

// portsSocket is a path for a Unix socket, short enough for sun_path.
func portsSocket(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "s")
	if len(p) < 100 {
		return p
	}
	dir, err := os.MkdirTemp("", "p")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return filepath.Join(dir, "s")
}

// portsHarness is a forwarder serving on a Unix socket and on one TCP
// listener on 127.0.0.1 per sandbox port.
type portsHarness struct {
	t      *testing.T
	f      *Forwarder
	socket string
	hosts  []string // hosts[i] is the address that forwards to ports[i]
	stop   func() error
}

func newPortsHarness(t *testing.T, ports ...int) *portsHarness {
	t.Helper()
	h := &portsHarness{t: t, f: NewForwarder(), socket: portsSocket(t)}
	sb, err := listenOn("unix:" + h.socket)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sb.Close() })
	var pls []PortListener
	for _, p := range ports {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		pls = append(pls, PortListener{Listener: l, Port: p})
		h.hosts = append(h.hosts, l.Addr().String())
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- h.f.Serve(ctx, sb, pls) }()
	var once sync.Once
	var serr error
	h.stop = func() error {
		once.Do(func() {
			cancel()
			select {
			case serr = <-done:
			case <-time.After(portsWithin):
				t.Errorf("Serve has not returned %v after its context ended", portsWithin)
				serr = errors.New("Serve did not return")
			}
		})
		return serr
	}
	t.Cleanup(func() { h.stop() })
	return h
}

// host connects to the forwarder's listener for ports[i], as a client on
// the host would.
func (h *portsHarness) host(i int) *net.TCPConn {
	h.t.Helper()
	c, err := net.Dial("tcp", h.hosts[i])
	if err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() { c.Close() })
	return c.(*net.TCPConn)
}

// dialSocket connects to the forwarder's Unix socket, as the sandbox (or
// the agent in it) would.
func (h *portsHarness) dialSocket() *net.UnixConn {
	h.t.Helper()
	c, err := net.Dial("unix", h.socket)
	if err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() { c.Close() })
	return c.(*net.UnixConn)
}

// park connects to the socket, says the hello and waits until the
// forwarder holds n parked connections, so that connections parked one
// after the other are taken in that order.
func (h *portsHarness) park(n int) *net.UnixConn {
	h.t.Helper()
	c := h.dialSocket()
	if _, err := io.WriteString(c, portsHello+"\n"); err != nil {
		h.t.Fatal(err)
	}
	h.waitParked(n)
	return c
}

// waitParked polls until the forwarder holds n parked connections: the
// forwarder tells the sandbox nothing when it parks a connection.
func (h *portsHarness) waitParked(n int) {
	h.t.Helper()
	deadline := time.Now().Add(portsWithin)
	for len(h.f.parked) != n {
		if time.Now().After(deadline) {
			h.t.Fatalf("%d connections parked, want %d", len(h.f.parked), n)
		}
		time.Sleep(time.Millisecond)
	}
}

// portsLineOf reads one line a byte at a time (what follows it is not
// read) and fails the test unless it comes within portsWithin.
func portsLineOf(t *testing.T, c net.Conn) string {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(portsWithin))
	defer c.SetReadDeadline(time.Time{})
	var line []byte
	b := make([]byte, 1)
	for len(line) < 4*portsLine {
		n, err := c.Read(b)
		if n == 1 {
			if b[0] == '\n' {
				return string(line)
			}
			line = append(line, b[0])
			continue
		}
		if err != nil {
			t.Fatalf("reading a line: got %q, then %v", line, err)
		}
	}
	t.Fatalf("no newline in %q", line)
	return ""
}

// portsReadN reads exactly n bytes within portsWithin.
func portsReadN(t *testing.T, c net.Conn, n int) string {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(portsWithin))
	defer c.SetReadDeadline(time.Time{})
	b := make([]byte, n)
	if _, err := io.ReadFull(c, b); err != nil {
		t.Fatalf("reading %d bytes: got %q, then %v", n, b, err)
	}
	return string(b)
}

// portsClosed fails the test unless the peer closes c, sending nothing,
// within portsWithin; it returns when that was seen.
func portsClosed(t *testing.T, c net.Conn, what string) time.Time {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(portsWithin))
	b := make([]byte, 512)
	n, err := c.Read(b)
	at := time.Now()
	var ne net.Error
	switch {
	case n > 0:
		t.Errorf("%s: got %q, want the connection closed", what, b[:n])
	case errors.As(err, &ne) && ne.Timeout():
		t.Errorf("%s: still open after %v, want it closed", what, portsWithin)
	case err == nil:
		t.Errorf("%s: empty read, want the connection closed", what)
	}
	return at
}

// portsWrite writes s to c, failing the test on an error.
func portsWrite(t *testing.T, c net.Conn, s string) {
	t.Helper()
	c.SetWriteDeadline(time.Now().Add(portsWithin))
	defer c.SetWriteDeadline(time.Time{})
	if _, err := io.WriteString(c, s); err != nil {
		t.Fatalf("writing %.20q: %v", s, err)
	}
}

// portsNoDial is a listener on 127.0.0.1 that nothing may connect to
// (nobody accepts: whatever connects waits in its backlog) and its port.
func portsNoDial(t *testing.T) (*net.TCPListener, int) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln.(*net.TCPListener), ln.Addr().(*net.TCPAddr).Port
}

// portsNothingConnected fails the test if a connection waits in ln's
// backlog. A connection made before the call is already there: the
// deadline only makes Accept return rather than block.
func portsNothingConnected(t *testing.T, ln *net.TCPListener) {
	t.Helper()
	ln.SetDeadline(time.Now().Add(20 * time.Millisecond))
	defer ln.SetDeadline(time.Time{})
	if c, err := ln.Accept(); err == nil {
		c.Close()
		t.Errorf("something connected to %v", ln.Addr())
	}
}

// portsDeadPort is a port of 127.0.0.1 that nothing listens on.
func portsDeadPort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	return port
}

// portsEcho is a TCP echo server on network's loopback that passes the
// end of what it reads on as CloseWrite; it returns its port and the
// number of connections it accepted.
func portsEcho(t *testing.T, network, addr string) (int, *atomic.Int32) {
	t.Helper()
	ln, err := net.Listen(network, addr)
	if err != nil {
		t.Fatal(err)
	}
	var accepted atomic.Int32
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			wg.Go(func() {
				defer c.Close()
				io.Copy(c, c)
				c.(*net.TCPConn).CloseWrite()
				io.Copy(io.Discard, c)
			})
		}
	})
	t.Cleanup(func() {
		ln.Close()
		wg.Wait()
	})
	return ln.Addr().(*net.TCPAddr).Port, &accepted
}

// startParkPorts runs ParkPorts on socket, as the sandbox's init does; the
// function it returns (also a cleanup) ends it and waits for it.
func startParkPorts(t *testing.T, socket string) func() {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		ParkPorts(ctx, socket)
		close(done)
	}()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			select {
			case <-done:
			case <-time.After(portsWithin):
				t.Errorf("ParkPorts has not returned %v after its context ended", portsWithin)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// portsClient is an HTTP client that makes a connection per request (and
// leaves none open to hold Serve up) and uses no proxy.
func portsClient(t *testing.T) *http.Client {
	tr := &http.Transport{DisableKeepAlives: true}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 2 * portsWithin}
}

func portsGet(t *testing.T, c *http.Client, url string) string {
	t.Helper()
	resp, err := c.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: reading the body: %v", url, err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s %q", url, resp.Status, b)
	}
	return string(b)
}

// portsServer is an HTTP server on 127.0.0.1 standing for what an agent
// serves on its sandbox's loopback: /hello answers a greeting, /n/N
// answers "n N", /echo answers the body it was sent.
func portsServer(t *testing.T) int {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("/hello", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "hello from the sandbox")
	})
	mux.HandleFunc("/n/{n}", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "n "+r.PathValue("n"))
	})
	mux.HandleFunc("/echo", func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.Write(b)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.Listener.Addr().(*net.TCPAddr).Port
}

func portsRandom(n int) []byte {
	b := make([]byte, n)
	r := rand.NewChaCha8([32]byte{'s', 'b', 'x'})
	r.Read(b)
	return b
}

// TestPortsEndToEnd: a client on the host reaches a server on the
// sandbox's loopback through the forwarder and ParkPorts: a small answer,
// 4 MiB each way (over HTTP, and over a raw connection whose ends are
// passed on as half-closes), and many connections at once, more than
// ParkPorts keeps parked.
func TestPortsEndToEnd(t *testing.T) {
	httpPort := portsServer(t)
	echoPort, _ := portsEcho(t, "tcp", "127.0.0.1:0")
	h := newPortsHarness(t, httpPort, echoPort)
	startParkPorts(t, h.socket)
	client := portsClient(t)
	base := "http://" + h.hosts[0]

	t.Run("get", func(t *testing.T) {
		if got := portsGet(t, client, base+"/hello"); got != "hello from the sandbox" {
			t.Errorf("body %q, want the server's", got)
		}
	})

	t.Run("large http", func(t *testing.T) {
		body := portsRandom(4 << 20)
		resp, err := client.Post(base+"/echo", "application/octet-stream", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		got, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, body) {
			t.Errorf("4 MiB echoed as %d bytes, not the same", len(got))
		}
	})

	t.Run("large raw half-closed", func(t *testing.T) {
		body := portsRandom(4 << 20)
		c := h.host(1)
		c.SetDeadline(time.Now().Add(2 * portsWithin))
		wrote := make(chan error, 1)
		go func() {
			_, err := c.Write(body)
			if err == nil {
				err = c.CloseWrite()
			}
			wrote <- err
		}()
		got, err := io.ReadAll(c)
		if err != nil {
			t.Fatalf("reading the echo: %v after %d bytes", err, len(got))
		}
		if err := <-wrote; err != nil {
			t.Fatalf("writing: %v", err)
		}
		if !bytes.Equal(got, body) {
			t.Errorf("4 MiB echoed as %d bytes, not the same", len(got))
		}
	})

	t.Run("concurrent", func(t *testing.T) {
		const n = 4*portsIdle + 3
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				url := base + "/n/" + strconv.Itoa(i)
				resp, err := client.Get(url)
				if err != nil {
					t.Errorf("GET %s: %v", url, err)
					return
				}
				defer resp.Body.Close()
				b, err := io.ReadAll(resp.Body)
				if want := "n " + strconv.Itoa(i); err != nil || string(b) != want {
					t.Errorf("GET %s: %q, %v; want %q", url, b, err, want)
				}
			})
		}
		wg.Wait()
	})
}

// TestPortsNothingListens: a connection to a port nothing listens on in
// the sandbox is closed at once (ERR, long before portsWait or
// portsReplyTimeout), again and again, and the forwarder and ParkPorts
// still carry the next connection to a port that is served.
func TestPortsNothingListens(t *testing.T) {
	portsSet(t, &portsWait, time.Minute)
	portsSet(t, &portsReplyTimeout, time.Minute)
	dead := portsDeadPort(t)
	httpPort := portsServer(t)
	h := newPortsHarness(t, dead, httpPort)
	startParkPorts(t, h.socket)
	for i := range 2*portsIdle + 1 {
		portsClosed(t, h.host(0), fmt.Sprintf("connection %d to port %d", i, dead))
	}
	if got := portsGet(t, portsClient(t), "http://"+h.hosts[1]+"/hello"); got != "hello from the sandbox" {
		t.Errorf("body %q, want the server's", got)
	}
}

// TestPortsIPv6Fallback: ParkPorts reaches a server that listens on ::1
// only.
func TestPortsIPv6Fallback(t *testing.T) {
	if ln, err := net.Listen("tcp6", "[::1]:0"); err != nil {
		if os.Getenv("SBX_E2E") == "1" {
			t.Fatalf("SBX_E2E=1 but there is no IPv6 loopback: %v", err)
		}
		t.Skipf("no IPv6 loopback: %v; set SBX_E2E=1 to make this a failure", err)
	} else {
		ln.Close()
	}
	port, accepted := portsEcho(t, "tcp6", "[::1]:0")
	h := newPortsHarness(t, port)
	startParkPorts(t, h.socket)
	c := h.host(0)
	portsWrite(t, c, "over ::1")
	if got := portsReadN(t, c, len("over ::1")); got != "over ::1" {
		t.Errorf("echo %q", got)
	}
	if n := accepted.Load(); n != 1 {
		t.Errorf("the server on ::1 accepted %d connections, want 1", n)
	}
}

// TestForwarderBadHello: the forwarder closes a connection on its socket
// whose first line is anything but the hello, or longer than portsLine,
// at once (not at portsHelloTimeout), parks none of them, and still parks
// a good one afterwards.
func TestForwarderBadHello(t *testing.T) {
	portsSet(t, &portsHelloTimeout, time.Minute)
	h := newPortsHarness(t)
	for _, hello := range []string{
		"SBX-PORTS/2\n",
		"sbx-ports/1\n",
		"SBX-PORTS/1 \n",
		" SBX-PORTS/1\n",
		"SBX-PORTS/1\r\n",
		"SBX-PORTS/11\n",
		"\n",
		"DIAL 22\n",
		"OK\n",
		strings.Repeat("A", portsLine+1),        // overlong, no newline
		strings.Repeat("A", portsLine+1) + "\n", // overlong line
		portsHello + strings.Repeat(" ", portsLine) + "\n",
		strings.Repeat("A", 1<<20), // a flood
	} {
		c := h.dialSocket()
		wrote := make(chan struct{})
		go func() {
			defer close(wrote)
			c.SetWriteDeadline(time.Now().Add(portsWithin))
			io.WriteString(c, hello) // the flood fails once closed
		}()
		portsClosed(t, c, fmt.Sprintf("hello %.30q", hello))
		<-wrote
	}
	if n := len(h.f.parked); n != 0 {
		t.Errorf("%d parked after bad hellos, want 0", n)
	}
	h.park(1)
}

// TestForwarderHelloTimeout: a connection whose hello does not come, or
// does not end, is closed after portsHelloTimeout.
func TestForwarderHelloTimeout(t *testing.T) {
	const timeout = 200 * time.Millisecond
	portsSet(t, &portsHelloTimeout, timeout)
	h := newPortsHarness(t)
	start := time.Now()
	silent := h.dialSocket()
	partial := h.dialSocket()
	portsWrite(t, partial, portsHello) // no newline
	for what, c := range map[string]net.Conn{"no hello": silent, "hello without newline": partial} {
		if at := portsClosed(t, c, what); at.Sub(start) < timeout {
			t.Errorf("%s: closed after %v, before portsHelloTimeout (%v)", what, at.Sub(start), timeout)
		}
	}
	if n := len(h.f.parked); n != 0 {
		t.Errorf("%d parked, want 0", n)
	}
}

// TestForwarderHelloSlots: at most PortsParked connections wait for their
// hello; one more is closed at once (not at portsHelloTimeout).
func TestForwarderHelloSlots(t *testing.T) {
	portsSet(t, &portsHelloTimeout, time.Minute)
	h := newPortsHarness(t)
	for range PortsParked {
		h.dialSocket()
	}
	portsClosed(t, h.dialSocket(), "one connection over PortsParked without hello")
}

// TestForwarderParkedBound: of many more than PortsParked connections
// that say the hello, the forwarder closes the extra ones and keeps
// PortsParked parked, each of which then serves one connection from the
// host.
func TestForwarderParkedBound(t *testing.T) {
	portsSet(t, &portsHelloTimeout, time.Minute)
	portsSet(t, &portsWait, time.Minute)
	portsSet(t, &portsReplyTimeout, time.Minute)
	const extra = 8
	noDial, port := portsNoDial(t)
	h := newPortsHarness(t, port)
	closed := make(chan int, PortsParked+extra)
	dialled := make(chan string, PortsParked+extra)
	for i := range PortsParked + extra {
		c := h.dialSocket()
		// The forwarder may have closed it already: one over the
		// PortsParked waiting for their hello is closed unread.
		io.WriteString(c, portsHello+"\n")
		go func() {
			// Each connection either is closed, or is sent one DIAL
			// and answers ERR.
			var line []byte
			b := make([]byte, 1)
			for {
				if _, err := c.Read(b); err != nil {
					closed <- i
					return
				}
				if b[0] == '\n' {
					break
				}
				line = append(line, b[0])
			}
			io.WriteString(c, "ERR test\n")
			dialled <- string(line)
		}()
	}
	deadline := time.After(portsWithin)
	for range extra {
		select {
		case <-closed:
		case <-deadline:
			t.Fatalf("fewer than %d extra parked connections closed", extra)
		}
	}
	h.waitParked(PortsParked)
	for i := range PortsParked {
		c := h.host(0)
		select {
		case line := <-dialled:
			if want := "DIAL " + strconv.Itoa(port); line != want {
				t.Errorf("parked connection sent %q, want %q", line, want)
			}
		case i := <-closed:
			t.Fatalf("parked connection %d closed", i)
		case <-time.After(portsWithin):
			t.Fatalf("host connection %d: no parked connection sent a DIAL", i)
		}
		portsClosed(t, c, "host connection answered ERR")
		if t.Failed() {
			t.FailNow()
		}
	}
	select {
	case i := <-closed:
		t.Errorf("connection %d closed, more than %d of %d", i, extra, PortsParked+extra)
	default:
	}
	portsNothingConnected(t, noDial)
}

// TestForwarderBadReply: a parked connection that answers DIAL with
// anything but OK — ERR, garbage, a line longer than portsLine — gets the
// host's connection closed at once: the forwarder dials nothing, and
// sends no DIAL to the next parked connection (which it still holds and
// uses for the next connection from the host).
func TestForwarderBadReply(t *testing.T) {
	for _, tc := range []struct {
		name, reply string
		close       bool // close the parked connection after the reply
	}{
		{name: "ERR", reply: "ERR nothing listens\n"},
		{name: "garbage", reply: "HELLO\n"},
		{name: "lowercase", reply: "ok\n"},
		{name: "trailing space", reply: "OK \n"},
		{name: "CRLF", reply: "OK\r\n"},
		{name: "empty line", reply: "\n"},
		{name: "DIAL back", reply: "DIAL 22\n"},
		{name: "line of portsLine bytes", reply: strings.Repeat("x", portsLine) + "\n"},
		{name: "OK then closed without newline", reply: "OK", close: true},
		{name: "overlong line", reply: strings.Repeat("x", portsLine+1) + "\n"},
		{name: "overlong OK", reply: "OK" + strings.Repeat(" ", portsLine) + "\n"},
		{name: "overlong without newline", reply: strings.Repeat("x", 4*portsLine)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			portsSet(t, &portsWait, time.Minute)
			portsSet(t, &portsReplyTimeout, time.Second)
			noDial1, port1 := portsNoDial(t)
			noDial2, port2 := portsNoDial(t)
			h := newPortsHarness(t, port1, port2)
			a := h.park(1)
			b := h.park(2)
			host := h.host(0)
			if got, want := portsLineOf(t, a), "DIAL "+strconv.Itoa(port1); got != want {
				t.Fatalf("first parked connection got %q, want %q", got, want)
			}
			portsWrite(t, a, tc.reply)
			if tc.close {
				a.Close()
			}
			start := time.Now()
			if at := portsClosed(t, host, "host connection"); at.Sub(start) >= portsReplyTimeout {
				t.Errorf("host connection closed after %v, not at once", at.Sub(start))
			}
			if n := len(h.f.parked); n != 1 {
				t.Fatalf("%d connections parked after the reply, want the second still parked; the forwarder sent it %q", n, portsLineOf(t, b))
			}
			if !tc.close {
				portsClosed(t, a, "the parked connection that replied")
			}
			portsNothingConnected(t, noDial1)
			// The second parked connection is fresh: its first line is
			// the DIAL of the next connection from the host.
			host2 := h.host(1)
			if got, want := portsLineOf(t, b), "DIAL "+strconv.Itoa(port2); got != want {
				t.Errorf("second parked connection got %q first, want %q", got, want)
			}
			portsWrite(t, b, "ERR test\n")
			portsClosed(t, host2, "second host connection")
			portsNothingConnected(t, noDial2)
		})
	}
}

// TestForwarderOKThenData: a parked connection that answers OK carries
// the host's connection both ways, half-closes included, and only that
// one: the other parked connection is left alone and nothing is dialled.
// (This is what an agent that listens on the port gets anyway.)
func TestForwarderOKThenData(t *testing.T) {
	portsSet(t, &portsReplyTimeout, 100*time.Millisecond)
	noDial, port := portsNoDial(t)
	h := newPortsHarness(t, port)
	a := h.park(1)
	h.park(2)
	host := h.host(0)
	if got, want := portsLineOf(t, a), "DIAL "+strconv.Itoa(port); got != want {
		t.Fatalf("parked connection got %q, want %q", got, want)
	}
	portsWrite(t, a, "OK\nfrom the sandbox")
	if got := portsReadN(t, host, len("from the sandbox")); got != "from the sandbox" {
		t.Errorf("host got %q", got)
	}
	portsWrite(t, host, "from the host")
	if got := portsReadN(t, a, len("from the host")); got != "from the host" {
		t.Errorf("parked connection got %q", got)
	}
	// Still carried after portsReplyTimeout: the deadline of the answer
	// is gone once it came. Only time can tell.
	time.Sleep(3 * portsReplyTimeout)
	portsWrite(t, a, "later")
	if got := portsReadN(t, host, len("later")); got != "later" {
		t.Errorf("host got %q after portsReplyTimeout", got)
	}
	host.CloseWrite()
	if err := a.SetReadDeadline(time.Now().Add(portsWithin)); err != nil {
		t.Fatal(err)
	}
	if b, err := io.ReadAll(a); err != nil || len(b) > 0 {
		t.Errorf("after the host's half-close the parked connection read %q, %v; want EOF", b, err)
	}
	portsWrite(t, a, "bye")
	a.CloseWrite()
	host.SetReadDeadline(time.Now().Add(portsWithin))
	if b, err := io.ReadAll(host); err != nil || string(b) != "bye" {
		t.Errorf("host read %q, %v after the sandbox's half-close; want \"bye\" then EOF", b, err)
	}
	if n := len(h.f.parked); n != 1 {
		t.Errorf("%d parked, want the other parked connection untouched", n)
	}
	portsNothingConnected(t, noDial)
}

// TestForwarderStale: a parked connection whose sandbox has gone — closed
// before the DIAL, or right after it without an answer, or a whole
// channel of them — is skipped, and the next parked connection serves the
// host's connection.
func TestForwarderStale(t *testing.T) {
	serve := func(t *testing.T, h *portsHarness, host *net.TCPConn, c net.Conn, port int) {
		t.Helper()
		if got, want := portsLineOf(t, c), "DIAL "+strconv.Itoa(port); got != want {
			t.Fatalf("fresh parked connection got %q, want %q", got, want)
		}
		portsWrite(t, c, "OK\nserved")
		if got := portsReadN(t, host, len("served")); got != "served" {
			t.Errorf("host got %q", got)
		}
	}
	t.Run("closed before DIAL", func(t *testing.T) {
		portsSet(t, &portsWait, time.Minute)
		portsSet(t, &portsReplyTimeout, time.Minute)
		noDial, port := portsNoDial(t)
		h := newPortsHarness(t, port)
		h.park(1).Close()
		fresh := h.park(2)
		serve(t, h, h.host(0), fresh, port)
		portsNothingConnected(t, noDial)
	})
	t.Run("closed after DIAL", func(t *testing.T) {
		portsSet(t, &portsWait, time.Minute)
		portsSet(t, &portsReplyTimeout, time.Minute)
		noDial, port := portsNoDial(t)
		h := newPortsHarness(t, port)
		stale := h.park(1)
		fresh := h.park(2)
		host := h.host(0)
		portsLineOf(t, stale)
		stale.Close()
		serve(t, h, host, fresh, port)
		portsNothingConnected(t, noDial)
	})
	t.Run("PortsParked stale", func(t *testing.T) {
		portsSet(t, &portsWait, time.Minute)
		portsSet(t, &portsReplyTimeout, time.Minute)
		noDial, port := portsNoDial(t)
		h := newPortsHarness(t, port)
		for i := range PortsParked {
			h.park(i + 1).Close()
		}
		host := h.host(0)
		h.waitParked(0)
		serve(t, h, host, h.park(0), port)
		portsNothingConnected(t, noDial)
	})
}

// TestForwarderNoAnswer: a parked connection that never answers DIAL
// gets the host's connection closed after portsReplyTimeout, and is
// closed itself; the next parked connection is left alone.
func TestForwarderNoAnswer(t *testing.T) {
	const timeout = 200 * time.Millisecond
	portsSet(t, &portsWait, time.Minute)
	portsSet(t, &portsReplyTimeout, timeout)
	noDial, port := portsNoDial(t)
	h := newPortsHarness(t, port)
	mute := h.park(1)
	h.park(2)
	host := h.host(0)
	portsLineOf(t, mute)
	start := time.Now()
	at := portsClosed(t, host, "host connection")
	if d := at.Sub(start); d < timeout*3/4 {
		t.Errorf("host connection closed after %v, before portsReplyTimeout (%v)", d, timeout)
	}
	portsClosed(t, mute, "the parked connection that did not answer")
	if n := len(h.f.parked); n != 1 {
		t.Errorf("%d parked, want the other parked connection untouched", n)
	}
	portsNothingConnected(t, noDial)
}

// TestForwarderNoParked: without a parked connection, a connection from
// the host is closed after portsWait, and is not carried by a connection
// parked afterwards.
func TestForwarderNoParked(t *testing.T) {
	const wait = 200 * time.Millisecond
	portsSet(t, &portsWait, wait)
	noDial, port := portsNoDial(t)
	h := newPortsHarness(t, port)
	start := time.Now()
	host := h.host(0)
	if at := portsClosed(t, host, "host connection"); at.Sub(start) < wait {
		t.Errorf("closed after %v, before portsWait (%v)", at.Sub(start), wait)
	}
	h.park(1) // stays parked: nothing waits for it
	portsNothingConnected(t, noDial)
}

// TestForwarderNeverDials: whatever the sandbox's side sends — DIAL as
// its hello, or DIAL while parked, or DIAL as its answer — the forwarder
// connects nowhere, not even to the port it forwards.
func TestForwarderNeverDials(t *testing.T) {
	portsSet(t, &portsHelloTimeout, time.Minute)
	portsSet(t, &portsWait, time.Minute)
	portsSet(t, &portsReplyTimeout, time.Minute)
	noDial, port := portsNoDial(t)
	dial := "DIAL " + strconv.Itoa(port) + "\n"
	h := newPortsHarness(t, port)

	c := h.dialSocket()
	portsWrite(t, c, dial)
	portsClosed(t, c, "DIAL as a hello")
	portsNothingConnected(t, noDial)

	// Parked, then DIAL unasked: read as its answer to the next DIAL,
	// which is not OK.
	c = h.park(1)
	portsWrite(t, c, dial)
	host := h.host(0)
	portsClosed(t, host, "host connection")
	portsLineOf(t, c) // the forwarder's own DIAL
	portsClosed(t, c, "parked connection that sent DIAL")
	portsNothingConnected(t, noDial)
}

// TestForwarderActiveBound: at most PortsActive connections from the host
// are carried (or wait) at once; one more is closed at once, while the
// others still wait for a parked connection.
func TestForwarderActiveBound(t *testing.T) {
	portsSet(t, &portsWait, time.Minute)
	portsSet(t, &portsReplyTimeout, time.Minute)
	noDial, port := portsNoDial(t)
	h := newPortsHarness(t, port)
	for range PortsActive {
		h.host(0)
	}
	portsClosed(t, h.host(0), "one connection over PortsActive")
	c := h.park(0) // taken by a waiting connection at once
	if got, want := portsLineOf(t, c), "DIAL "+strconv.Itoa(port); got != want {
		t.Fatalf("parked connection got %q, want %q", got, want)
	}
	portsWrite(t, c, "ERR test\n")
	portsNothingConnected(t, noDial)
}

// TestForwarderServeCancel: Serve returns nil once its context ends,
// closes the connections still parked, and stops listening.
func TestForwarderServeCancel(t *testing.T) {
	_, port := portsNoDial(t)
	h := newPortsHarness(t, port)
	var parked []net.Conn
	for i := range 3 {
		parked = append(parked, h.park(i+1))
	}
	if err := h.stop(); err != nil {
		t.Errorf("Serve: %v", err)
	}
	for i, c := range parked {
		portsClosed(t, c, fmt.Sprintf("parked connection %d", i))
	}
	if c, err := net.Dial("unix", h.socket); err == nil {
		c.Close()
		t.Error("the socket still accepts connections")
	}
	if c, err := net.Dial("tcp", h.hosts[0]); err == nil {
		c.Close()
		t.Error("the port's listener still accepts connections")
	}
}

// TestForwarderServeCancelWithParkPorts: Serve returns promptly with
// ParkPorts's connections parked, and ParkPorts returns once its own
// context ends, retrying meanwhile.
func TestForwarderServeCancelWithParkPorts(t *testing.T) {
	h := newPortsHarness(t, portsDeadPort(t))
	stopPark := startParkPorts(t, h.socket)
	h.waitParked(portsIdle)
	if err := h.stop(); err != nil {
		t.Errorf("Serve: %v", err)
	}
	stopPark()
}

// TestForwarderListenerFails: Serve returns the error of a listener that
// fails, and ends the others.
func TestForwarderListenerFails(t *testing.T) {
	socket := portsSocket(t)
	sb, err := listenOn("unix:" + socket)
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	done := make(chan error, 1)
	go func() {
		done <- NewForwarder().Serve(context.Background(), sb, []PortListener{{Listener: l, Port: 1}})
	}()
	l.Close()
	select {
	case err := <-done:
		if err == nil {
			t.Error("Serve returned nil after its listener failed")
		}
	case <-time.After(portsWithin):
		t.Fatal("Serve has not returned after its listener failed")
	}
	if c, err := net.Dial("unix", socket); err == nil {
		c.Close()
		t.Error("the socket still accepts connections")
	}
}

// TestDialPort: the sandbox's side reads exactly "DIAL P", P a port in
// canonical decimal.
func TestDialPort(t *testing.T) {
	for _, tc := range []struct {
		line string
		port int
	}{
		{"DIAL 1", 1},
		{"DIAL 80", 80},
		{"DIAL 65535", 65535},
		{"DIAL 0", 0},
		{"DIAL 65536", 0},
		{"DIAL 99999999999999999999", 0},
		{"DIAL -1", 0},
		{"DIAL 080", 0},
		{"DIAL 00", 0},
		{"DIAL 8080 ", 0},
		{"DIAL  8080", 0},
		{"DIAL 8080\r", 0},
		{"DIAL +80", 0},
		{"DIAL 0x50", 0},
		{"DIAL 8_080", 0},
		{"DIAL ８０", 0},
		{"dial 80", 0},
		{"DIAL80", 0},
		{" DIAL 80", 0},
		{"DIAL ", 0},
		{"DIAL", 0},
		{"", 0},
	} {
		port, ok := dialPort(tc.line)
		if ok != (tc.port != 0) || port != tc.port {
			t.Errorf("dialPort(%q) = %d, %v; want %d, %v", tc.line, port, ok, tc.port, tc.port != 0)
		}
	}
}

// TestParkPorts: the sandbox's side, against a forwarder played by the
// test: ParkPorts keeps portsIdle connections parked, each saying the
// hello; answers DIAL of a served port with OK and carries the
// connection (half-closes included); answers DIAL of a port nothing
// listens on with a short ERR line; closes a connection that sends a
// malformed DIAL without dialling; parks a new connection for each one
// used or closed; and, once its context ends, closes what is parked and
// returns.
func TestParkPorts(t *testing.T) {
	socket := portsSocket(t)
	ln, err := net.Listen("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	echoPort, accepted := portsEcho(t, "tcp", "127.0.0.1:0")
	dead := portsDeadPort(t)
	stop := startParkPorts(t, socket)
	var all []net.Conn
	accept := func() *net.UnixConn {
		t.Helper()
		ln.(*net.UnixListener).SetDeadline(time.Now().Add(portsWithin))
		c, err := ln.Accept()
		if err != nil {
			t.Fatalf("no connection parked: %v", err)
		}
		t.Cleanup(func() { c.Close() })
		if got := portsLineOf(t, c); got != portsHello {
			t.Fatalf("hello %q, want %q", got, portsHello)
		}
		all = append(all, c)
		return c.(*net.UnixConn)
	}
	var parked []*net.UnixConn
	for range portsIdle {
		parked = append(parked, accept())
	}
	ln.(*net.UnixListener).SetDeadline(time.Now().Add(50 * time.Millisecond))
	if c, err := ln.Accept(); err == nil {
		c.Close()
		t.Errorf("more than portsIdle (%d) connections parked", portsIdle)
	}

	// A served port: OK, then the bytes both ways.
	c := parked[0]
	portsWrite(t, c, "DIAL "+strconv.Itoa(echoPort)+"\n")
	if got := portsLineOf(t, c); got != "OK" {
		t.Fatalf("answer %q, want OK", got)
	}
	portsWrite(t, c, "ping")
	if got := portsReadN(t, c, 4); got != "ping" {
		t.Errorf("echo %q", got)
	}
	c.CloseWrite()
	c.SetReadDeadline(time.Now().Add(portsWithin))
	if b, err := io.ReadAll(c); err != nil || len(b) > 0 {
		t.Errorf("after the half-close: %q, %v; want EOF", b, err)
	}
	parked = append(parked, accept())

	// A port nothing listens on: ERR.
	c = parked[1]
	portsWrite(t, c, "DIAL "+strconv.Itoa(dead)+"\n")
	if got := portsLineOf(t, c); !strings.HasPrefix(got, "ERR ") || len(got) > portsLine {
		t.Errorf("answer %q, want a line of ERR of at most %d bytes", got, portsLine)
	}
	portsClosed(t, c, "after ERR")
	parked = append(parked, accept())

	// Malformed DIALs: closed, nothing dialled.
	for i, line := range []string{
		"DIAL +" + strconv.Itoa(echoPort) + "\n",
		"DIAL 0" + strconv.Itoa(echoPort) + "\n",
		"DIAL 0\n",
		"DIAL " + strconv.Itoa(echoPort) + strings.Repeat(" ", portsLine) + "\n",
		"OK\n",
	} {
		c := parked[2+i]
		portsWrite(t, c, line)
		portsClosed(t, c, fmt.Sprintf("after %q", line))
		parked = append(parked, accept())
	}
	if n := accepted.Load(); n != 1 {
		t.Errorf("the server accepted %d connections, want 1", n)
	}

	stop()
	for _, c := range parked[len(parked)-portsIdle:] {
		portsClosed(t, c, "parked when ParkPorts ended")
	}
}
