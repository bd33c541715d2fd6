package egress

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The tests of service containers (services.go): the sandbox's side,
// ServeServices and serveService, against a fake egress proxy on a Unix
// socket; and a service container's PID 1, ServiceInitMain, run as a
// process of its own (the test binary run again as
// TestServiceInitHelper).

// serviceWithin bounds every wait of these tests that a handshake cannot
// end sooner: far above what a passing run takes.
const serviceWithin = 5 * time.Second

// serviceSocket is a path for a Unix socket in a short temporary
// directory (sun_path holds 108 bytes).
func serviceSocket(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "sv")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return filepath.Join(dir, "s")
}

func TestParseServiceAddr(t *testing.T) {
	good := map[string]ServiceAddr{
		"db:5432":                       {"db", 5432},
		"a:1":                           {"a", 1},
		"0:65535":                       {"0", 65535},
		"my-db2:6":                      {"my-db2", 6},
		strings.Repeat("a", 63) + ":80": {strings.Repeat("a", 63), 80},
	}
	for s, want := range good {
		got, err := ParseServiceAddr(s)
		if err != nil || got != want {
			t.Errorf("ParseServiceAddr(%q) = %v, %v; want %v", s, got, err, want)
		}
		if got.String() != s {
			t.Errorf("%v.String() = %q, want %q", got, got.String(), s)
		}
	}
	for _, s := range []string{
		"", "db", "db:", ":5432", "db:0", "db:65536", "db:05432", "db:+5432",
		"db:-1", "db:54 32", "db:5432 ", "DB:5432", "-db:5432", "db-:5432",
		"d_b:5432", "d.b:5432", "db:5432:1", "db\r\nX: y:5432", "db:0x10",
		strings.Repeat("a", 64) + ":80", "db:99999999999999999999",
	} {
		if a, err := ParseServiceAddr(s); err == nil {
			t.Errorf("ParseServiceAddr(%q) = %v, want an error", s, a)
		}
	}
}

// fakeServiceProxy plays the egress proxy on a Unix socket: it reads each
// connection's CONNECT head, sends it on heads, and answers as mode says.
type fakeServiceProxy struct {
	socket string
	heads  chan string
	// reply is written in one write right after the head is read.
	reply string
	// mode is what follows the reply: "echo" echoes until EOF and passes
	// the EOF on; "close" closes; "endless" writes header lines until the
	// connection fails; "stall" waits for the connection to be closed.
	mode string
	wg   sync.WaitGroup
}

func newFakeServiceProxy(t *testing.T, mode, reply string) *fakeServiceProxy {
	t.Helper()
	p := &fakeServiceProxy{socket: serviceSocket(t), heads: make(chan string, 16), reply: reply, mode: mode}
	ln, err := net.Listen("unix", p.socket)
	if err != nil {
		t.Fatal(err)
	}
	p.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.wg.Go(func() { p.serve(c) })
		}
	})
	t.Cleanup(func() {
		ln.Close()
		p.wg.Wait()
	})
	return p
}

func (p *fakeServiceProxy) serve(c net.Conn) {
	defer c.Close()
	c.SetDeadline(time.Now().Add(serviceWithin))
	var head []byte
	b := make([]byte, 1)
	for !bytes.HasSuffix(head, []byte("\r\n\r\n")) {
		if len(head) > 1024 {
			return
		}
		if _, err := c.Read(b); err != nil {
			return
		}
		head = append(head, b[0])
	}
	p.heads <- string(head)
	if _, err := io.WriteString(c, p.reply); err != nil {
		return
	}
	switch p.mode {
	case "echo":
		io.Copy(c, c)
		c.(*net.UnixConn).CloseWrite()
		io.Copy(io.Discard, c) // until the client side is closed
	case "endless":
		for {
			if _, err := io.WriteString(c, "X-Pad: "+strings.Repeat("a", 100)+"\r\n"); err != nil {
				return
			}
		}
	case "stall":
		io.Copy(io.Discard, c)
	}
}

// head returns the next CONNECT head the proxy read.
func (p *fakeServiceProxy) head(t *testing.T) string {
	t.Helper()
	select {
	case h := <-p.heads:
		return h
	case <-time.After(serviceWithin):
		t.Fatal("no CONNECT reached the proxy")
		return ""
	}
}

