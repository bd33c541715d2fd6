// Command interceptbench measures what sbx's egress proxy adds to an
// HTTPS request when it terminates the sandbox's TLS to add a secret
// (egress/intercept.go), against the same request through a tunnel it
// splices (issue 22: within 1 ms at the median). Run: go run
// ./bench/testdata/interceptbench. Loopback only; it stops by itself.
//
// Each sample is what a sandbox's client does for one request through a
// one-request tunnel: a new TCP connection to the proxy, CONNECT, a full
// TLS handshake (no session resumption) and one GET carrying the
// secret's placeholder in Authorization, read to its end. Two arms, taking
// turns sample by sample (each pair's order alternating) so that the
// machine's other work weighs on both alike:
//
//   - tunnelled: CONNECT to a host no secret is for; the client's TLS goes
//     through the proxy unread to the upstream.
//   - terminated: CONNECT to the secret's host; the proxy verifies the
//     upstream over its own TLS connection, answers the CONNECT, serves
//     TLS with a leaf from the sandbox's CA, replaces the placeholder and
//     forwards the request.
//
// Both arms reach the same upstream (one TLS server in this process, both
// names on its certificate), with the same client and TLS settings
// (crypto/tls defaults, TLS 1.3, http/1.1), and every certificate is
// ECDSA P-256, as the sandbox's CA (egress.NewCA) makes its leaves. The
// upstream echoes the Authorization it got, and each sample checks it:
// the value in the terminated arm, the placeholder in the tunnelled one.
//
// sbx's proxy runs as it does in its container: its own process, a static
// build, GOMAXPROCS=1, its log written (to /dev/null), the CA and secret
// set as the control channel sets them. It refuses loopback whatever its
// policy says, so to it both names resolve to a public address, which its
// dialer takes to the loopback upstream: this program's proxy mode.
package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/sbxhq/sbx/egress"
)

const (
	// secretHost is the host the secret is for (terminated); tunnelHost
	// any other allowed host (spliced). Both are the same upstream.
	secretHost = "api.bench.test"
	tunnelHost = "tunnel.bench.test"
	// publicAddr is where the proxy believes both are (its dialer takes it
	// to the loopback upstream).
	publicAddr = "93.184.215.14"

	placeholder = "sk-ant-sbx-0123456789abcdef"
	secretValue = "sk-ant-the-real-value-0123456789"
)

// proxyMode is the argument that makes this program the proxy process:
// proxyMode DIR LISTEN UPSTREAM [CPUPROFILE], DIR holding policy.json,
// ca.pem (the sandbox's CA), secrets.json and upstream-ca.pem.
const proxyMode = "__proxy"

func main() {
	if len(os.Args) >= 5 && os.Args[1] == proxyMode {
		profile := ""
		if len(os.Args) > 5 {
			profile = os.Args[5]
		}
		if err := serveProxy(os.Args[2], os.Args[3], os.Args[4], profile); err != nil {
			fmt.Fprintln(os.Stderr, "interceptbench proxy:", err)
			os.Exit(1)
		}
		return
	}
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "interceptbench:", err)
		os.Exit(1)
	}
}

