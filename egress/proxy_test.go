package egress

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestDecide(t *testing.T) {
	p := &Policy{Default: "deny", Allow: []string{"github.com", "*.npmjs.org", "api.example.com:443", "10.1.2.3", "[::ffff:10.1.2.4]:443", "2001:db8::1"}, Deny: []string{"evil.npmjs.org", "github.com:22"}}
	c, err := p.compile()
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		target string // as a CONNECT authority
		want   Decision
	}{
		{"github.com:443", Decision{true, "github.com"}},
		{"GitHub.com:80", Decision{true, "github.com"}},
		{"github.com:22", Decision{false, "github.com:22"}},
		{"registry.npmjs.org:443", Decision{true, "*.npmjs.org"}},
		{"a.b.npmjs.org:443", Decision{false, "default"}},
		{"npmjs.org:443", Decision{false, "default"}},
		{"evil.npmjs.org:443", Decision{false, "evil.npmjs.org"}},
		{"api.example.com:443", Decision{true, "api.example.com:443"}},
		{"api.example.com:80", Decision{false, "default"}},
		{"10.1.2.3:8080", Decision{true, "10.1.2.3"}},
		{"[::ffff:10.1.2.3]:8080", Decision{true, "10.1.2.3"}},
		{"10.1.2.4:443", Decision{true, "10.1.2.4:443"}},
		{"10.1.2.4:80", Decision{false, "default"}},
		{"[2001:DB8:0::1]:443", Decision{true, "2001:db8::1"}},
		{"unlisted.io:443", Decision{false, "default"}},
	}
	for _, tt := range tests {
		d, err := parseAuthority(tt.target, 443)
		if err != nil {
			t.Fatal(err)
		}
		if got := c.decide(d); got != tt.want {
			t.Errorf("decide(%s) = %+v, want %+v", tt.target, got, tt.want)
		}
	}
	open, _ := (&Policy{Default: "allow", Deny: []string{"pastebin.com"}}).compile()
	anything, _ := parseAuthority("anything.io:443", 443)
	pastebin, _ := parseAuthority("pastebin.com:443", 443)
	if !open.decide(anything).Allow || open.decide(pastebin).Allow {
		t.Error("default allow with a deny rule is wrong")
	}
}

// fakeDNS maps names to addresses ("fe80::1%eth0" carries a zone); every
// other name fails to resolve. The proxy asks for fully qualified names.
type fakeDNS map[string][]string

func (f fakeDNS) LookupIPAddr(ctx context.Context, host string) ([]net.IPAddr, error) {
	name, ok := strings.CutSuffix(host, ".")
	if !ok {
		return nil, &net.DNSError{Err: "not fully qualified", Name: host}
	}
	var out []net.IPAddr
	for _, s := range f[name] {
		ip, zone, _ := strings.Cut(s, "%")
		out = append(out, net.IPAddr{IP: net.ParseIP(ip), Zone: zone})
	}
	if len(out) == 0 {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	return out, nil
}

// Stand-ins for public addresses: the test dialer never dials them (see
// newHarness), and they are in no default blocked range.
const (
	pub4  = "93.184.215.14"
	pub4b = "93.184.215.15"
	pub6  = "2606:2800:21f:cb07:6820:80da:af6b:8b2c"
)

// testLocal stands in for the proxy's own addresses: an interface and a
// gateway, public-looking so that only the proxy's own check refuses them.
func testLocal() ([]netip.Addr, error) {
	return []netip.Addr{netip.MustParseAddr("93.184.216.10"), netip.MustParseAddr("2606:2800:220:1::1"), netip.MustParseAddr("93.184.216.1")}, nil
}

type harness struct {
	t        *testing.T
	proxy    *Proxy
	addr     string
	policy   string
	log      *syncBuffer
	upstream string // where every dial really goes
	mu       sync.Mutex
	dialed   []string
	lookups  []string
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}
func (s *syncBuffer) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }
func (s *syncBuffer) Reset()         { s.mu.Lock(); defer s.mu.Unlock(); s.b.Reset() }