// startServeService runs serveService for addr on a listener of its own on
// 127.0.0.1 and returns the listener's address and a cancel that stops it
// and waits for it to return (also run at cleanup).
func startServeService(t *testing.T, addr ServiceAddr, proxySocket string) (string, func()) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- serveService(ctx, ln, addr, proxySocket) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("serveService: %v", err)
				}
			case <-time.After(serviceWithin):
				t.Errorf("serveService did not return after its context ended")
			}
		})
	}
	t.Cleanup(stop)
	return ln.Addr().String(), stop
}

func dialService(t *testing.T, addr string) *net.TCPConn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(serviceWithin))
	return c.(*net.TCPConn)
}

// readAllService reads c to its end and fails unless it ends with EOF.
func readAllService(t *testing.T, c net.Conn) string {
	t.Helper()
	b, err := io.ReadAll(c)
	if err != nil {
		t.Fatalf("reading the client's connection to its end: %v (after %q)", err, b)
	}
	return string(b)
}

// A connection to a service's port goes through the proxy as a CONNECT to
// exactly the service's name and port; the bytes the proxy sends in the
// same write as its 200 head reach the client, and after it bytes flow
// both ways, the client's early bytes first, each end passed on.
func TestServiceConnect(t *testing.T) {
	p := newFakeServiceProxy(t, "echo", "HTTP/1.1 200 Connection established\r\nX-Extra: 1\r\n\r\nearly")
	addr, _ := startServeService(t, ServiceAddr{"db", 5432}, p.socket)
	c := dialService(t, addr)
	// A database client speaks first, before any tunnel is up.
	if _, err := io.WriteString(c, "first "); err != nil {
		t.Fatal(err)
	}
	if h, want := p.head(t), "CONNECT db:5432 HTTP/1.1\r\nHost: db:5432\r\n\r\n"; h != want {
		t.Fatalf("the proxy got %q, want %q", h, want)
	}
	got := make([]byte, len("early"))
	if _, err := io.ReadFull(c, got); err != nil || string(got) != "early" {
		t.Fatalf("read %q, %v; want the bytes after the proxy's head, \"early\"", got, err)
	}
	if _, err := io.WriteString(c, "second"); err != nil {
		t.Fatal(err)
	}
	if err := c.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	// The echo ends only when the client's end has reached the proxy.
	if got := readAllService(t, c); got != "first second" {
		t.Fatalf("echo %q, want %q", got, "first second")
	}
}

// A proxy that refuses, answers with a head that never ends, or stalls
// in its head, gets the client's connection closed, with none of the
// proxy's bytes.
func TestServiceRefused(t *testing.T) {
	for _, tc := range []struct{ name, mode, reply string }{
		{"403", "echo", "HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\nearly"},
		{"407", "stall", "HTTP/1.1 407 Proxy Authentication Required\r\n\r\n"},
		{"2000", "echo", "HTTP/1.1 2000 OK\r\n\r\n"},
		{"HTTP/2", "echo", "HTTP/2 200 OK\r\n\r\n"},
		{"no status", "echo", "\r\n\r\n"},
		{"closed", "close", ""},
		{"closed in head", "close", "HTTP/1.1 200 OK\r\n"},
		{"overlong line", "stall", "HTTP/1.1 200 " + strings.Repeat("a", serviceHeadMax) + "\r\n\r\n"},
		{"endless", "endless", "HTTP/1.1 200 Connection established\r\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newFakeServiceProxy(t, tc.mode, tc.reply)
			addr, _ := startServeService(t, ServiceAddr{"db", 5432}, p.socket)
			c := dialService(t, addr)
			p.head(t)
			if got := readAllService(t, c); got != "" {
				t.Fatalf("the client got %q, want nothing", got)
			}
		})
	}
}

