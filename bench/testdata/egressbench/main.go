// Command egressbench compares, on loopback, a direct HTTP client with the
// same client through sbx's egress proxy and through Debian's tinyproxy
// with the same allow-list: the throughput of one 1 GiB transfer and the
// p50/p99 latency of small requests. Run: go run ./bench/testdata/egressbench
// (needs /usr/bin/tinyproxy). Loopback only; it stops by itself.
//
// sbx's proxy refuses loopback whatever its policy says, so it runs here
// as this program's proxy mode: the same egress.Proxy as `sbx
// __egress-proxy`, whose dialer takes the public address it was asked
// for to the loopback upstream.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/sbxhq/sbx/egress"
)

const (
	bigSize   = 1 << 30
	smallReqs = 2000
)

// publicAddr is where sbx's proxy believes the upstream is (example.com's
// address; the proxy's dialer takes it to loopback instead).
const publicAddr = "93.184.215.14"

// proxyMode is the argument that makes this program the proxy process:
// proxyMode POLICY LISTEN UPSTREAM.
const proxyMode = "__proxy"

func main() {
	if len(os.Args) == 5 && os.Args[1] == proxyMode {
		if err := serveProxy(os.Args[2], os.Args[3], os.Args[4]); err != nil {
			fmt.Fprintln(os.Stderr, "egressbench proxy:", err)
			os.Exit(1)
		}
		return
	}
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "egressbench:", err)
		os.Exit(1)
	}
}