// entries returns the decision lines of the log.
func (s *syncBuffer) entries(t *testing.T) []entry {
	var out []entry
	for _, line := range strings.Split(strings.TrimSpace(s.String()), "\n") {
		if !strings.Contains(line, `"decision"`) {
			continue
		}
		var e entry
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatal(err)
		}
		out = append(out, e)
	}
	return out
}

// recordingDNS notes every name the proxy asks to resolve.
type recordingDNS struct {
	h   *harness
	dns fakeDNS
}

func (r recordingDNS) LookupIPAddr(ctx context.Context, host string) ([]net.IPAddr, error) {
	r.h.mu.Lock()
	r.h.lookups = append(r.h.lookups, host)
	r.h.mu.Unlock()
	return r.dns.LookupIPAddr(ctx, host)
}

// newHarness serves a proxy on loopback. Its dialer records the address
// the proxy chose and connects to the harness's upstream on loopback
// instead (set with h.upstream; by default the port the proxy asked for
// on 127.0.0.1), so no test dials any other address.
func newHarness(t *testing.T, pol Policy, dns fakeDNS, opts ...func(*Options)) *harness {
	t.Helper()
	return newHarnessVia(t, overTCP, pol, dns, opts...)
}

// harnessFunc makes a harness (newHarness).
type harnessFunc func(t *testing.T, pol Policy, dns fakeDNS, opts ...func(*Options)) *harness

// path is a way for the harness's clients to reach its proxy: serve
// serves the proxy until ctx ends and returns the TCP address clients
// connect to.
type path struct {
	name  string
	serve func(t testing.TB, ctx context.Context, p *Proxy) (addr string, done <-chan struct{})
}

// overTCP: the clients connect to the proxy itself.
var overTCP = path{"tcp", func(t testing.TB, ctx context.Context, p *Proxy) (string, <-chan struct{}) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { p.Serve(ctx, ln); close(done) }()
	return ln.Addr().String(), done
}}

// eachPath runs f once for each path (overTCP, and bridged: the Unix
// socket behind the sandbox's Bridge). Its newHarness serves the proxy
// that way: a test whose body is f calls it by that name and runs
// unchanged on every path.
func eachPath(t *testing.T, f func(t *testing.T, newHarness harnessFunc)) {
	for _, via := range []path{overTCP, bridged} {
		t.Run(via.name, func(t *testing.T) {
			f(t, func(t *testing.T, pol Policy, dns fakeDNS, opts ...func(*Options)) *harness {
				t.Helper()
				return newHarnessVia(t, via, pol, dns, opts...)
			})
		})
	}
}

func newHarnessVia(t *testing.T, via path, pol Policy, dns fakeDNS, opts ...func(*Options)) *harness {
	t.Helper()
	h := &harness{t: t, log: &syncBuffer{}, policy: filepath.Join(t.TempDir(), "policy.json")}
	h.writePolicy(pol)
	o := Options{PolicyPath: h.policy, Resolver: recordingDNS{h, dns}, Log: h.log, Dial: h.dial, LocalAddrs: testLocal}
	for _, f := range opts {
		f(&o)
	}
	p, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	h.proxy = p
	ctx, cancel := context.WithCancel(context.Background())
	addr, done := via.serve(t, ctx, p)
	t.Cleanup(func() { cancel(); <-done })
	h.addr = addr
	return h
}

func (h *harness) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	h.mu.Lock()
	h.dialed = append(h.dialed, addr)
	to := h.upstream
	h.mu.Unlock()
	if to == "" {
		_, port, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, err
		}
		to = "127.0.0.1:" + port
	}
	var d net.Dialer
	return d.DialContext(ctx, network, to)
}

// setUpstream sends every dial of the proxy's to addr from now on. It
// locks what the proxy's dialer reads: a request read whole in the
// proxy's first read of a Unix connection (recvmsg, which the race
// detector does not count as synchronising, unlike read) would otherwise
// seem to race with a test's plain write.
func (h *harness) setUpstream(addr string) {
	h.mu.Lock()
	h.upstream = addr
	h.mu.Unlock()
}

