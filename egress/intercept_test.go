package egress

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

const (
	testPlaceholder  = "sk-ant-sbx-0123456789abcdef"
	testValue        = "sk-ant-the-real-value"
	otherPlaceholder = "gh-sbx-fedcba9876543210"
	otherValue       = "ghp_the-other-real-value"
)

// secretUpstream is a TLS server (httptest's certificate: example.com and
// 127.0.0.1) that answers with the credentials it got.
func secretUpstream(t *testing.T) (*httptest.Server, string) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		user, pass, _ := r.BasicAuth()
		fmt.Fprintf(w, "host=%s auth=%s key=%s basic=%s:%s", r.Host, r.Header.Get("Authorization"), r.Header.Get("X-Api-Key"), user, pass)
	}))
	t.Cleanup(srv.Close)
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	return srv, port
}

// secretHarness is a proxy that adds testValue to requests for
// example.com and otherValue to those for other.example.com, verifying
// upstreams with the test server's CA (or roots, when given).
func secretHarness(t *testing.T, srv *httptest.Server, roots *x509.CertPool) (*harness, *CA) {
	t.Helper()
	if roots == nil {
		roots = x509.NewCertPool()
		roots.AddCert(srv.Certificate())
	}
	h := newHarness(t, testPolicy("example.com", "other.example.com", "plain.example.com"),
		fakeDNS{"example.com": {pub4}, "other.example.com": {pub4}, "plain.example.com": {pub4}},
		func(o *Options) { o.UpstreamRoots = roots })
	ca, err := NewCA("test")
	if err != nil {
		t.Fatal(err)
	}
	err = h.proxy.SetSecrets(ca, []Secret{
		{Name: "ANTHROPIC_API_KEY", Placeholder: testPlaceholder, Value: testValue, Hosts: []string{"example.com"}},
		{Name: "GITHUB_TOKEN", Placeholder: otherPlaceholder, Value: otherValue, Hosts: []string{"other.example.com"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return h, ca
}

// sandboxClient is a client in the sandbox: it goes through the proxy and
// trusts the sandbox's CA only.
func sandboxClient(h *harness, ca *CA) *http.Client {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca.CertPEM())
	proxyURL, _ := url.Parse("http://" + h.addr)
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		Proxy: http.ProxyURL(proxyURL), TLSClientConfig: &tls.Config{RootCAs: pool}, DisableKeepAlives: true,
	}}
}

func do(t *testing.T, c *http.Client, req *http.Request) (int, string) {
	t.Helper()
	resp, err := c.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestSecretAddedForItsHost: the placeholder in a header, or as the
// password of Basic credentials, reaches the secret's host as the value;
// the sandbox's TLS is terminated with the sandbox's CA, and the log says
// which secret went.
func TestSecretAddedForItsHost(t *testing.T) {
	srv, port := secretUpstream(t)
	h, ca := secretHarness(t, srv, nil)
	c := sandboxClient(h, ca)

	req, _ := http.NewRequest("GET", "https://example.com:"+port+"/v1/messages", nil)
	req.Header.Set("Authorization", "Bearer "+testPlaceholder)
	req.Header.Set("X-Api-Key", testPlaceholder)
	code, body := do(t, c, req)
	if want := "auth=Bearer " + testValue + " key=" + testValue; code != 200 || !strings.Contains(body, want) {
		t.Errorf("got %d %q, want 200 with %q", code, body, want)
	}
	req, _ = http.NewRequest("GET", "https://other.example.com:"+port+"/repo.git/info/refs", nil)
	req.SetBasicAuth("x-access-token", otherPlaceholder)
	code, body = do(t, c, req)
	if want := "basic=x-access-token:" + otherValue; code != 200 || !strings.Contains(body, want) {
		t.Errorf("basic: got %d %q, want 200 with %q", code, body, want)
	}
	es := h.log.entries(t)
	if len(es) != 2 || es[0].Decision != "allow" || !strings.Contains(es[0].Reason, "secrets added: ANTHROPIC_API_KEY") ||
		!strings.Contains(es[1].Reason, "secrets added: GITHUB_TOKEN") {
		t.Errorf("log %+v", es)
	}
	if strings.Contains(h.log.String(), testValue) || strings.Contains(h.log.String(), otherValue) {
		t.Errorf("the log holds a value: %s", h.log.String())
	}
}

// TestSecretMisdirected: the placeholder of one secret sent to the host
// of another, or in a plain-HTTP request, is refused and logged; nothing
// reaches the upstream.
func TestSecretMisdirected(t *testing.T) {
	srv, port := secretUpstream(t)
	h, ca := secretHarness(t, srv, nil)
	c := sandboxClient(h, ca)

	req, _ := http.NewRequest("GET", "https://other.example.com:"+port+"/gists", nil)
	req.Header.Set("X-Note", "leaked "+testPlaceholder)
	code, body := do(t, c, req)
	if code != http.StatusForbidden || !strings.Contains(body, "ANTHROPIC_API_KEY") {
		t.Errorf("misdirected: got %d %q, want 403 naming the secret", code, body)
	}
	req, _ = http.NewRequest("GET", "https://other.example.com:"+port+"/search?q="+testPlaceholder, nil)
	if code, body = do(t, c, req); code != http.StatusForbidden {
		t.Errorf("misdirected in the target: got %d %q, want 403", code, body)
	}
	plain, _ := upstream(t)
	_, pport, _ := net.SplitHostPort(plain.Listener.Addr().String())
	req, _ = http.NewRequest("GET", "http://plain.example.com:"+pport+"/", nil)
	req.Header.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte("u:"+otherPlaceholder)))
	if code, body = do(t, c, req); code != http.StatusForbidden || !strings.Contains(body, "GITHUB_TOKEN") {
		t.Errorf("plain HTTP: got %d %q, want 403 naming the secret", code, body)
	}
	for _, e := range h.log.entries(t) {
		if e.Decision != "deny" || !strings.Contains(e.Reason, "placeholder of secret") {
			t.Errorf("log entry %+v, want a refusal naming a placeholder", e)
		}
	}
}