func run() error {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dir, err := os.MkdirTemp("", "egressbench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)

	// The upstream: a 1 GiB body and a tiny one.
	chunk := make([]byte, 1<<20)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/big" {
			w.Header().Set("Content-Length", fmt.Sprint(bigSize))
			for i := 0; i < bigSize/len(chunk); i++ {
				w.Write(chunk)
			}
			return
		}
		io.WriteString(w, "ok")
	})}
	up, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	go srv.Serve(up)
	defer srv.Close()
	_, upPort, _ := net.SplitHostPort(up.Addr().String())

	// sbx's proxy as it runs in its container: its own process, a static
	// build, GOMAXPROCS=1, allowing only the upstream. The proxy refuses
	// loopback whatever its policy says, so to it the upstream stands at
	// a public address (never dialled): the process is this program in
	// proxy mode, sbx's egress.Proxy whose dialer carries that one
	// address to the loopback upstream.
	self := filepath.Join(dir, "egressbench")
	build := exec.Command("go", "build", "-o", self, "github.com/sbxhq/sbx/bench/testdata/egressbench")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("building the proxy: %v: %s", err, out)
	}
	policy := filepath.Join(dir, "policy.json")
	data, _ := json.Marshal(egress.Policy{Default: "deny", Allow: []string{publicAddr + ":" + upPort}, BlockCIDRs: []string{"10.0.0.0/8"}})
	os.WriteFile(policy, data, 0o644)
	sbxPort, err := freePort()
	if err != nil {
		return err
	}
	proxy := exec.CommandContext(ctx, self, proxyMode, policy, "127.0.0.1:"+sbxPort, "127.0.0.1:"+upPort)
	proxy.Env = append(os.Environ(), "GOMAXPROCS=1") // as the docker driver runs it
	proxy.Stderr = os.Stderr
	if err := proxy.Start(); err != nil {
		return fmt.Errorf("the proxy: %v", err)
	}
	defer proxy.Process.Kill()
	waitListening(sbxPort)

	// tinyproxy with the same allow-list.
	tinyPort, err := freePort()
	if err != nil {
		return err
	}
	filter := filepath.Join(dir, "filter")
	os.WriteFile(filter, []byte("^127\\.0\\.0\\.1$\n"), 0o644)
	conf := filepath.Join(dir, "tinyproxy.conf")
	os.WriteFile(conf, []byte(fmt.Sprintf(`Port %s
Listen 127.0.0.1
Timeout 600
MaxClients 100
Filter "%s"
FilterDefaultDeny Yes
FilterExtended On
ConnectPort %s
LogLevel Critical
`, tinyPort, filter, upPort)), 0o644)
	tiny := exec.CommandContext(ctx, "/usr/bin/tinyproxy", "-d", "-c", conf)
	tiny.Stderr = io.Discard
	if err := tiny.Start(); err != nil {
		return fmt.Errorf("tinyproxy: %v", err)
	}
	defer tiny.Process.Kill()
	waitListening(tinyPort)

	fmt.Printf("| path | 1 GiB transfer | throughput | small request p50 | p99 |\n|---|---:|---:|---:|---:|\n")
	for _, c := range []struct{ name, proxy, upstream string }{
		{"direct", "", "127.0.0.1:" + upPort},
		{"sbx egress proxy", "127.0.0.1:" + sbxPort, publicAddr + ":" + upPort},
		{"tinyproxy " + tinyVersion(), "127.0.0.1:" + tinyPort, "127.0.0.1:" + upPort},
	} {
		client := newClient(c.proxy)
		start := time.Now()
		resp, err := client.Get("http://" + c.upstream + "/big")
		if err != nil {
			return fmt.Errorf("%s: %v", c.name, err)
		}
		n, _ := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		d := time.Since(start)
		if n != bigSize {
			return fmt.Errorf("%s: got %d bytes", c.name, n)
		}
		lat := make([]time.Duration, 0, smallReqs)
		for i := 0; i < smallReqs; i++ {
			s := time.Now()
			resp, err := client.Get("http://" + c.upstream + "/small")
			if err != nil {
				return fmt.Errorf("%s: %v", c.name, err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			lat = append(lat, time.Since(s))
		}
		sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
		fmt.Printf("| %s | %s | %.0f MiB/s | %s | %s |\n", c.name, d.Round(time.Millisecond), float64(bigSize)/(1<<20)/d.Seconds(),
			lat[len(lat)/2].Round(time.Microsecond), lat[len(lat)*99/100].Round(time.Microsecond))
	}
	return nil
}

// serveProxy runs sbx's egress proxy as `sbx __egress-proxy` does (its
// decisions written to a file, here /dev/null), with a dialer that takes
// publicAddr to the loopback upstream and refuses every other address.
func serveProxy(policy, listen, upstream string) error {
	logf, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	defer logf.Close()
	_, upPort, _ := net.SplitHostPort(upstream)
	var d net.Dialer
	p, err := egress.New(egress.Options{PolicyPath: policy, Log: logf, Dial: func(ctx context.Context, network, addr string) (net.Conn, error) {
		if addr != publicAddr+":"+upPort {
			return nil, fmt.Errorf("the benchmark's proxy dials only %s:%s, not %s", publicAddr, upPort, addr)
		}
		return d.DialContext(ctx, network, upstream)
	}})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return err
	}
	return p.Serve(context.Background(), ln)
}

// freePort returns a loopback port that was free a moment ago.
func freePort() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	_, port, _ := net.SplitHostPort(l.Addr().String())
	return port, nil
}

// waitListening waits (up to 2 s) until something accepts on a loopback
// port.
func waitListening(port string) {
	for i := 0; i < 100; i++ {
		if c, err := net.Dial("tcp", "127.0.0.1:"+port); err == nil {
			c.Close()
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// newClient makes one connection per request, as a proxied client of a
// one-request-per-connection proxy does, so the three paths compare alike.
func newClient(proxy string) *http.Client {
	tr := &http.Transport{DisableKeepAlives: true}
	if proxy != "" {
		u, _ := url.Parse("http://" + proxy)
		tr.Proxy = http.ProxyURL(u)
	}
	return &http.Client{Transport: tr, Timeout: 5 * time.Minute}
}

func tinyVersion() string {
	out, _ := exec.Command("/usr/bin/tinyproxy", "-v").CombinedOutput()
	f := strings.Fields(string(out))
	if len(f) > 0 {
		return f[len(f)-1]
	}
	return ""
}