// reset forgets what was dialled, resolved and logged.
func (h *harness) reset() {
	h.mu.Lock()
	h.dialed, h.lookups = nil, nil
	h.mu.Unlock()
	h.log.Reset()
}

func (h *harness) seen() (dialed, lookups []string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.dialed), slices.Clone(h.lookups)
}

func (h *harness) writePolicy(pol Policy) {
	data, _ := json.Marshal(pol)
	if err := os.WriteFile(h.policy, data, 0o644); err != nil {
		h.t.Fatal(err)
	}
}

// get fetches rawURL through the proxy with a plain HTTP client.
func (h *harness) get(rawURL string) (int, string) {
	h.t.Helper()
	proxyURL, _ := url.Parse("http://" + h.addr)
	c := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(proxyURL), DisableKeepAlives: true}, Timeout: 10 * time.Second}
	resp, err := c.Get(rawURL)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// connect opens a CONNECT tunnel and returns the proxy's status line and
// the connection.
func (h *harness) connect(target string) (string, net.Conn) {
	h.t.Helper()
	c, err := net.Dial("tcp", h.addr)
	if err != nil {
		h.t.Fatal(err)
	}
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target)
	br := bufio.NewReader(c)
	line, _ := br.ReadString('\n')
	for {
		l, err := br.ReadString('\n')
		if err != nil || l == "\r\n" {
			break
		}
	}
	return strings.TrimSpace(line), &bufferedConn{Conn: c, r: br}
}

type bufferedConn struct {
	net.Conn
	r *bufio.Reader
}

func (b *bufferedConn) Read(p []byte) (int, error) { return b.r.Read(p) }

func upstream(t *testing.T) (*httptest.Server, string) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Proxy-Connection") != "" {
			w.WriteHeader(500)
		}
		fmt.Fprintf(w, "hello from %s", r.Host)
	}))
	t.Cleanup(srv.Close)
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	return srv, port
}

// testPolicy is a policy for tests whose upstreams stand at public
// addresses: a few ranges blocked, the listed hosts allowed.
func testPolicy(allow ...string) Policy {
	return Policy{Default: "deny", Allow: allow, BlockCIDRs: []string{"10.0.0.0/8", "169.254.0.0/16"}}
}

func TestHTTPAllowedAndDenied(t *testing.T) {
	eachPath(t, func(t *testing.T, newHarness harnessFunc) {
		_, port := upstream(t)
		h := newHarness(t, testPolicy("allowed.test"), fakeDNS{"allowed.test": {pub4}, "denied.test": {pub4}})
		code, body := h.get("http://allowed.test:" + port + "/x")
		if code != 200 || body != "hello from allowed.test:"+port {
			t.Errorf("allowed GET = %d %q", code, body)
		}
		code, body = h.get("http://denied.test:" + port + "/x")
		if code != 403 || !strings.Contains(body, "denied.test is blocked by sbx egress policy") {
			t.Errorf("denied GET = %d %q", code, body)
		}
		got := h.log.entries(t)
		for i := range got {
			got[i].Time = ""
		}
		want := []entry{
			{Method: "GET", Host: "allowed.test", Port: atoi(port), Decision: "allow", Reason: "allowed by policy", Rule: "allowed.test", Addr: pub4 + ":" + port, Status: 200},
			{Method: "GET", Host: "denied.test", Port: atoi(port), Decision: "deny", Reason: "not in the allow list (policy: deny)", Rule: "default", Status: 403},
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("log (-want +got):\n%s", diff)
		}
	})
}

func atoi(s string) int {
	var i int
	fmt.Sscan(s, &i)
	return i
}

// echoServer serves a raw TCP echo on loopback until the test ends.
func echoServer(tb testing.TB) net.Listener {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { io.Copy(c, c); c.Close() }()
		}
	}()
	return ln
}