// A head just at the bound passes; one byte more does not.
func TestServiceHeadBound(t *testing.T) {
	status := "HTTP/1.1 200 OK\r\n"
	for _, tc := range []struct {
		size int
		ok   bool
	}{{serviceHeadMax, true}, {serviceHeadMax + 1, false}} {
		pad := "X-Pad: " + strings.Repeat("a", tc.size-len(status)-len("X-Pad: \r\n\r\n")) + "\r\n"
		reply := status + pad + "\r\n"
		if len(reply) != tc.size {
			t.Fatalf("head of %d bytes, want %d", len(reply), tc.size)
		}
		p := newFakeServiceProxy(t, "echo", reply+"early")
		addr, _ := startServeService(t, ServiceAddr{"db", 5432}, p.socket)
		c := dialService(t, addr)
		p.head(t)
		c.CloseWrite()
		got, want := readAllService(t, c), ""
		if tc.ok {
			want = "early"
		}
		if got != want {
			t.Errorf("head of %d bytes: the client got %q, want %q", tc.size, got, want)
		}
	}
}

// A proxy that stops in the middle of its head is given up on at
// serviceHeadTimeout.
func TestServiceHeadTimeout(t *testing.T) {
	old := serviceHeadTimeout
	serviceHeadTimeout = 100 * time.Millisecond
	t.Cleanup(func() { serviceHeadTimeout = old })
	p := newFakeServiceProxy(t, "stall", "HTTP/1.1 200 Connection established\r\n")
	addr, _ := startServeService(t, ServiceAddr{"db", 5432}, p.socket)
	c := dialService(t, addr)
	p.head(t)
	start := time.Now()
	if got := readAllService(t, c); got != "" {
		t.Fatalf("the client got %q, want nothing", got)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("closed after %v, want about 100ms", d)
	}
}

// The end of the context closes the listener and the connections being
// carried, and serveService returns.
func TestServiceCancel(t *testing.T) {
	p := newFakeServiceProxy(t, "echo", "HTTP/1.1 200 Connection established\r\n\r\n")
	addr, stop := startServeService(t, ServiceAddr{"db", 5432}, p.socket)
	c := dialService(t, addr)
	p.head(t)
	io.WriteString(c, "ping")
	b := make([]byte, 4)
	if _, err := io.ReadFull(c, b); err != nil || string(b) != "ping" {
		t.Fatalf("echo %q, %v", b, err)
	}
	stop() // fails the test unless serveService returns
	if got := readAllService(t, c); got != "" {
		t.Fatalf("after the end: %q", got)
	}
	if c, err := net.Dial("tcp", addr); err == nil {
		c.Close()
		t.Fatal("the listener is still open")
	}
}

// freeServicePort returns a port of 127.0.0.1 that nothing listens on, for
// a moment.
func freeServicePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// ServeServices serves each service on its own port of 127.0.0.1, each as
// a CONNECT to its own name, and returns nil at the end of its context.
func TestServeServices(t *testing.T) {
	p := newFakeServiceProxy(t, "echo", "HTTP/1.1 200 Connection established\r\n\r\n")
	services := []ServiceAddr{{"db", freeServicePort(t)}, {"cache", freeServicePort(t)}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- ServeServices(ctx, services, p.socket) }()
	for _, s := range services {
		var c net.Conn
		var err error
		// ServeServices listens in a goroutine of its own.
		for deadline := time.Now().Add(serviceWithin); ; time.Sleep(10 * time.Millisecond) {
			if c, err = net.Dial("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(s.Port))); err == nil || time.Now().After(deadline) {
				break
			}
		}
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(serviceWithin))
		want := "CONNECT " + s.String() + " HTTP/1.1\r\nHost: " + s.String() + "\r\n\r\n"
		if h := p.head(t); h != want {
			t.Fatalf("the proxy got %q, want %q", h, want)
		}
		io.WriteString(c, s.Name)
		b := make([]byte, len(s.Name))
		if _, err := io.ReadFull(c, b); err != nil || string(b) != s.Name {
			t.Fatalf("echo %q, %v", b, err)
		}
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("ServeServices: %v", err)
		}
	case <-time.After(serviceWithin):
		t.Fatal("ServeServices did not return after its context ended")
	}
}

