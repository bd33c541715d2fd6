package egress

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"
)

// osPaths: on Linux the harness's clients also reach the proxy as the
// sandbox's do: their connections handed over on its Unix socket, and
// copied over it as under gVisor.
func osPaths() []path { return []path{handedOver, copiedOver, lentOver} }

// copiedOver serves the proxy on a Unix socket behind a bridge that copies
// every connection over it (Bridge where it cannot hand over).
var copiedOver = path{"copied", func(t testing.TB, ctx context.Context, p *Proxy) (string, <-chan struct{}) {
	sock, proxyDone := serveOnSocket(t, ctx, p)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &unixBridge{socket: sock}
	b.copyOnly.Store(true)
	done := make(chan struct{})
	go func() {
		serveConns(ctx, ln, nil, nil, func(c net.Conn) { b.serve(ctx, c) })
		<-proxyDone
		close(done)
	}()
	return ln.Addr().String(), done
}}

// handedOver serves the proxy on a Unix socket behind a bridge that hands
// every connection over, and fails the test for one the proxy does not
// take: a test on this path runs through the hand-over, never through a
// copy. A refusal over MaxConns reaches the client as through Bridge.
var handedOver = path{"handed-over", func(t testing.TB, ctx context.Context, p *Proxy) (string, <-chan struct{}) {
	sock, proxyDone := serveOnSocket(t, ctx, p)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var buffers sync.Pool
	done := make(chan struct{})
	go func() {
		serveConns(ctx, ln, nil, nil, func(c net.Conn) {
			defer c.Close()
			u, err := net.Dial("unix", sock)
			if err != nil {
				t.Errorf("dialling the proxy: %v", err)
				return
			}
			defer u.Close()
			switch out, reply := handOver(c, u); out {
			case handed:
			case answered:
				c.Write(reply)
				bridgeCopy(c, u, &buffers)
			default:
				t.Errorf("the proxy did not take the connection (%v)", out)
			}
		})
		<-proxyDone
		close(done)
	}()
	return ln.Addr().String(), done
}}