func TestConnectTunnel(t *testing.T) {
	eachPath(t, func(t *testing.T, newHarness harnessFunc) {
		// A raw TCP echo server stands in for a TLS server: CONNECT carries
		// bytes, whatever they are.
		ln := echoServer(t)
		_, port, _ := net.SplitHostPort(ln.Addr().String())
		h := newHarness(t, testPolicy("echo.test"), fakeDNS{"echo.test": {pub4}, "other.test": {pub4}})

		status, c := h.connect("echo.test:" + port)
		if status != "HTTP/1.1 200 Connection established" {
			t.Fatalf("CONNECT status %q", status)
		}
		msg := strings.Repeat("tunnelled bytes ", 1000)
		go func() {
			io.WriteString(c, msg)
			c.(*bufferedConn).Conn.(*net.TCPConn).CloseWrite()
		}()
		back, _ := io.ReadAll(c)
		c.Close()
		if string(back) != msg {
			t.Errorf("echoed %d bytes, want %d", len(back), len(msg))
		}

		// Bytes sent in the same write as the head (a TLS client hello
		// right behind the CONNECT) go through too.
		raw, err := net.Dial("tcp", h.addr)
		if err != nil {
			t.Fatal(err)
		}
		raw.SetDeadline(time.Now().Add(10 * time.Second))
		io.WriteString(raw, connectReq("echo.test:"+port)+"hello behind the head")
		raw.(*net.TCPConn).CloseWrite()
		back, _ = io.ReadAll(raw)
		raw.Close()
		if want := "HTTP/1.1 200 Connection established\r\n\r\nhello behind the head"; string(back) != want {
			t.Errorf("with bytes behind the head: %q, want %q", back, want)
		}

		status, c = h.connect("other.test:" + port)
		c.Close()
		if !strings.HasPrefix(status, "HTTP/1.1 403") {
			t.Errorf("denied CONNECT status %q", status)
		}
	})
}

func TestBlockedAddresses(t *testing.T) {
	eachPath(t, func(t *testing.T, newHarness harnessFunc) {
		_, port := upstream(t)
		pol := Policy{Default: "allow", BlockCIDRs: []string{"127.0.0.0/8", "10.0.0.0/8", "::1/128"}}
		h := newHarness(t, pol, fakeDNS{
			"rebind.test":  {"127.0.0.1"},
			"private.test": {"10.9.9.9"},
			"mapped.test":  {"::ffff:127.0.0.1"},
		})
		for _, target := range []string{"rebind.test", "127.0.0.1", "mapped.test", "[::1]"} {
			code, body := h.get("http://" + target + ":" + port + "/")
			if code != 403 || !strings.Contains(body, "resolves to a blocked address") {
				t.Errorf("GET %s = %d %q, want 403 blocked", target, code, body)
			}
		}
		if len(h.dialed) != 0 {
			t.Errorf("dialled %v; a blocked address must never be dialled", h.dialed)
		}
	})
}

// TestDialsTheCheckedAddress: of several answers, only those outside the
// blocked ranges are dialled, so a rebinding answer cannot slip through.
func TestDialsTheCheckedAddress(t *testing.T) {
	_, port := upstream(t)
	pol := Policy{Default: "allow", BlockCIDRs: []string{"10.0.0.0/8", "169.254.0.0/16"}}
	h := newHarness(t, pol, fakeDNS{"mixed.test": {"169.254.169.254", "10.0.0.1", "127.0.0.1", pub4}})
	code, _ := h.get("http://mixed.test:" + port + "/")
	if code != 200 {
		t.Fatalf("GET = %d", code)
	}
	if diff := cmp.Diff([]string{pub4 + ":" + port}, h.dialed); diff != "" {
		t.Errorf("dialled (-want +got):\n%s", diff)
	}
}