// When one port cannot be listened on, ServeServices fails and closes the
// ports it had listened on already; so does an invalid service.
func TestServeServicesListenFails(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	free := freeServicePort(t)
	ctx, cancel := context.WithTimeout(context.Background(), serviceWithin)
	defer cancel()
	for _, services := range [][]ServiceAddr{
		{{"db", free}, {"cache", taken.Addr().(*net.TCPAddr).Port}},
		{{"db", free}, {"Bad name", 80}},
		{{"db", free}, {"cache", 0}},
	} {
		if err := ServeServices(ctx, services, "/nonexistent"); err == nil {
			t.Fatalf("ServeServices(%v) = nil, want an error", services)
		}
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(free)))
		if err != nil {
			t.Fatalf("after ServeServices(%v) failed, its first port: %v", services, err)
		}
		ln.Close()
	}
	if err := ServeServices(ctx, nil, "/nonexistent"); err != nil {
		t.Fatalf("ServeServices of nothing: %v", err)
	}
}

// serviceInitHelper is ServiceInitMain when the tests below run the test
// binary as a process of its own (TestMain): its arguments follow the
// test binary's own, after --.
func serviceInitHelper() {
	flag.Parse()
	if os.Getenv("SBX_SERVICE_INIT_CHILDREN") == "1" {
		// Two children that are not COMMAND, as orphans are to PID 1:
		// one that has ended already, one that COMMAND will end.
		r, w, err := os.Pipe()
		if err != nil {
			panic(err)
		}
		z1 := exec.Command("sh", "-c", "exit 5")
		z1.Stdout = w
		if err := z1.Start(); err != nil {
			panic(err)
		}
		w.Close()
		io.Copy(io.Discard, r) // EOF: z1 has ended
		z2 := exec.Command("sleep", "10")
		if err := z2.Start(); err != nil {
			panic(err)
		}
		os.Setenv("SBX_Z1", strconv.Itoa(z1.Process.Pid))
		os.Setenv("SBX_Z2", strconv.Itoa(z2.Process.Pid))
	}
	// As sbx's main does.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(ServiceInitMain(ctx, flag.Args(), os.Stderr))
}

// serviceInit is ServiceInitMain running as a process of its own.
type serviceInit struct {
	cmd    *exec.Cmd
	stdout *bufio.Reader
	stderr *os.File
	done   chan struct{}
}

// startServiceInit runs ServiceInitMain with args, and env added to the
// environment; COMMAND's stdin is stdin (nil for none).
func startServiceInit(t *testing.T, env []string, stdin *os.File, args ...string) *serviceInit {
	t.Helper()
	if runtime.GOOS == "windows" {
		t.Skip("ServiceInitMain runs on Unix only")
	}
	if _, err := exec.LookPath("sh"); err != nil {
		t.Fatal("the tests of ServiceInitMain run sh:", err)
	}
	cmd := exec.Command(os.Args[0], append([]string{"-test.run=^$", "--"}, args...)...)
	// The race detector waits a second before a 0 exit but for this.
	gorace := strings.TrimSpace(os.Getenv("GORACE") + " atexit_sleep_ms=0")
	cmd.Env = append(append(os.Environ(), "SBX_SERVICE_INIT_HELPER=1", "GORACE="+gorace), env...)
	cmd.Stdin = stdin
	// Files rather than pipes copied by os/exec: Wait must not wait for
	// an orphan that holds them.
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	cmd.Stdout = w
	stderr, err := os.CreateTemp(t.TempDir(), "stderr")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stderr.Close() })
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	s := &serviceInit{cmd: cmd, stdout: bufio.NewReader(r), stderr: stderr, done: make(chan struct{})}
	go func() {
		cmd.Wait()
		close(s.done)
	}()
	t.Cleanup(func() {
		select {
		case <-s.done:
		default:
			cmd.Process.Kill()
			<-s.done
		}
	})
	r.SetReadDeadline(time.Now().Add(serviceWithin))
	return s
}

// line reads a line of COMMAND's stdout.
func (s *serviceInit) line(t *testing.T) string {
	t.Helper()
	l, err := s.stdout.ReadString('\n')
	if err != nil {
		t.Fatalf("reading COMMAND's stdout: %v (after %q; stderr %q)", err, l, s.errors())
	}
	return strings.TrimSuffix(l, "\n")
}

