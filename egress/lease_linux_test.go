package egress

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"
)

// lentOver serves the proxy on a Unix socket to which a bridge hands its
// listening socket (lend), and fails the test if the proxy does not take
// it: a test on this path runs with the proxy accepting the clients'
// connections itself.
var lentOver = path{"listener-handed-over", func(t testing.TB, ctx context.Context, p *Proxy) (string, <-chan struct{}) {
	sock, proxyDone := serveOnSocket(t, ctx, p)
	fd := testListener(t)
	addr := localAddr(t, fd)
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer unix.Close(fd)
		for ctx.Err() == nil {
			u, err := net.Dial("unix", sock)
			if err != nil {
				if ctx.Err() == nil {
					t.Errorf("dialling the proxy: %v", err)
				}
				break
			}
			out := lend(ctx, fd, u.(*net.UnixConn))
			u.Close()
			if out != leaseEnded {
				t.Errorf("the proxy did not take the listener (%v)", out)
				break
			}
		}
		<-proxyDone
	}()
	return addr, done
}}

// testListener returns a listening socket on a free loopback port, as the
// bridge makes it.
func testListener(t testing.TB) int {
	t.Helper()
	fd, err := listenTCP("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return fd
}

// localAddr returns the address the socket fd is bound to.
func localAddr(t testing.TB, fd int) string {
	t.Helper()
	sa, err := unix.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	sa4, ok := sa.(*unix.SockaddrInet4)
	if !ok {
		t.Fatalf("not an IPv4 address: %T", sa)
	}
	return (&net.TCPAddr{IP: sa4.Addr[:], Port: sa4.Port}).String()
}

// leaseListener hands the listener fd to the proxy on sock as the bridge
// does and returns the lease, failing the test if the proxy does not take
// it.
func leaseListener(t *testing.T, sock string, fd int) *net.UnixConn {
	t.Helper()
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	u := c.(*net.UnixConn)
	if _, _, err := u.WriteMsgUnix([]byte(listenMessage), unix.UnixRights(fd), nil); err != nil {
		t.Fatal(err)
	}
	u.SetReadDeadline(time.Now().Add(10 * time.Second))
	b := make([]byte, 1)
	if n, err := u.Read(b); n != 1 || b[0] != ackTaken {
		t.Fatalf("the proxy answered %q, %v; want it to take the listener", b[:n], err)
	}
	u.SetReadDeadline(time.Time{})
	return u
}

// request sends req to addr and returns the answer's status line and the
// rest of it.
func request(t *testing.T, addr, req string) (string, string) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	return exchange(t, c, req)
}

// statusLine sends req to addr and returns the answer's status line
// alone: one that answers without reading the request (a refusal over
// MaxConns) closes with it unread, which resets the connection (RFC 9293
// §3.6.1) before the rest may be read.
func statusLine(t *testing.T, addr, req string) string {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	go io.WriteString(c, req)
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		t.Fatalf("reading the answer: %v", err)
	}
	return strings.TrimSpace(line)
}

// waitLeaseEnd waits for the proxy to end the lease u (its end closed),
// failing the test if it does not within ten seconds.
func waitLeaseEnd(t *testing.T, u net.Conn) {
	t.Helper()
	u.SetReadDeadline(time.Now().Add(10 * time.Second))
	if n, err := u.Read(make([]byte, 1)); n != 0 || err != io.EOF {
		t.Errorf("the lease gave %d bytes, %v; want its end", n, err)
	}
}

