// Command egressbench compares, on loopback, a direct HTTP client with the
// same client through sbx's egress proxy and through Debian's tinyproxy
// with the same allow-list: the throughput of one 1 GiB transfer and the
// p50/p99 latency of small requests. Run: go run ./bench/testdata/egressbench
// (needs /usr/bin/tinyproxy). Loopback only; it stops by itself.
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

func main() {
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

	// sbx's proxy, allowing only the upstream (loopback not blocked here),
	// as it runs in its container: its own process, the static sbx binary.
	sbx := filepath.Join(dir, "sbx")
	build := exec.Command("go", "build", "-o", sbx, "github.com/sbxhq/sbx/cmd/sbx")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("building sbx: %v: %s", err, out)
	}
	policy := filepath.Join(dir, "policy.json")
	data, _ := json.Marshal(egress.Policy{Default: "deny", Allow: []string{"127.0.0.1:" + upPort}, BlockCIDRs: []string{"10.0.0.0/8"}})
	os.WriteFile(policy, data, 0o644)
	sbxPort, err := freePort()
	if err != nil {
		return err
	}
	proxy := exec.CommandContext(ctx, sbx, "__egress-proxy", "--policy", policy, "--listen", "127.0.0.1:"+sbxPort, "--log", os.DevNull)
	proxy.Env = append(os.Environ(), "GOMAXPROCS=1") // as the docker driver runs it
	if err := proxy.Start(); err != nil {
		return fmt.Errorf("sbx __egress-proxy: %v", err)
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
	for _, c := range []struct{ name, proxy string }{
		{"direct", ""},
		{"sbx egress proxy", "127.0.0.1:" + sbxPort},
		{"tinyproxy " + tinyVersion(), "127.0.0.1:" + tinyPort},
	} {
		client := newClient(c.proxy)
		start := time.Now()
		resp, err := client.Get("http://127.0.0.1:" + upPort + "/big")
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
			resp, err := client.Get("http://127.0.0.1:" + upPort + "/small")
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