// wait returns the init's exit code.
func (s *serviceInit) wait(t *testing.T) int {
	t.Helper()
	select {
	case <-s.done:
		return s.cmd.ProcessState.ExitCode()
	case <-time.After(serviceWithin):
		t.Fatalf("the init has not exited (stderr %q)", s.errors())
		return 0
	}
}

func (s *serviceInit) errors() string {
	b, _ := os.ReadFile(s.stderr.Name())
	return string(b)
}

// signal sends the init signal name (HUP, USR1...) as kill(1) names it.
func (s *serviceInit) signal(t *testing.T, name string) {
	t.Helper()
	if out, err := exec.Command("sh", "-c", `kill -s "$1" "$2"`, "sh", name, strconv.Itoa(s.cmd.Process.Pid)).CombinedOutput(); err != nil {
		t.Fatalf("kill -s %s: %v %s", name, err, out)
	}
}

// serviceLoop is a shell loop that ends with exit 1 after some 10 s, so
// that no test leaves a process behind for long.
const serviceLoop = `i=0; while [ $i -lt 200 ]; do sleep 0.05; i=$((i+1)); done; exit 1`

func TestServiceInitUsage(t *testing.T) {
	for _, args := range [][]string{
		nil,
		{"--", "true"},
		{"true"},
		{"--socket", "/s"},
		{"--socket", "/s", "--"},
		{"--socket=", "--", "true"},
		{"--nope", "--socket", "/s", "--", "true"},
	} {
		var stderr bytes.Buffer
		if code := ServiceInitMain(context.Background(), args, &stderr); code != 2 || stderr.Len() == 0 {
			t.Errorf("ServiceInitMain(%q) = %d with %q, want 2 and a message", args, code, stderr.String())
		}
	}
}

// The init exits as COMMAND did: its exit status, 128+N for signal N, 127
// when it cannot be started; COMMAND's own flags are its own, its stderr
// the init's.
func TestServiceInitExitCode(t *testing.T) {
	socket := serviceSocket(t) // nothing listens: parking is tried again and again
	for _, tc := range []struct {
		name    string
		command []string
		want    int
	}{
		{"exit", []string{"--", "sh", "-c", "echo oops >&2; exit 7"}, 7},
		{"exit 0", []string{"--", "sh", "-c", "exit 0"}, 0},
		{"no --", []string{"sh", "-c", "exit 8"}, 8},
		{"killed", []string{"--", "sh", "-c", "kill -s KILL $$"}, 128 + 9},
		{"not found", []string{"--", "sbx-no-such-command-sv"}, 127},
		{"not executable", []string{"--", "/dev/null"}, 127},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := startServiceInit(t, nil, nil, append([]string{"--socket", socket}, tc.command...)...)
			if code := s.wait(t); code != tc.want {
				t.Fatalf("exit code %d, want %d (stderr %q)", code, tc.want, s.errors())
			}
			msg := s.errors()
			if tc.want == 127 && (strings.Count(msg, "\n") != 1 || !strings.Contains(msg, tc.command[1])) {
				t.Fatalf("stderr %q, want one line about %s", msg, tc.command[1])
			}
			want := ""
			if tc.name == "exit" {
				want = "oops\n" // COMMAND's
			}
			if tc.want != 127 && msg != want {
				t.Fatalf("stderr %q, want %q", msg, want)
			}
		})
	}
}

// Each of the signals the init passes on reaches COMMAND, SIGTERM last.
func TestServiceInitSignals(t *testing.T) {
	names := []string{"HUP", "INT", "QUIT", "USR1", "USR2"}
	script := ""
	for _, n := range names {
		script += `trap 'echo ` + n + `' ` + n + "\n"
	}
	script += "trap 'exit 9' TERM\necho ready\n" + serviceLoop
	s := startServiceInit(t, nil, nil, "--socket", serviceSocket(t), "--", "sh", "-c", script)
	if l := s.line(t); l != "ready" {
		t.Fatalf("COMMAND said %q", l)
	}
	for _, n := range names {
		s.signal(t, n)
		if l := s.line(t); l != n {
			t.Fatalf("after SIG%s COMMAND said %q", n, l)
		}
	}
	s.signal(t, "TERM")
	if code := s.wait(t); code != 9 {
		t.Fatalf("exit code %d, want 9 (stderr %q)", code, s.errors())
	}
}