// serveOnSocket serves p on a Unix socket until ctx ends.
func serveOnSocket(t testing.TB, ctx context.Context, p *Proxy) (string, <-chan struct{}) {
	sock := filepath.Join(t.TempDir(), "egress.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { p.Serve(ctx, ln); close(done) }()
	return sock, done
}

// socketHarness is a harness whose proxy also serves a Unix socket, with a
// loopback listener for the test's own TCP connections (pair).
func socketHarness(t *testing.T, pol Policy, dns fakeDNS, opts ...func(*Options)) (*harness, string, net.Listener) {
	t.Helper()
	h := newHarness(t, pol, dns, opts...)
	ctx, cancel := context.WithCancel(context.Background())
	sock, done := serveOnSocket(t, ctx, h.proxy)
	t.Cleanup(func() { cancel(); <-done })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return h, sock, ln
}

// pair returns both ends of a new TCP connection on loopback.
func pair(t *testing.T, ln net.Listener) (client, server *net.TCPConn) {
	t.Helper()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	s, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	return c.(*net.TCPConn), s.(*net.TCPConn)
}

// openFDs counts this process's open descriptors.
func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// waitFDs waits until this process has want descriptors open again: a
// connection's handler closes its descriptor after the client heard its
// end, and nothing tells the test when. It fails the test if that does
// not happen within ten seconds.
func waitFDs(t *testing.T, want int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := openFDs(t)
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			ents, _ := os.ReadDir("/proc/self/fd")
			var links []string
			for _, e := range ents {
				l, _ := os.Readlink(filepath.Join("/proc/self/fd", e.Name()))
				links = append(links, e.Name()+"→"+l)
			}
			t.Fatalf("%d descriptors open, want %d: %s", got, want, strings.Join(links, " "))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// handOverRequest hands the server end of a new loopback connection to
// the proxy on sock, as the bridge does, checks that the proxy took it and
// closed the Unix connection at once, sends req on the client end and
// returns the answer's status line and the rest of it.
func handOverRequest(t *testing.T, sock string, ln net.Listener, req string) (string, string) {
	t.Helper()
	c, s := pair(t, ln)
	defer c.Close()
	u, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	out, _ := handOver(s, u)
	s.Close()
	if out != handed {
		u.Close()
		t.Fatalf("hand-over: %v, want handed", out)
	}
	u.SetReadDeadline(time.Now().Add(10 * time.Second))
	if n, err := u.Read(make([]byte, 1)); n != 0 || err != io.EOF {
		t.Errorf("after the acknowledgement the Unix connection gave %d bytes, %v; want it closed", n, err)
	}
	u.Close()
	return exchange(t, c, req)
}

// exchange sends req on c and returns the answer's status line and the
// rest of it, to its end.
func exchange(t *testing.T, c net.Conn, req string) (string, string) {
	t.Helper()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	go io.WriteString(c, req)
	br := bufio.NewReader(c)
	line, err := br.ReadString('\n')
	if err != nil {
		t.Fatalf("reading the answer: %v", err)
	}
	rest, err := io.ReadAll(br)
	if err != nil {
		t.Fatalf("reading the answer to its end: %v", err)
	}
	return strings.TrimSpace(line), string(rest)
}

// offer connects to the proxy's socket as the agent can, sends msg with
// fds attached in one message, and returns all the proxy answered before
// it closed the connection.
func offer(t *testing.T, sock string, msg []byte, fds ...int) []byte {
	t.Helper()
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var oob []byte
	if len(fds) > 0 {
		oob = unix.UnixRights(fds...)
	}
	if _, _, err := c.(*net.UnixConn).WriteMsgUnix(msg, oob, nil); err != nil {
		t.Fatalf("sendmsg: %v", err)
	}
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	reply, err := io.ReadAll(c)
	if err != nil && !errors.Is(err, unix.ECONNRESET) {
		t.Fatalf("reading the proxy's answer: %v", err)
	}
	return reply
}

// fdOf returns a descriptor of c's socket of its own, to close.
func fdOf(t *testing.T, c interface{ File() (*os.File, error) }) *os.File {
	t.Helper()
	f, err := c.File()
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// TestHostileHandOff plays the agent on the proxy's Unix socket (on the
// volume the sandbox mounts): it sends the hand-over message with
// descriptors of every other kind, with several, with none, and with
// bytes around it. The proxy takes none of them, answers only "no
// descriptor" where that is true, logs each refusal, touches none of the
// sockets, keeps no descriptor and serves the next client.
func TestHostileHandOff(t *testing.T) {
	h, sock, ln := socketHarness(t, Policy{Default: "deny", Allow: []string{"allowed.test"}}, fakeDNS{"allowed.test": {pub4}})
	h.setUpstream(hostUpstream(t))
	dir := t.TempDir()

	next := func(t *testing.T) {
		t.Helper()
		if line, body := handOverRequest(t, sock, ln, getReq("http://allowed.test/", "x")); line != "HTTP/1.1 200 OK" || !strings.HasSuffix(body, "host=allowed.test") {
			t.Errorf("the next client: %q %q", line, body)
		}
	}
	baseline := openFDs(t)
	next(t)
	waitFDs(t, baseline)
	h.reset()

	// Each case makes what it sends, and returns a check that what was
	// sent was left untouched, run once the proxy has answered.
	type sent struct {
		msg   string
		files []*os.File
		check func(t *testing.T)
	}
	conn := func(t *testing.T) *os.File {
		c, s := pair(t, ln)
		t.Cleanup(func() { c.Close() })
		defer s.Close()
		return fdOf(t, s)
	}
	tests := []struct {
		name   string
		make   func(t *testing.T) sent
		answer string
		reason string
	}{
		{"two descriptors", func(t *testing.T) sent {
			return sent{msg: handoffMessage, files: []*os.File{conn(t), conn(t)}}
		}, "", "more than one descriptor"},
		{"many descriptors", func(t *testing.T) sent {
			var fs []*os.File
			for range 16 {
				fs = append(fs, conn(t))
			}
			return sent{msg: handoffMessage, files: fs}
		}, "", "descriptors cut short"},
		{"a regular file", func(t *testing.T) sent {
			path := filepath.Join(dir, "file")
			os.WriteFile(path, []byte("secret"), 0o600)
			f, err := os.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			return sent{msg: handoffMessage, files: []*os.File{f}}
		}, "", "not a socket"},
		{"a FIFO", func(t *testing.T) sent {
			path := filepath.Join(dir, "fifo")
			if err := unix.Mkfifo(path, 0o600); err != nil {
				t.Fatal(err)
			}
			f, err := os.OpenFile(path, os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			return sent{msg: handoffMessage, files: []*os.File{f}}
		}, "", "not a socket"},
		{"a UDP socket", func(t *testing.T) sent {
			pc, err := net.ListenPacket("udp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { pc.Close() })
			if _, err := pc.WriteTo([]byte("datagram"), pc.LocalAddr()); err != nil {
				t.Fatal(err)
			}
			return sent{msg: handoffMessage, files: []*os.File{fdOf(t, pc.(*net.UDPConn))}, check: func(t *testing.T) {
				pc.SetReadDeadline(time.Now().Add(10 * time.Second))
				b := make([]byte, 64)
				if n, _, err := pc.ReadFrom(b); string(b[:n]) != "datagram" {
					t.Errorf("the datagram waiting on the socket: %q, %v", b[:n], err)
				}
			}}
		}, "", "not a stream socket"},
		{"a Unix socketpair end", func(t *testing.T) sent {
			fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM, 0)
			if err != nil {
				t.Fatal(err)
			}
			mine, theirs := os.NewFile(uintptr(fds[0]), "mine"), os.NewFile(uintptr(fds[1]), "sent")
			t.Cleanup(func() { mine.Close() })
			mine.WriteString("unread")
			dup, err := unix.Dup(fds[1])
			if err != nil {
				t.Fatal(err)
			}
			kept := os.NewFile(uintptr(dup), "kept")
			t.Cleanup(func() { kept.Close() })
			return sent{msg: handoffMessage, files: []*os.File{theirs}, check: func(t *testing.T) {
				b := make([]byte, 64)
				if n, err := kept.Read(b); string(b[:n]) != "unread" {
					t.Errorf("what waited on the socket: %q, %v", b[:n], err)
				}
			}}
		}, "", "not an IPv4 or IPv6 socket"},
		{"a listening TCP socket", func(t *testing.T) sent {
			var lc net.ListenConfig
			lc.SetMultipathTCP(false)
			l, err := lc.Listen(context.Background(), "tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { l.Close() })
			waiting, err := net.Dial("tcp", l.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { waiting.Close() })
			return sent{msg: handoffMessage, files: []*os.File{fdOf(t, l.(*net.TCPListener))}, check: func(t *testing.T) {
				// The connection waiting to be accepted is still there:
				// the proxy accepted nothing.
				l.(*net.TCPListener).SetDeadline(time.Now().Add(10 * time.Second))
				c, err := l.Accept()
				if err != nil {
					t.Errorf("the waiting connection: %v", err)
					return
				}
				c.Close()
			}}
		}, "", "a listening socket"},
		{"a blocking TCP socket", func(t *testing.T) sent {
			f := conn(t)
			if err := unix.SetNonblock(int(f.Fd()), false); err != nil {
				t.Fatal(err)
			}
			return sent{msg: handoffMessage, files: []*os.File{f}}
		}, "", "a blocking socket"},
		{"an unconnected TCP socket", func(t *testing.T) sent {
			fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM, unix.IPPROTO_TCP)
			if err != nil {
				t.Fatal(err)
			}
			return sent{msg: handoffMessage, files: []*os.File{os.NewFile(uintptr(fd), "socket")}}
		}, "", "not connected"},
		{"a Multipath TCP socket", func(t *testing.T) sent {
			// Go's listeners are MPTCP where the kernel has it (as
			// Linux 5.6 and later do when net.mptcp.enabled is 1).
			fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM, unix.IPPROTO_MPTCP)
			if err != nil {
				if os.Getenv("SBX_E2E") == "1" {
					t.Fatalf("SBX_E2E=1 but this kernel makes no MPTCP socket: %v", err)
				}
				t.Skipf("this kernel makes no MPTCP socket: %v", err)
			}
			return sent{msg: handoffMessage, files: []*os.File{os.NewFile(uintptr(fd), "socket")}}
		}, "", "not a TCP socket"},
		{"the hand-over message without a descriptor", func(t *testing.T) sent {
			return sent{msg: handoffMessage}
		}, string(rune(ackNone)), whyNoFD},
		{"the marker alone", func(t *testing.T) sent {
			return sent{msg: handoffMessage[:1]}
		}, "", "the hand-over marker without the hand-over message"},
		{"a descriptor with bytes after the message", func(t *testing.T) sent {
			return sent{msg: handoffMessage + getReq("http://allowed.test/", "x"), files: []*os.File{conn(t)}}
		}, "", "a descriptor with bytes other than the hand-over message"},
		{"a descriptor with a request", func(t *testing.T) sent {
			return sent{msg: getReq("http://allowed.test/", "x"), files: []*os.File{conn(t)}}
		}, "", "a descriptor with bytes other than the hand-over message"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := tt.make(t)
			var fds []int
			for _, f := range s.files {
				fds = append(fds, int(f.Fd()))
			}
			answer := offer(t, sock, []byte(s.msg), fds...)
			for _, f := range s.files {
				f.Close()
			}
			if string(answer) != tt.answer {
				t.Errorf("answered %q, want %q", answer, tt.answer)
			}
			if s.check != nil {
				s.check(t)
			}
			entries := h.log.entries(t)
			if len(entries) != 1 || entries[0].Decision != "deny" || !strings.Contains(entries[0].Reason, tt.reason) {
				t.Errorf("logged %+v, want one denial for %q", entries, tt.reason)
			}
			h.reset()
		})
		// What the case made is closed by now (its cleanups ran), so
		// only what the proxy kept would still be open.
		waitFDs(t, baseline)
		next(t)
		h.reset()
	}
}

// TestHandOffLoop hands the proxy thousands of connections one after
// another, allowed and denied: each is served whole, and the proxy keeps
// no descriptor of any.
func TestHandOffLoop(t *testing.T) {
	h, sock, ln := socketHarness(t, Policy{Default: "deny", Allow: []string{"allowed.test"}}, fakeDNS{"allowed.test": {pub4}, "denied.test": {pub4}})
	h.setUpstream(hostUpstream(t))
	baseline := openFDs(t)
	const n = 3000
	for i := range n {
		host, want := "allowed.test", "HTTP/1.1 200 OK"
		if i%2 == 1 {
			host, want = "denied.test", "HTTP/1.1 403 Forbidden"
		}
		if line, _ := handOverRequest(t, sock, ln, getReq("http://"+host+"/", "x")); line != want {
			t.Fatalf("connection %d: %q, want %q", i, line, want)
		}
	}
	if got := len(h.log.entries(t)); got != n {
		t.Errorf("%d decisions logged, want %d", got, n)
	}
	waitFDs(t, baseline)
}

// TestHandOffCountsAgainstMaxConns: a connection handed over holds one of
// the proxy's MaxConns slots while it is served, as one accepted on the
// socket does; beyond them the hand-over is refused with the proxy's 503,
// and the slots come back when the clients go.
func TestHandOffCountsAgainstMaxConns(t *testing.T) {
	h, sock, ln := socketHarness(t, Policy{Default: "allow"}, fakeDNS{}, func(o *Options) { o.MaxConns = 3 })
	baseline := openFDs(t)
	offerIdle := func() (handOff, []byte, *net.TCPConn) {
		c, s := pair(t, ln)
		defer s.Close()
		u, err := net.Dial("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		defer u.Close()
		out, reply := handOver(s, u)
		return out, reply, c
	}
	var idle []*net.TCPConn
	for i := range 3 {
		out, _, c := offerIdle()
		idle = append(idle, c)
		if out != handed {
			t.Fatalf("connection %d: %v, want handed", i, out)
		}
	}
	out, reply, c := offerIdle()
	c.Close()
	if out != answered || string(reply) != "HTTP/1.1 503" {
		t.Errorf("over MaxConns: %v %q, want the proxy's 503", out, reply)
	}
	if e := h.log.entries(t); len(e) != 1 || e[0].Status != 503 {
		t.Errorf("logged %+v", e)
	}
	for _, c := range idle {
		c.Close()
	}
	// The idle connections' handlers end once they see the clients'
	// ends; nothing tells the test when but a hand-over getting through.
	for i := 0; ; i++ {
		out, _, c := offerIdle()
		c.Close()
		if out == handed {
			break
		}
		if out != answered || i == 1000 {
			t.Fatalf("after the clients went: %v (attempt %d)", out, i)
		}
	}
	waitFDs(t, baseline)
}

// fakeProxy stands in for the proxy on a Unix socket: it answers a
// hand-over as told, and echoes what a copying bridge sends on any other
// connection. It counts both.
type fakeProxy struct {
	answer string // ackTaken's byte: take and echo on the connection; else this, then close
	mu     sync.Mutex
	offers int
	copies int
}

func (f *fakeProxy) serve(t *testing.T, ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			buf, oob := make([]byte, 64), make([]byte, unix.CmsgSpace(4))
			n, oobn, _, _, err := c.(*net.UnixConn).ReadMsgUnix(buf, oob)
			if err != nil {
				t.Errorf("fake proxy: %v", err)
				return
			}
			fds, _ := rights(oob[:oobn])
			if len(fds) == 0 {
				f.mu.Lock()
				f.copies++
				f.mu.Unlock()
				c.Write(buf[:n])
				io.Copy(c, c)
				return
			}
			f.mu.Lock()
			f.offers++
			f.mu.Unlock()
			file := os.NewFile(uintptr(fds[0]), "offered")
			defer file.Close()
			io.WriteString(c, f.answer)
			if f.answer != string(rune(ackTaken)) {
				return
			}
			c.Close()
			tc, err := net.FileConn(file)
			if err != nil {
				t.Errorf("fake proxy: %v", err)
				return
			}
			defer tc.Close()
			io.Copy(tc, tc)
			tc.(*net.TCPConn).CloseWrite()
		}()
	}
}

func (f *fakeProxy) counts() (offers, copies int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.offers, f.copies
}

// TestBridgeFallsBack: the bridge hands connections over, and carries
// them itself, every byte once, where the proxy does not take them:
// from then on when the proxy cannot (no descriptor arrived, as where the
// sandbox's sockets are not the host's; or a proxy from before the
// hand-over answers the message as a bad request), for that connection
// only when it closed without an answer. The proxy's 503 over MaxConns
// reaches the client.
func TestBridgeFallsBack(t *testing.T) {
	const busy = "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 5\r\nConnection: close\r\n\r\nbusy\n"
	tests := []struct {
		name     string
		answer   string
		want     string // the client's answer
		copyOnly bool
		offers   int // of two connections
		copies   int
	}{
		{"taken", string(rune(ackTaken)), "hello\n", false, 2, 0},
		{"no descriptor arrived", string(rune(ackNone)), "hello\n", true, 1, 2},
		{"a proxy from before the hand-over", "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n", "hello\n", true, 1, 2},
		{"closed without an answer", "", "hello\n", false, 2, 2},
		{"over MaxConns", busy, busy, false, 2, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sock := filepath.Join(t.TempDir(), "egress.sock")
			pln, err := net.Listen("unix", sock)
			if err != nil {
				t.Fatal(err)
			}
			defer pln.Close()
			f := &fakeProxy{answer: tt.answer}
			go f.serve(t, pln)
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			b := &unixBridge{socket: sock}
			done := make(chan struct{})
			go func() {
				serveConns(ctx, ln, nil, nil, func(c net.Conn) { b.serve(ctx, c) })
				close(done)
			}()
			defer func() { cancel(); <-done }()
			for i := range 2 {
				c, err := net.Dial("tcp", ln.Addr().String())
				if err != nil {
					t.Fatal(err)
				}
				c.SetDeadline(time.Now().Add(10 * time.Second))
				io.WriteString(c, "hello\n")
				c.(*net.TCPConn).CloseWrite()
				got, err := io.ReadAll(c)
				c.Close()
				if string(got) != tt.want || err != nil {
					t.Errorf("client %d got %q, %v; want %q", i, got, err, tt.want)
				}
			}
			offers, copies := f.counts()
			if diff := cmp.Diff([]int{tt.offers, tt.copies}, []int{offers, copies}); diff != "" {
				t.Errorf("hand-overs and copied connections (-want +got):\n%s", diff)
			}
			if b.copyOnly.Load() != tt.copyOnly {
				t.Errorf("copy only: %v, want %v", b.copyOnly.Load(), tt.copyOnly)
			}
		})
	}
}