// waitHeld waits until the proxy holds want listeners.
func waitHeld(t *testing.T, p *Proxy, want int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for p.held.count() != want {
		if time.Now().After(deadline) {
			t.Fatalf("the proxy holds %d listeners, want %d", p.held.count(), want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// settle serves a request on the harness's TCP address, and an offer on
// its socket if it has one, so that every goroutine serving them runs
// before the test counts them.
func settle(t *testing.T, h *harness, sock string) {
	t.Helper()
	request(t, h.addr, getReq("http://a.test/", "a.test"))
	if sock != "" {
		offer(t, sock, []byte(listenMessage))
	}
	h.reset()
	settleFDs(t)
}

// settleFDs waits for the descriptors that earlier tests left to the
// runtime to be closed. Their tunnels spliced through pipes that the
// runtime keeps for reuse until collections empty its pool and
// finalizers close them (a pooled item outlives one collection, as a
// victim): it collects until the count holds still three times.
func settleFDs(t *testing.T) {
	t.Helper()
	for prev, still := -1, 0; still < 3; {
		runtime.GC()
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
		n := openFDs(t)
		if n == prev {
			still++
		} else {
			prev, still = n, 0
		}
	}
}

// waitSlots waits until want of the proxy's MaxConns slots are taken.
func waitSlots(t *testing.T, p *Proxy, want int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for len(p.slots) != want {
		if time.Now().After(deadline) {
			t.Fatalf("%d slots taken, want %d", len(p.slots), want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waitGoroutines waits until no more than want goroutines run.
func waitGoroutines(t *testing.T, want int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > want {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("%d goroutines, want %d:\n%s", runtime.NumGoroutine(), want, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestHostileListener plays the agent offering the proxy listeners on its
// Unix socket: one that listens beyond loopback, sockets that do not
// listen, a blocking one, several, none. The proxy takes none of them,
// logs each refusal, keeps no descriptor and serves the next client.
func TestHostileListener(t *testing.T) {
	h, sock, ln := socketHarness(t, Policy{Default: "deny", Allow: []string{"allowed.test"}}, fakeDNS{"allowed.test": {pub4}})
	h.setUpstream(hostUpstream(t))
	next := func(t *testing.T) {
		t.Helper()
		fd := testListener(t)
		defer unix.Close(fd)
		lease := leaseListener(t, sock, fd)
		defer lease.Close()
		if line, body := request(t, localAddr(t, fd), getReq("http://allowed.test/", "x")); line != "HTTP/1.1 200 OK" || !strings.HasSuffix(body, "host=allowed.test") {
			t.Errorf("the next client: %q %q", line, body)
		}
	}
	settleFDs(t)
	baseline := openFDs(t)
	next(t)
	waitHeld(t, h.proxy, 0)
	waitFDs(t, baseline)
	h.reset()

	socket := func(t *testing.T, family, typ int) int {
		fd, err := unix.Socket(family, typ|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { unix.Close(fd) })
		return fd
	}
	bindListen := func(t *testing.T, fd int, sa unix.Sockaddr, listen bool) int {
		if err := unix.Bind(fd, sa); err != nil {
			t.Fatal(err)
		}
		if listen {
			if err := unix.Listen(fd, 8); err != nil {
				t.Fatal(err)
			}
		}
		return fd
	}
	loopback := &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}
	tests := []struct {
		name   string
		msg    string
		fds    func(t *testing.T) []int
		answer string
		reason string
	}{
		{"a listener on every IPv4 address", listenMessage, func(t *testing.T) []int {
			return []int{bindListen(t, socket(t, unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_NONBLOCK), &unix.SockaddrInet4{}, true)}
		}, "", "not listening on a loopback address"},
		{"a listener on every IPv6 address", listenMessage, func(t *testing.T) []int {
			return []int{bindListen(t, socket(t, unix.AF_INET6, unix.SOCK_STREAM|unix.SOCK_NONBLOCK), &unix.SockaddrInet6{}, true)}
		}, "", "not listening on a loopback address"},
		{"an unbound TCP socket", listenMessage, func(t *testing.T) []int {
			return []int{socket(t, unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_NONBLOCK)}
		}, "", "not a listening socket"},
		{"a bound TCP socket that does not listen", listenMessage, func(t *testing.T) []int {
			return []int{bindListen(t, socket(t, unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_NONBLOCK), loopback, false)}
		}, "", "not a listening socket"},
		{"a connected TCP socket", listenMessage, func(t *testing.T) []int {
			c, s := pair(t, ln)
			t.Cleanup(func() { c.Close(); s.Close() })
			f := fdOf(t, s)
			t.Cleanup(func() { f.Close() })
			return []int{int(f.Fd())}
		}, "", "not a listening socket"},
		{"a blocking listener", listenMessage, func(t *testing.T) []int {
			return []int{bindListen(t, socket(t, unix.AF_INET, unix.SOCK_STREAM), loopback, true)}
		}, "", "a blocking socket"},
		{"a listening Unix socket", listenMessage, func(t *testing.T) []int {
			return []int{bindListen(t, socket(t, unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_NONBLOCK), &unix.SockaddrUnix{Name: filepath.Join(t.TempDir(), "l.sock")}, true)}
		}, "", "not an IPv4 or IPv6 socket"},
		{"a UDP socket", listenMessage, func(t *testing.T) []int {
			return []int{bindListen(t, socket(t, unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_NONBLOCK), loopback, false)}
		}, "", "not a stream socket"},
		{"two listeners", listenMessage, func(t *testing.T) []int {
			a, b := testListener(t), testListener(t)
			t.Cleanup(func() { unix.Close(a); unix.Close(b) })
			return []int{a, b}
		}, "", "more than one descriptor"},
		{"the message without a listener", listenMessage, func(t *testing.T) []int { return nil }, string(rune(ackNone)), whyNoFD},
		{"a listener with bytes after the message", listenMessage + "GET / HTTP/1.1\r\n\r\n", func(t *testing.T) []int {
			fd := testListener(t)
			t.Cleanup(func() { unix.Close(fd) })
			return []int{fd}
		}, "", "a descriptor with bytes other than the hand-over message"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			answer := offer(t, sock, []byte(tt.msg), tt.fds(t)...)
			if string(answer) != tt.answer {
				t.Errorf("answered %q, want %q", answer, tt.answer)
			}
			entries := h.log.entries(t)
			if len(entries) != 1 || entries[0].Decision != "deny" || !strings.Contains(entries[0].Reason, tt.reason) {
				t.Errorf("logged %+v, want one denial for %q", entries, tt.reason)
			}
			if n := h.proxy.held.count(); n != 0 {
				t.Errorf("the proxy holds %d listeners", n)
			}
			h.reset()
		})
		waitFDs(t, baseline)
		next(t)
		waitHeld(t, h.proxy, 0)
		h.reset()
	}
}

// TestListenersBounded: the agent hands the proxy listener after
// listener, holding every lease. The proxy holds maxHeld at most, the
// newest, each serving as the bridge's would; it ends the leases of the
// others and closes them. Their connections count against MaxConns with
// every other. When the leases end, the proxy's descriptors and
// goroutines are back where they were.
func TestListenersBounded(t *testing.T) {
	h, sock, _ := socketHarness(t, Policy{Default: "allow"}, fakeDNS{"a.test": {pub4}}, func(o *Options) { o.MaxConns = 2 })
	h.setUpstream(hostUpstream(t))
	settle(t, h, sock)
	baseFDs, baseG := openFDs(t), runtime.NumGoroutine()

	const n = 3 * maxHeld
	var addrs []string
	var leases []*net.UnixConn
	for range n {
		fd := testListener(t)
		addrs = append(addrs, localAddr(t, fd))
		leases = append(leases, leaseListener(t, sock, fd))
		// The proxy's copy is the only one left.
		unix.Close(fd)
	}
	for i := range n - maxHeld {
		waitLeaseEnd(t, leases[i])
	}
	waitHeld(t, h.proxy, maxHeld)
	for _, addr := range addrs[n-maxHeld:] {
		if line, body := request(t, addr, getReq("http://a.test/", "a.test")); line != "HTTP/1.1 200 OK" {
			t.Errorf("through %s: %q %q", addr, line, body)
		}
	}
	// Two clients that have not finished their request heads, through
	// two listeners, take both slots: the third connection, through a
	// third, is refused. (A slot comes back once its handler returned,
	// after the client heard the end.)
	waitSlots(t, h.proxy, 0)
	var slow []net.Conn
	for _, addr := range addrs[n-2:] {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		io.WriteString(c, "GET http://a.test/ HTTP/1.1\r\n")
		slow = append(slow, c)
	}
	waitSlots(t, h.proxy, 2)
	if line := statusLine(t, addrs[n-3], getReq("http://a.test/", "a.test")); line != "HTTP/1.1 503 Service Unavailable" {
		t.Errorf("over MaxConns: %q, want 503", line)
	}
	for _, c := range slow {
		c.Close()
	}
	waitSlots(t, h.proxy, 0)
	if line, body := request(t, addrs[n-3], getReq("http://a.test/", "a.test")); line != "HTTP/1.1 200 OK" {
		t.Errorf("with the slots back: %q %q", line, body)
	}
	for _, u := range leases {
		u.Close()
	}
	waitHeld(t, h.proxy, 0)
	waitFDs(t, baseFDs)
	waitGoroutines(t, baseG)
}

// TestListenerLeaseEnds: when the lease ends the proxy closes its copy of
// the listener and accepts nothing more from it: a connection that comes
// after waits for whoever else holds the listener (here the test).
func TestListenerLeaseEnds(t *testing.T) {
	h, sock, _ := socketHarness(t, Policy{Default: "deny", Allow: []string{"allowed.test"}}, fakeDNS{"allowed.test": {pub4}})
	h.setUpstream(hostUpstream(t))
	fd := testListener(t)
	defer unix.Close(fd)
	addr := localAddr(t, fd)
	baseline := openFDs(t)
	lease := leaseListener(t, sock, fd)
	if line, _ := request(t, addr, getReq("http://allowed.test/", "x")); line != "HTTP/1.1 200 OK" {
		t.Errorf("through the listener: %q", line)
	}
	lease.Close()
	waitHeld(t, h.proxy, 0)
	waitFDs(t, baseline)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// Accepting now finds the connection: nobody else took it.
	nfd, _, err := unix.Accept4(fd, unix.SOCK_CLOEXEC)
	for errors.Is(err, unix.EAGAIN) {
		var pfd = []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		unix.Poll(pfd, 10_000)
		nfd, _, err = unix.Accept4(fd, unix.SOCK_CLOEXEC)
	}
	if err != nil {
		t.Fatalf("accepting the connection the proxy left: %v", err)
	}
	unix.Close(nfd)
}

// TestListenerSharedWithAgent: the agent hands the proxy a listener and
// accepts on its own copy too. Whichever accepts a connection, nothing
// beyond the sandbox is reached but through the policy: the proxy's
// answers are its refusals, and it dialled nothing.
func TestListenerSharedWithAgent(t *testing.T) {
	h, sock, _ := socketHarness(t, Policy{Default: "deny"}, fakeDNS{"denied.test": {pub4}})
	fd := testListener(t)
	addr := localAddr(t, fd)
	lease := leaseListener(t, sock, fd)
	defer lease.Close()
	f := os.NewFile(uintptr(fd), "agent's listener")
	agent, err := net.FileListener(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := agent.Accept()
			if err != nil {
				return
			}
			io.WriteString(c, "HTTP/1.1 299 agent\r\n\r\n")
			c.Close()
		}
	}()
	defer func() { agent.Close(); wg.Wait() }()
	got := map[string]int{}
	for _, req := range []string{getReq("http://denied.test/", "denied.test"), getReq("http://127.0.0.1:1/", "127.0.0.1:1"), connectReq("denied.test:443")} {
		for range 20 {
			got[statusLine(t, addr, req)]++
		}
	}
	for line := range got {
		if line != "HTTP/1.1 403 Forbidden" && line != "HTTP/1.1 299 agent" {
			t.Errorf("answered %q", line)
		}
	}
	if dialed, _ := h.seen(); len(dialed) != 0 {
		t.Errorf("the proxy dialled %v", dialed)
	}
}

// TestBridgeListenerAcrossProxies runs the sandbox's bridge
// (bridgeListener) in front of a proxy, then of the next one when the
// first is gone: each serves the bridge's listener, and once the bridge
// stops nothing of it runs.
func TestBridgeListenerAcrossProxies(t *testing.T) {
	h := newHarness(t, Policy{Default: "deny", Allow: []string{"allowed.test"}}, fakeDNS{"allowed.test": {pub4}})
	h.setUpstream(hostUpstream(t))
	settle(t, h, "")
	baseG := runtime.NumGoroutine()
	sock := filepath.Join(t.TempDir(), "egress.sock")
	serveProxy := func() (stop func()) {
		ln, err := listenOn("unix:" + sock)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { h.proxy.Serve(ctx, ln); close(done) }()
		return func() { cancel(); <-done }
	}
	stop := serveProxy()
	fd := testListener(t)
	addr := localAddr(t, fd)
	ctx, cancel := context.WithCancel(context.Background())
	bridged := make(chan error)
	go func() { bridged <- bridgeListener(ctx, fd, sock) }()
	for i := range 3 {
		// The connection waits in the backlog until a proxy takes the
		// listener.
		if line, body := request(t, addr, getReq("http://allowed.test/", "x")); line != "HTTP/1.1 200 OK" || !strings.HasSuffix(body, "host=allowed.test") {
			t.Errorf("proxy %d: %q %q", i, line, body)
		}
		if line, _ := request(t, addr, getReq("http://denied.test/", "x")); line != "HTTP/1.1 403 Forbidden" {
			t.Errorf("proxy %d: %q", i, line)
		}
		if n := h.proxy.held.count(); n != 1 {
			t.Errorf("proxy %d holds %d listeners, want the bridge's", i, n)
		}
		// Serve returns only once it closed the listener.
		stop()
		if n := h.proxy.held.count(); n != 0 {
			t.Errorf("proxy %d, stopped, holds %d listeners", i, n)
		}
		stop = serveProxy()
	}
	stop()
	cancel()
	if err := <-bridged; err != nil {
		t.Errorf("bridge: %v", err)
	}
	waitGoroutines(t, baseG)
}

// TestBridgeListenerFallsBack: where the proxy does not take the listener
// (one from before listeners were handed over closes without an answer,
// one from before any hand-over answers 400; no descriptor arrived), the
// bridge accepts and hands over or copies each connection itself.
func TestBridgeListenerFallsBack(t *testing.T) {
	tests := []struct {
		name   string
		answer string
	}{
		{"closed without an answer", ""},
		{"a proxy from before the hand-over", "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"},
		{"no descriptor arrived", string(rune(ackNone))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, Policy{Default: "deny", Allow: []string{"allowed.test"}}, fakeDNS{"allowed.test": {pub4}})
			h.setUpstream(hostUpstream(t))
			sock := filepath.Join(t.TempDir(), "egress.sock")
			pln, err := net.Listen("unix", sock)
			if err != nil {
				t.Fatal(err)
			}
			// The stand-in refuses the first connection's message, the
			// listener, and serves the others as the proxy does.
			ctx, cancel := context.WithCancel(context.Background())
			var wg sync.WaitGroup
			offers := 0
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					c, err := pln.Accept()
					if err != nil {
						return
					}
					offers++
					if offers > 1 {
						wg.Add(1)
						go func() { defer wg.Done(); h.proxy.serveUnix(ctx, c.(*net.UnixConn), &wg) }()
						continue
					}
					buf, oob := make([]byte, 64), make([]byte, unix.CmsgSpace(4))
					n, oobn, _, _, _ := c.(*net.UnixConn).ReadMsgUnix(buf, oob)
					fds, _ := rights(oob[:oobn])
					for _, fd := range fds {
						unix.Close(fd)
					}
					if string(buf[:n]) != listenMessage {
						t.Errorf("first message %q, want the listener's", buf[:n])
					}
					io.WriteString(c, tt.answer)
					c.Close()
				}
			}()
			fd := testListener(t)
			addr := localAddr(t, fd)
			bridged := make(chan error)
			go func() { bridged <- bridgeListener(ctx, fd, sock) }()
			for range 2 {
				if line, body := request(t, addr, getReq("http://allowed.test/", "x")); line != "HTTP/1.1 200 OK" || !strings.HasSuffix(body, "host=allowed.test") {
					t.Errorf("through the bridge: %q %q", line, body)
				}
			}
			cancel()
			if err := <-bridged; err != nil {
				t.Errorf("bridge: %v", err)
			}
			pln.Close()
			wg.Wait()
			if diff := cmp.Diff(0, h.proxy.held.count()); diff != "" {
				t.Errorf("listeners held (-want +got):\n%s", diff)
			}
		})
	}
}