// TestSecretOtherHostTunnelled: with secrets set, a tunnel to a host no
// secret is for is still spliced, bytes unchanged (the client's own TLS
// goes through).
func TestSecretOtherHostTunnelled(t *testing.T) {
	srv, _ := secretUpstream(t)
	h, _ := secretHarness(t, srv, nil)
	ln := echoServer(t)
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	status, c := h.connect("plain.example.com:" + port)
	if status != "HTTP/1.1 200 Connection established" {
		t.Fatalf("CONNECT status %q", status)
	}
	msg := "\x16\x03\x01 a client hello, untouched " + testPlaceholder
	go func() {
		io.WriteString(c, msg)
		c.(*bufferedConn).Conn.(*net.TCPConn).CloseWrite()
	}()
	back, _ := io.ReadAll(c)
	c.Close()
	if string(back) != msg {
		t.Errorf("echoed %q, want %q", back, msg)
	}
}

// TestSecretUpstreamVerified: the proxy verifies the upstream as a client
// would; an upstream whose certificate it does not trust gets nothing,
// and the sandbox's request is answered 502 in its tunnel.
func TestSecretUpstreamVerified(t *testing.T) {
	srv, port := secretUpstream(t)
	h, ca := secretHarness(t, srv, x509.NewCertPool())
	c := sandboxClient(h, ca)
	req, _ := http.NewRequest("GET", "https://example.com:"+port+"/", nil)
	req.Header.Set("Authorization", "Bearer "+testPlaceholder)
	code, body := do(t, c, req)
	if code != http.StatusBadGateway || !strings.Contains(body, "upstream TLS") {
		t.Fatalf("got %d %q from an untrusted upstream, want 502 for its TLS", code, body)
	}
	es := h.log.entries(t)
	if len(es) != 1 || es[0].Status != http.StatusBadGateway || !strings.Contains(es[0].Reason, "upstream TLS") {
		t.Errorf("log %+v, want one 502 for the upstream's TLS", es)
	}
}