// TestHandOffHalfClose: a response the client reads to its end, and a
// tunnel's ends in each direction, reach the client of a handed-over
// connection while the bridge's copy of the socket is still open: the
// proxy ends its side with a shutdown, not only a close.
func TestHandOffHalfClose(t *testing.T) {
	h, sock, ln := socketHarness(t, Policy{Default: "allow"}, fakeDNS{"echo.test": {pub4}})
	echo := echoServer(t)
	hand := func() (client, bridgeCopy *net.TCPConn) {
		c, s := pair(t, ln)
		u, err := net.Dial("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		defer u.Close()
		if out, _ := handOver(s, u); out != handed {
			t.Fatalf("hand-over: %v", out)
		}
		c.SetDeadline(time.Now().Add(10 * time.Second))
		return c, s
	}

	// A refusal, read to its end while the bridge keeps its copy open.
	c, kept := hand()
	io.WriteString(c, getReq("http://[::1]/", "x"))
	got, err := io.ReadAll(c)
	if err != nil || !strings.HasPrefix(string(got), "HTTP/1.1 403") {
		t.Errorf("refusal: %q, %v", got, err)
	}
	c.Close()
	kept.Close()

	// A tunnel: the client's end reaches the upstream, whose end reaches
	// the client.
	h.setUpstream(echo.Addr().String())
	c, kept = hand()
	defer kept.Close()
	defer c.Close()
	io.WriteString(c, connectReq("echo.test:443")+"through the tunnel")
	c.CloseWrite()
	got, err = io.ReadAll(c)
	if err != nil || !strings.HasPrefix(string(got), "HTTP/1.1 200") || !strings.HasSuffix(string(got), "\r\n\r\nthrough the tunnel") {
		t.Errorf("tunnel: %q, %v", got, err)
	}
}
