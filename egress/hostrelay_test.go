package egress

import (
	"context"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// relay serves a host relay for ports on a Unix socket in a short
// directory, dialling with dial, until the test ends; it returns the
// socket.
func relay(t *testing.T, ports []int, dial func(ctx context.Context, network, addr string) (net.Conn, error)) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "hr")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "host.sock")
	ln, err := listenOn("unix:" + sock)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { ServeHostRelay(ctx, ln, ports, dial); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return sock
}

// recordingDial dials as net.Dialer does and notes each address.
type recordingDial struct {
	mu    sync.Mutex
	addrs []string
}

func (r *recordingDial) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	r.mu.Lock()
	r.addrs = append(r.addrs, addr)
	r.mu.Unlock()
	var d net.Dialer
	return d.DialContext(ctx, network, addr)
}

func (r *recordingDial) seen() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.addrs)
}

// TestHostPortsThroughProxy: a request for HostAlias:PORT goes through
// the relay to the host's loopback port when the policy lists the port,
// whatever allow says otherwise; another port of the host is refused
// even under policy allow, and a deny rule for the alias wins over the
// list. Nothing is resolved for the alias.
func TestHostPortsThroughProxy(t *testing.T) {
	_, listed := upstream(t)
	_, other := upstream(t)
	lp, op := atoi(listed), atoi(other)
	var rd recordingDial
	sock := relay(t, []int{lp, op}, rd.dial)
	pol := testPolicy()
	pol.HostPorts = []int{lp}
	h := newHarness(t, pol, fakeDNS{}, func(o *Options) { o.HostRelay = sock })

	code, body := h.get("http://host.docker.internal:" + listed + "/")
	if code != 200 || body != "hello from host.docker.internal:"+listed {
		t.Errorf("listed host port: %d %q", code, body)
	}
	code, body = h.get("http://HOST.docker.internal:" + other + "/")
	if code != 403 || !strings.Contains(body, "not in network.hostPorts") {
		t.Errorf("another host port: %d %q", code, body)
	}
	line, c := h.connect("host.docker.internal:" + listed)
	if !strings.Contains(line, "200") {
		t.Errorf("CONNECT to the listed host port: %q", line)
	}
	c.Close()

	// Policy allow and an allow rule for the alias change nothing for
	// a port not listed.
	pol = Policy{Default: "allow", Allow: []string{"host.docker.internal"}, HostPorts: []int{lp}}
	h.writePolicy(pol)
	if err := h.proxy.Reload(); err != nil {
		t.Fatal(err)
	}
	if code, body := h.get("http://host.docker.internal:" + other + "/"); code != 403 {
		t.Errorf("another host port under policy allow: %d %q", code, body)
	}
	// A deny rule wins.
	pol = Policy{Default: "deny", Deny: []string{"host.docker.internal"}, HostPorts: []int{lp}}
	h.writePolicy(pol)
	if err := h.proxy.Reload(); err != nil {
		t.Fatal(err)
	}
	if code, body := h.get("http://host.docker.internal:" + listed + "/"); code != 403 {
		t.Errorf("a denied alias: %d %q", code, body)
	}
	if _, lookups := h.seen(); len(lookups) > 0 {
		t.Errorf("the proxy resolved %v", lookups)
	}
	want := []string{"127.0.0.1:" + listed, "127.0.0.1:" + listed}
	if got := rd.seen(); !slices.Equal(got, want) {
		t.Errorf("the relay dialled %v, want %v", got, want)
	}
	for _, e := range h.log.entries(t) {
		if e.Host == "host.docker.internal" && e.Decision == "allow" && e.Addr != "host loopback:"+listed {
			t.Errorf("logged %+v", e)
		}
	}
}

// TestHostPortsWithoutRelay: a proxy made without a relay answers a
// listed host port with an error, and dials nothing.
func TestHostPortsWithoutRelay(t *testing.T) {
	pol := testPolicy()
	pol.HostPorts = []int{8080}
	h := newHarness(t, pol, fakeDNS{})
	if code, body := h.get("http://host.docker.internal:8080/"); code != 502 || !strings.Contains(body, "no relay") {
		t.Errorf("got %d %q", code, body)
	}
	if dialed, _ := h.seen(); len(dialed) > 0 {
		t.Errorf("dialled %v", dialed)
	}
}

// TestHostRelayHostile plays whatever reaches the relay's socket: only a
// port the relay was made with is dialled, on loopback; anything else
// (another port, garbage, an overlong line, a line that never comes) is
// answered ERR or closed without a dial.
func TestHostRelayHostile(t *testing.T) {
	old := portsHelloTimeout
	portsHelloTimeout = 300 * time.Millisecond
	t.Cleanup(func() { portsHelloTimeout = old })
	echo := echoServer(t)
	port := echo.Addr().(*net.TCPAddr).Port
	var rd recordingDial
	sock := relay(t, []int{port}, rd.dial)
	ask := func(send string) string {
		t.Helper()
		c, err := net.Dial("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		io.WriteString(c, send)
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		b, _ := io.ReadAll(io.LimitReader(c, 200))
		return string(b)
	}
	for _, send := range []string{
		"DIAL " + strconv.Itoa(port+1) + "\n",
		"DIAL 22\n",
		"DIAL 0" + strconv.Itoa(port) + "\n",
		"CONNECT 127.0.0.1:" + strconv.Itoa(port) + "\n",
		strings.Repeat("A", 100) + "\n",
		"DIAL " + strconv.Itoa(port), // no newline: the deadline closes it
	} {
		if got := ask(send); got != "" && !strings.HasPrefix(got, "ERR ") {
			t.Errorf("%q answered %q", send, got)
		}
	}
	if got := rd.seen(); len(got) > 0 {
		t.Errorf("the relay dialled %v", got)
	}
	// Its own port: OK, then the bytes both ways.
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c, "DIAL "+strconv.Itoa(port)+"\nping")
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	b := make([]byte, 7)
	if _, err := io.ReadFull(c, b); err != nil || string(b) != "OK\nping" {
		t.Errorf("its own port: %q, %v", b, err)
	}
	if got := rd.seen(); !slices.Equal(got, []string{"127.0.0.1:" + strconv.Itoa(port)}) {
		t.Errorf("the relay dialled %v", got)
	}
}