// TestSecretUpstreamResumed: the proxy resumes its TLS sessions with an
// upstream, so a terminated tunnel after the first skips the upstream's
// certificate and its verification.
func TestSecretUpstreamResumed(t *testing.T) {
	var (
		mu      sync.Mutex
		resumed []bool
	)
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		resumed = append(resumed, r.TLS.DidResume)
		mu.Unlock()
	}))
	t.Cleanup(srv.Close)
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	h, ca := secretHarness(t, srv, nil)
	c := sandboxClient(h, ca)
	for range 2 {
		req, _ := http.NewRequest("GET", "https://example.com:"+port+"/", nil)
		req.Header.Set("Authorization", "Bearer "+testPlaceholder)
		if code, body := do(t, c, req); code != 200 {
			t.Fatalf("got %d %q, want 200", code, body)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if want := []bool{false, true}; !slices.Equal(resumed, want) {
		t.Errorf("upstream handshakes resumed %v, want %v", resumed, want)
	}
}

// TestSecretWrongHostInTunnel: a request whose Host is not the tunnel's
// is refused (another virtual host of the same server must not get the
// secret).
func TestSecretWrongHostInTunnel(t *testing.T) {
	srv, port := secretUpstream(t)
	h, ca := secretHarness(t, srv, nil)
	c := sandboxClient(h, ca)
	req, _ := http.NewRequest("GET", "https://example.com:"+port+"/", nil)
	req.Host = "evil.example.net"
	req.Header.Set("Authorization", "Bearer "+testPlaceholder)
	if code, body := do(t, c, req); code != http.StatusMisdirectedRequest {
		t.Errorf("got %d %q, want 421", code, body)
	}
}

// TestCompileSecrets refuses what would make the proxy add a secret
// wrongly.
func TestCompileSecrets(t *testing.T) {
	ca, err := NewCA("t")
	if err != nil {
		t.Fatal(err)
	}
	ok := Secret{Name: "A", Placeholder: testPlaceholder, Value: "v", Hosts: []string{"example.com"}}
	for _, tt := range []struct {
		name string
		s    []Secret
		ca   *CA
		want string
	}{
		{"no CA", []Secret{ok}, nil, "need the sandbox's CA"},
		{"short placeholder", []Secret{{Name: "A", Placeholder: "short", Value: "v", Hosts: ok.Hosts}}, ca, "16 characters"},
		{"line break", []Secret{{Name: "A", Placeholder: testPlaceholder, Value: "v\r\nX-Evil: 1", Hosts: ok.Hosts}}, ca, "line break"},
		{"no hosts", []Secret{{Name: "A", Placeholder: testPlaceholder, Value: "v"}}, ca, "names no host"},
		{"bad host", []Secret{{Name: "A", Placeholder: testPlaceholder, Value: "v", Hosts: []string{"https://x/"}}}, ca, "not a URL"},
		{"nested placeholders", []Secret{ok, {Name: "B", Placeholder: testPlaceholder + "-more", Value: "w", Hosts: ok.Hosts}}, ca, "holds the other"},
	} {
		if _, err := compileSecrets(tt.ca, tt.s); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: got %v, want %q", tt.name, err, tt.want)
		}
	}
}

// TestCARoundTrip: the CA written for the proxy reads back, and its
// certificate alone (what the sandbox gets) holds no key.
func TestCARoundTrip(t *testing.T) {
	ca, err := NewCA("api")
	if err != nil {
		t.Fatal(err)
	}
	b, err := ca.MarshalPEM()
	if err != nil {
		t.Fatal(err)
	}
	back, err := ParseCA(b)
	if err != nil {
		t.Fatal(err)
	}
	if !back.cert.Equal(ca.cert) || !back.key.Equal(ca.key) {
		t.Error("the CA read back differs")
	}
	if strings.Contains(string(ca.CertPEM()), "PRIVATE KEY") {
		t.Error("the certificate the sandbox trusts holds the key")
	}
}

// TestRewriteOnePass: placeholders are replaced in one pass, so a value
// that happens to hold another secret's placeholder is sent as it is,
// never searched again.
func TestRewriteOnePass(t *testing.T) {
	ca, err := NewCA("t")
	if err != nil {
		t.Fatal(err)
	}
	a, b := "sbx-aaaaaaaaaaaaaaaaaaaaaaaa", "sbx-bbbbbbbbbbbbbbbbbbbbbbbb"
	set, err := compileSecrets(ca, []Secret{
		{Name: "A", Placeholder: a, Value: "value-of-a-holds-" + b, Hosts: []string{"api.example.com"}},
		{Name: "B", Placeholder: b, Value: "value-of-b", Hosts: []string{"api.example.com"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest("GET", "https://api.example.com/", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+a+" "+b)
	d, err := parseAuthority("api.example.com:443", 443)
	if err != nil {
		t.Fatal(err)
	}
	added, err := set.rewrite(req, d)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := req.Header.Get("Authorization"), "Bearer value-of-a-holds-"+b+" value-of-b"; got != want || len(added) != 2 {
		t.Errorf("Authorization = %q, added %v; want %q, both", got, added, want)
	}
}