func TestReload(t *testing.T) {
	_, port := upstream(t)
	h := newHarness(t, testPolicy(), fakeDNS{"late.test": {pub4}})
	if code, _ := h.get("http://late.test:" + port + "/"); code != 403 {
		t.Fatalf("before reload: %d", code)
	}
	h.writePolicy(testPolicy("late.test"))
	if err := h.proxy.Reload(); err != nil {
		t.Fatal(err)
	}
	if code, _ := h.get("http://late.test:" + port + "/"); code != 200 {
		t.Errorf("after reload: %d", code)
	}
	// A broken policy file keeps the last good policy.
	os.WriteFile(h.policy, []byte(`{"default": "maybe"}`), 0o644)
	if err := h.proxy.Reload(); err == nil {
		t.Error("reload of a broken policy succeeded")
	}
	if code, _ := h.get("http://late.test:" + port + "/"); code != 200 {
		t.Errorf("after a failed reload: %d", code)
	}
}

func TestMalformed(t *testing.T) {
	eachPath(t, func(t *testing.T, newHarness harnessFunc) {
		h := newHarness(t, testPolicy(), fakeDNS{})
		for _, req := range []string{"GET /origin-form HTTP/1.1\r\nHost: x\r\n\r\n", "garbage\r\n\r\n", "GET ftp://x.test/ HTTP/1.1\r\nHost: x\r\n\r\n"} {
			c, err := net.Dial("tcp", h.addr)
			if err != nil {
				t.Fatal(err)
			}
			io.WriteString(c, req)
			line, _ := bufio.NewReader(c).ReadString('\n')
			c.Close()
			if !strings.HasPrefix(line, "HTTP/1.1 400") {
				t.Errorf("%q answered %q, want 400", req, line)
			}
		}
	})
}

func TestBridgeChain(t *testing.T) {
	_, port := upstream(t)
	dir := t.TempDir()
	policy := filepath.Join(dir, "policy.json")
	data, _ := json.Marshal(testPolicy(pub4))
	os.WriteFile(policy, data, 0o644)
	sock := filepath.Join(dir, "egress.sock")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var errs bytes.Buffer
	var d net.Dialer
	toUpstream := func(ctx context.Context, network, addr string) (net.Conn, error) {
		if addr != pub4+":"+port {
			return nil, fmt.Errorf("dialled %s", addr)
		}
		return d.DialContext(ctx, network, "127.0.0.1:"+port)
	}
	go proxyMain(ctx, []string{"--policy", policy, "--listen", "unix:" + sock, "--log", filepath.Join(dir, "log.jsonl")}, nil, io.Discard, &errs,
		Options{Dial: toUpstream, LocalAddrs: testLocal})
	bln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go Bridge(ctx, bln, sock)
	proxyURL, _ := url.Parse("http://" + bln.Addr().String())
	c := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(proxyURL)}, Timeout: 10 * time.Second}
	resp, err := c.Get("http://" + pub4 + ":" + port + "/")
	if err != nil {
		t.Fatalf("through bridge and proxy: %v (%s)", err, errs.String())
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("status %d", resp.StatusCode)
	}
	fi, err := os.Stat(sock)
	if err != nil || fi.Mode().Perm() != 0o666 {
		t.Errorf("socket mode %v, %v; want 0666 so the sandbox user can connect", fi.Mode(), err)
	}
	logged, _ := os.ReadFile(filepath.Join(dir, "log.jsonl"))
	if !strings.Contains(string(logged), `"decision":"allow"`) {
		t.Errorf("decision log: %s", logged)
	}
}