func run() error {
	samples := flag.Int("n", 3000, "samples per arm")
	warmup := flag.Int("warmup", 200, "samples per arm first, not counted")
	profile := flag.String("proxy-cpuprofile", "", "write the proxy process's CPU profile (runtime/pprof) to this file")
	flag.Parse()
	dir, err := os.MkdirTemp("", "interceptbench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)

	// The upstream: one TLS server for both names, ECDSA P-256, answering
	// with the Authorization it got.
	upCA, upCAKey, err := newCA("interceptbench upstream")
	if err != nil {
		return err
	}
	upCert, err := newLeaf(upCA, upCAKey, secretHost, tunnelHost)
	if err != nil {
		return err
	}
	upLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	var resumed [2]atomic.Int64 // the upstream's resumed handshakes: tunnelled, terminated
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.TLS.DidResume {
				resumed[bool2int(r.TLS.ServerName == secretHost)].Add(1)
			}
			io.WriteString(w, "auth="+r.Header.Get("Authorization"))
		}),
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{upCert}},
		ErrorLog:  log.New(io.Discard, "", 0),
	}
	go srv.ServeTLS(upLn, "", "")
	defer srv.Close()
	_, upPort, _ := net.SplitHostPort(upLn.Addr().String())

	// The proxy's files: its policy, the sandbox's CA, the secret, and the
	// roots it verifies the upstream with.
	ca, err := egress.NewCA("interceptbench")
	if err != nil {
		return err
	}
	caPEM, err := ca.MarshalPEM()
	if err != nil {
		return err
	}
	policy, _ := json.Marshal(egress.Policy{Default: "deny", Allow: []string{secretHost + ":" + upPort, tunnelHost + ":" + upPort}, BlockCIDRs: []string{"10.0.0.0/8"}})
	secrets, _ := json.Marshal([]egress.Secret{{Name: "ANTHROPIC_API_KEY", Placeholder: placeholder, Value: secretValue, Hosts: []string{secretHost}}})
	for name, data := range map[string][]byte{
		"policy.json":     policy,
		"ca.pem":          caPEM,
		"secrets.json":    secrets,
		"upstream-ca.pem": pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: upCA.Raw}),
	} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			return err
		}
	}

	self := filepath.Join(dir, "interceptbench")
	build := exec.Command("go", "build", "-o", self, "github.com/sbxhq/sbx/bench/testdata/interceptbench")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("building the proxy: %v: %s", err, out)
	}
	proxyLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	proxyAddr := proxyLn.Addr().String()
	proxyLn.Close()
	args := []string{proxyMode, dir, proxyAddr, upLn.Addr().String()}
	if *profile != "" {
		abs, err := filepath.Abs(*profile)
		if err != nil {
			return err
		}
		args = append(args, abs)
	}
	proxy := exec.Command(self, args...)
	proxy.Env = append(os.Environ(), "GOMAXPROCS=1") // as the docker driver runs the proxy
	proxy.Stderr = os.Stderr
	if err := proxy.Start(); err != nil {
		return err
	}
	defer func() {
		// SIGINT lets the proxy write its profile.
		proxy.Process.Signal(os.Interrupt)
		proxy.Wait()
	}()
	if err := waitListening(proxyAddr); err != nil {
		return err
	}

	roots := x509.NewCertPool()
	roots.AddCert(upCA)
	roots.AppendCertsFromPEM(ca.CertPEM())
	arms := []arm{
		{name: "tunnelled", host: tunnelHost, port: upPort, want: "auth=Bearer " + placeholder},
		{name: "terminated", host: secretHost, port: upPort, want: "auth=Bearer " + secretValue},
	}
	c := client{proxy: proxyAddr, roots: roots}
	for i := range *warmup + *samples {
		// Each pair's order alternates: neither arm always follows the
		// other.
		for j := range arms {
			a := &arms[(i+j)%len(arms)]
			s, err := c.sample(a)
			if err != nil {
				return fmt.Errorf("%s: %v", a.name, err)
			}
			if i >= *warmup {
				a.samples = append(a.samples, s)
			}
		}
	}
	report(os.Stdout, arms, *samples)
	n := *warmup + *samples
	fmt.Printf("the upstream's handshakes resumed: tunnelled %d of %d, terminated %d of %d\n", resumed[0].Load(), n, resumed[1].Load(), n)
	return nil
}

func bool2int(b bool) int {
	if b {
		return 1
	}
	return 0
}

// arm is one way to the upstream and its samples.
type arm struct {
	name, host, port string
	want             string // the upstream's answer
	samples          []sample
}

// sample is one request's phases, as its client sees them.
type sample struct {
	connect   time.Duration // TCP connection to the proxy, CONNECT, its 200
	handshake time.Duration // the client's TLS handshake in the tunnel
	request   time.Duration // the request written, the answer read to its end
}

