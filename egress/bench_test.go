package egress

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"testing"

	"github.com/sbxhq/sbx/spec"
)

// BenchmarkRequest is one proxied request, client to upstream and back,
// all in this process: a GET of a name (resolved by a fake resolver), a
// GET of an IP literal, and a CONNECT that sends a few bytes each way.
// Its allocations per request are the proxy's hot path plus a fixed
// share for the client and the upstream.
func BenchmarkRequest(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "ok")
	}))
	defer srv.Close()
	echo := echoServer(b)
	policy := filepath.Join(b.TempDir(), "policy.json")
	data, _ := json.Marshal(Policy{Default: "deny", Allow: []string{"up.test", "echo.test", pub4}, BlockCIDRs: []string{"10.0.0.0/8", "169.254.0.0/16", "fc00::/7"}})
	if err := os.WriteFile(policy, data, 0o644); err != nil {
		b.Fatal(err)
	}
	var d net.Dialer
	p, err := New(Options{PolicyPath: policy, Resolver: fakeDNS{"up.test": {pub4}, "echo.test": {pub4b}}, Dial: func(ctx context.Context, network, addr string) (net.Conn, error) {
		if addr == pub4b+":443" {
			return d.DialContext(ctx, network, echo.Addr().String())
		}
		return d.DialContext(ctx, network, srv.Listener.Addr().String())
	}})
	if err != nil {
		b.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go p.Serve(ctx, ln)
	buf := make([]byte, 4096)
	for _, bb := range []struct{ name, req string }{
		{"GET name", "GET http://up.test/ HTTP/1.1\r\nHost: up.test\r\nUser-Agent: bench\r\nAccept: */*\r\n\r\n"},
		{"GET literal", "GET http://" + pub4 + "/ HTTP/1.1\r\nHost: " + pub4 + "\r\nUser-Agent: bench\r\nAccept: */*\r\n\r\n"},
		{"CONNECT", "CONNECT echo.test:443 HTTP/1.1\r\nHost: echo.test:443\r\n\r\nping"},
	} {
		b.Run(bb.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				c, err := net.Dial("tcp", ln.Addr().String())
				if err != nil {
					b.Fatal(err)
				}
				io.WriteString(c, bb.req)
				if bb.name == "CONNECT" {
					br := bufio.NewReader(c)
					if line, _ := br.ReadString('\n'); line != "HTTP/1.1 200 Connection established\r\n" {
						b.Fatalf("%q", line)
					}
					br.ReadString('\n')
					c.(*net.TCPConn).CloseWrite()
					if rest, _ := io.ReadAll(br); string(rest) != "ping" {
						b.Fatalf("echoed %q", rest)
					}
				} else if n, _ := io.ReadFull(c, buf[:12]); string(buf[:n]) != "HTTP/1.1 200" {
					b.Fatal(fmt.Sprintf("%q", buf[:n]))
				} else {
					io.Copy(io.Discard, c)
				}
				c.Close()
			}
		})
	}
}

// BenchmarkChecks is the CPU the proxy spends deciding on one request
// beside the network: counting the head as it is read, parsing the
// target, the policy's rules and the address checks, with the default
// blocked ranges.
func BenchmarkChecks(b *testing.B) {
	pol, err := (&Policy{Default: "deny", Allow: []string{"github.com", "*.npmjs.org", "registry.example.org:443"}, Deny: []string{"pastebin.com", "203.0.113.7"}, BlockCIDRs: spec.DefaultBlockCIDRs}).compile()
	if err != nil {
		b.Fatal(err)
	}
	p := &Proxy{}
	local, _ := testLocal()
	for _, a := range local {
		p.always.add(netip.PrefixFrom(a, a.BitLen()))
	}
	head := []byte("CONNECT registry.npmjs.org:443 HTTP/1.1\r\nHost: registry.npmjs.org:443\r\nUser-Agent: npm/10.8.2 node/v22.11.0 linux x64 workspaces/false\r\nProxy-Connection: keep-alive\r\n\r\n")
	addrs := []netip.Addr{netip.MustParseAddr("104.16.1.35"), netip.MustParseAddr("2606:4700::6810:123")}
	b.ReportAllocs()
	for b.Loop() {
		h := headReader{lim: requestLimits()}
		if err := h.scan(head); err != nil || !h.done {
			b.Fatal(err)
		}
		d, err := parseAuthority("registry.npmjs.org:443", 443)
		if err != nil {
			b.Fatal(err)
		}
		if !pol.decide(d).Allow {
			b.Fatal("denied")
		}
		for _, a := range addrs {
			a = canonical(a)
			if p.always.contain(a) {
				b.Fatal("always")
			}
			if r, _ := pol.vet(a, d); r != "" {
				b.Fatal(r)
			}
		}
	}
}