// The init reaps children that are not COMMAND, the way orphans are PID
// 1's, one that had ended before COMMAND started and one that ends while
// it runs, without taking their status for COMMAND's; COMMAND inherits
// the init's environment.
func TestServiceInitReaps(t *testing.T) {
	script := `[ -n "$SBX_Z1" ] && [ -n "$SBX_Z2" ] || exit 1
i=0; while kill -0 "$SBX_Z1" 2>/dev/null; do i=$((i+1)); [ $i -lt 150 ] || exit 2; sleep 0.01; done
kill "$SBX_Z2"
i=0; while kill -0 "$SBX_Z2" 2>/dev/null; do i=$((i+1)); [ $i -lt 150 ] || exit 3; sleep 0.01; done
exit 4`
	s := startServiceInit(t, []string{"SBX_SERVICE_INIT_CHILDREN=1"}, nil, "--socket", serviceSocket(t), "--", "sh", "-c", script)
	if code := s.wait(t); code != 4 {
		t.Fatalf("exit code %d, want 4: 1 COMMAND got no environment, 2 or 3 a child was not reaped, 5 or 143 a child's status was taken for COMMAND's (stderr %q)", code, s.errors())
	}
}

// A process COMMAND leaves behind does not keep the init from exiting
// with COMMAND's status.
func TestServiceInitOrphan(t *testing.T) {
	s := startServiceInit(t, nil, nil, "--socket", serviceSocket(t), "--", "sh", "-c", `sleep 10 </dev/null >/dev/null 2>&1 & echo $!; exit 3`)
	pid, err := strconv.Atoi(s.line(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if p, err := os.FindProcess(pid); err == nil {
			p.Kill()
		}
	})
	if code := s.wait(t); code != 3 {
		t.Fatalf("exit code %d, want 3 (stderr %q)", code, s.errors())
	}
}

// The init parks connections on --socket, which may appear after it
// starts, and serves the service's loopback ports over them.
func TestServiceInitParks(t *testing.T) {
	service, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	defer func() {
		service.Close()
		wg.Wait()
	}()
	wg.Go(func() {
		c, err := service.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(serviceWithin))
		io.Copy(c, c)
	})

	stdin, release, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	defer release.Close()
	socket := serviceSocket(t)
	s := startServiceInit(t, nil, stdin, "--socket", socket, "--", "sh", "-c", `echo ready; read x; exit 0`)
	if l := s.line(t); l != "ready" {
		t.Fatalf("COMMAND said %q", l)
	}
	ln, err := net.Listen("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			close(accepted)
			return
		}
		accepted <- c
	}()
	var u net.Conn
	select {
	case u = <-accepted:
	case <-time.After(serviceWithin):
		ln.Close()
		<-accepted
		t.Fatal("the init parked no connection")
	}
	if u == nil {
		t.Fatal("accept failed")
	}
	defer u.Close()
	u.SetDeadline(time.Now().Add(serviceWithin))
	port := service.Addr().(*net.TCPAddr).Port
	if line, err := readProtoLine(u); err != nil || line != portsHello {
		t.Fatalf("hello %q, %v", line, err)
	}
	io.WriteString(u, "DIAL "+strconv.Itoa(port)+"\n")
	if line, err := readProtoLine(u); err != nil || line != "OK" {
		t.Fatalf("DIAL answered %q, %v", line, err)
	}
	io.WriteString(u, "ping")
	b := make([]byte, 4)
	if _, err := io.ReadFull(u, b); err != nil || string(b) != "ping" {
		t.Fatalf("through the parked connection: %q, %v", b, err)
	}
	// COMMAND ends; so does the init, parked connections and all.
	release.Close()
	if code := s.wait(t); code != 0 {
		t.Fatalf("exit code %d, want 0 (stderr %q)", code, s.errors())
	}
	if _, err := u.Read(b); !errors.Is(err, io.EOF) {
		t.Fatalf("the forwarded connection after the init exited: %v", err)
	}
}