func (s sample) total() time.Duration { return s.connect + s.handshake + s.request }

// client is a sandbox's client: it trusts the sandbox's CA and (for the
// tunnelled arm, which reaches the upstream itself) the upstream's.
type client struct {
	proxy string
	roots *x509.CertPool
}

func (c client) sample(a *arm) (sample, error) {
	var s sample
	authority := net.JoinHostPort(a.host, a.port)
	start := time.Now()
	conn, err := net.Dial("tcp", c.proxy)
	if err != nil {
		return s, err
	}
	defer conn.Close()
	conn.SetDeadline(start.Add(10 * time.Second))
	if _, err := io.WriteString(conn, "CONNECT "+authority+" HTTP/1.1\r\nHost: "+authority+"\r\n\r\n"); err != nil {
		return s, err
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	if err != nil {
		return s, err
	}
	if resp.StatusCode != http.StatusOK || br.Buffered() > 0 {
		return s, fmt.Errorf("CONNECT: %s", resp.Status)
	}
	t1 := time.Now()
	s.connect = t1.Sub(start)
	tc := tls.Client(conn, &tls.Config{ServerName: a.host, RootCAs: c.roots, NextProtos: []string{"http/1.1"}})
	if err := tc.Handshake(); err != nil {
		return s, err
	}
	t2 := time.Now()
	s.handshake = t2.Sub(t1)
	req := "GET /v1/messages HTTP/1.1\r\nHost: " + authority + "\r\nAuthorization: Bearer " + placeholder +
		"\r\nUser-Agent: interceptbench\r\nAccept: */*\r\nConnection: close\r\n\r\n"
	if _, err := io.WriteString(tc, req); err != nil {
		return s, err
	}
	resp, err = http.ReadResponse(bufio.NewReader(tc), nil)
	if err != nil {
		return s, err
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return s, err
	}
	s.request = time.Since(t2)
	if resp.StatusCode != http.StatusOK || !bytes.Equal(body, []byte(a.want)) {
		return s, fmt.Errorf("got %s %q, want 200 %q", resp.Status, body, a.want)
	}
	return s, nil
}

// report prints each arm's percentiles by phase, and the terminated arm's
// cost over the tunnelled one's.
func report(w io.Writer, arms []arm, n int) {
	fmt.Fprintf(w, "%d samples per arm, interleaved.\n\n", n)
	fmt.Fprintf(w, "| arm | phase | p50 | p90 | p99 |\n|---|---|---:|---:|---:|\n")
	phases := []struct {
		name string
		f    func(sample) time.Duration
	}{
		{"whole request", sample.total},
		{"CONNECT answered", func(s sample) time.Duration { return s.connect }},
		{"client's TLS handshake", func(s sample) time.Duration { return s.handshake }},
		{"request and answer", func(s sample) time.Duration { return s.request }},
	}
	for _, a := range arms {
		for _, p := range phases {
			d := durations(a.samples, p.f)
			fmt.Fprintf(w, "| %s | %s | %s | %s | %s |\n", a.name, p.name, us(pct(d, 50)), us(pct(d, 90)), us(pct(d, 99)))
		}
	}
	tun, ter := arms[0].samples, arms[1].samples
	tunP50, terP50 := pct(durations(tun, sample.total), 50), pct(durations(ter, sample.total), 50)
	fmt.Fprintln(w)
	fmt.Fprintf(w, "terminated − tunnelled, p50 of the whole request: %s (budget 1 ms: %s)\n", us(terP50-tunP50), metOrNot(terP50-tunP50 <= time.Millisecond))
	// The pairs ran back to back: the median of their differences is
	// less exposed to the machine's load drifting than the two p50s are.
	diffs := make([]time.Duration, len(ter))
	for i := range ter {
		diffs[i] = ter[i].total() - tun[i].total()
	}
	fmt.Fprintf(w, "median of the pairs' differences: %s\n", us(pct(diffs, 50)))
	for _, a := range arms {
		// A median of ratios, each sample's handshakes over its whole.
		hs := make([]float64, len(a.samples))
		for i, s := range a.samples {
			hs[i] = float64(s.handshake) / float64(s.total())
		}
		slices.Sort(hs)
		fmt.Fprintf(w, "%s: the client's TLS handshake is %.0f%% of a request (median over samples)\n", a.name, 100*hs[len(hs)/2])
	}
	fmt.Fprintf(w, "terminated − tunnelled, p50 of CONNECT answered: %s\n",
		us(pct(durations(ter, func(s sample) time.Duration { return s.connect }), 50)-pct(durations(tun, func(s sample) time.Duration { return s.connect }), 50)))
}

func metOrNot(ok bool) string {
	if ok {
		return "met"
	}
	return "missed"
}

func durations(ss []sample, f func(sample) time.Duration) []time.Duration {
	d := make([]time.Duration, len(ss))
	for i, s := range ss {
		d[i] = f(s)
	}
	return d
}

// pct is the p-th percentile (nearest rank) of d.
func pct(d []time.Duration, p int) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	i := (len(s)*p + 99) / 100
	return s[max(i-1, 0)]
}