// TestHTTPResponsesWhole: responses of every shape reach the client
// whole through the proxy's buffered (and reused) writers, one request
// after another and several at once.
func TestHTTPResponsesWhole(t *testing.T) {
	eachPath(t, func(t *testing.T, newHarness harnessFunc) {
		big := bytes.Repeat([]byte("0123456789abcdef"), 1<<16) // 1 MiB
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("X-Upstream", "yes")
			w.Header().Add("Set-Cookie", "a=1")
			w.Header().Add("Set-Cookie", "b=2")
			switch r.URL.Path {
			case "/big":
				w.Write(big)
			case "/chunked":
				for i := 0; i < 3; i++ {
					fmt.Fprintf(w, "part%d;", i)
					w.(http.Flusher).Flush()
				}
			case "/empty":
				w.WriteHeader(http.StatusNoContent)
			}
		}))
		t.Cleanup(srv.Close)
		_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
		h := newHarness(t, testPolicy("up.test"), fakeDNS{"up.test": {pub4}})
		proxyURL, _ := url.Parse("http://" + h.addr)
		c := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(proxyURL), DisableKeepAlives: true}, Timeout: 10 * time.Second}
		fetch := func(path string) error {
			resp, err := c.Get("http://up.test:" + port + path)
			if err != nil {
				return err
			}
			defer resp.Body.Close()
			body, err := io.ReadAll(resp.Body)
			if err != nil {
				return err
			}
			want := map[string]string{"/big": string(big), "/chunked": "part0;part1;part2;", "/empty": ""}[path]
			if string(body) != want {
				return fmt.Errorf("%s: body of %d bytes, want %d", path, len(body), len(want))
			}
			if resp.Header.Get("X-Upstream") != "yes" || len(resp.Header.Values("Set-Cookie")) != 2 {
				return fmt.Errorf("%s: headers %v", path, resp.Header)
			}
			return nil
		}
		for _, path := range []string{"/big", "/chunked", "/empty", "/big"} {
			if err := fetch(path); err != nil {
				t.Error(err)
			}
		}
		errs := make(chan error, 12)
		for i := 0; i < cap(errs); i++ {
			go func() { errs <- fetch([]string{"/big", "/chunked", "/empty"}[i%3]) }()
		}
		for i := 0; i < cap(errs); i++ {
			if err := <-errs; err != nil {
				t.Error(err)
			}
		}
	})
}

// TestBodyInLargeWrites: a response body reaches a client on a Unix
// socket (the sandbox's bridge) in large writes, not bufio.Writer's 4 KiB
// ones, which it falls back to on a connection without ReadFrom.
func TestBodyInLargeWrites(t *testing.T) {
	big := bytes.Repeat([]byte("0123456789abcdef"), 1<<16) // 1 MiB
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// With its length, so that the proxy copies the body as it is
		// (a chunked one goes out chunk by chunk).
		w.Header().Set("Content-Length", strconv.Itoa(len(big)))
		w.Write(big)
	}))
	t.Cleanup(srv.Close)
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	h := &harness{t: t, log: &syncBuffer{}, policy: filepath.Join(t.TempDir(), "policy.json")}
	h.writePolicy(testPolicy("up.test"))
	p, err := New(Options{PolicyPath: h.policy, Resolver: recordingDNS{h, fakeDNS{"up.test": {pub4}}}, Log: h.log, Dial: h.dial, LocalAddrs: testLocal})
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(t.TempDir(), "egress.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	rec := &writeSizes{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { p.Serve(ctx, recordingListener{ln, rec}); close(done) }()
	t.Cleanup(func() { cancel(); <-done })

	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "GET http://up.test:%s/ HTTP/1.1\r\nHost: up.test:%s\r\n\r\n", port, port)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || !bytes.Equal(body, big) {
		t.Fatalf("body of %d bytes, %v; want %d", len(body), err, len(big))
	}
	if max := rec.max(); max <= 4096 {
		t.Errorf("largest write to the client %d bytes, want more than bufio.Writer's 4096", max)
	}
}

type writeSizes struct {
	mu      sync.Mutex
	largest int
}

func (w *writeSizes) add(n int) { w.mu.Lock(); w.largest = max(w.largest, n); w.mu.Unlock() }
func (w *writeSizes) max() int  { w.mu.Lock(); defer w.mu.Unlock(); return w.largest }

// recordingListener's connections record the size of each write, and
// have no ReadFrom, as a *net.UnixConn has none.
type recordingListener struct {
	net.Listener
	rec *writeSizes
}

func (l recordingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return recordingConn{c, l.rec}, nil
}

type recordingConn struct {
	net.Conn
	rec *writeSizes
}

func (c recordingConn) Write(p []byte) (int, error) {
	c.rec.add(len(p))
	return c.Conn.Write(p)
}