func us(d time.Duration) string { return fmt.Sprintf("%d µs", d.Microseconds()) }

// newCA is the upstream's CA, ECDSA P-256 as the sandbox's.
func newCA(name string) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, err
	}
	cert, err := x509.ParseCertificate(der)
	return cert, key, err
}

// newLeaf is the upstream's certificate for names, with its chain as the
// sandbox's CA gives the proxy's leaves theirs (leaf, then CA).
func newLeaf(ca *x509.Certificate, caKey *ecdsa.PrivateKey, names ...string) (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: names[0]},
		DNSNames:     names,
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return tls.Certificate{}, err
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: [][]byte{der, ca.Raw}, PrivateKey: key, Leaf: leaf}, nil
}

// serveProxy runs sbx's egress proxy as `sbx __egress-proxy` does, its
// decisions written to /dev/null, both names resolving to publicAddr and
// its dialer taking publicAddr to the loopback upstream. The CA and the
// secret are set as the control channel sets them. With profile, it
// writes its CPU profile there when interrupted.
func serveProxy(dir, listen, upstream, profile string) error {
	files := map[string][]byte{"upstream-ca.pem": nil, "ca.pem": nil, "secrets.json": nil}
	for name := range files {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return err
		}
		files[name] = b
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(files["upstream-ca.pem"]) {
		return errors.New("no upstream CA")
	}
	logf, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	defer logf.Close()
	_, upPort, _ := net.SplitHostPort(upstream)
	var d net.Dialer
	p, err := egress.New(egress.Options{
		PolicyPath:    filepath.Join(dir, "policy.json"),
		Log:           logf,
		Resolver:      resolver{},
		UpstreamRoots: roots,
		Dial: func(ctx context.Context, network, addr string) (net.Conn, error) {
			if addr != publicAddr+":"+upPort {
				return nil, fmt.Errorf("the benchmark's proxy dials only %s:%s, not %s", publicAddr, upPort, addr)
			}
			return d.DialContext(ctx, network, upstream)
		},
	})
	if err != nil {
		return err
	}
	ca, err := egress.ParseCA(files["ca.pem"])
	if err != nil {
		return err
	}
	var secrets []egress.Secret
	if err := json.Unmarshal(files["secrets.json"], &secrets); err != nil {
		return err
	}
	if err := p.SetSecrets(ca, secrets); err != nil {
		return err
	}
	if profile != "" {
		f, err := os.Create(profile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return err
	}
	return p.Serve(ctx, ln)
}

// resolver answers publicAddr for every name.
type resolver struct{}

func (resolver) LookupIPAddr(context.Context, string) ([]net.IPAddr, error) {
	return []net.IPAddr{{IP: net.ParseIP(publicAddr)}}, nil
}

// waitListening waits (up to 5 s) until something accepts on addr.
func waitListening(addr string) error {
	for range 250 {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("nothing listens on %s", addr)
}
