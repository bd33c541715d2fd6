// Command egressbench compares, on loopback, a direct HTTP client with the
// same client through sbx's egress proxy and through Debian's tinyproxy
// with the same allow-list: the throughput of one 1 GiB transfer and the
// p50/p99 latency of small requests. Run: go run ./bench/testdata/egressbench
// (needs /usr/bin/tinyproxy). Loopback only; it stops by itself.
//
// sbx's proxy is measured alone (the client connects to it over TCP, and
// over the Unix socket it serves in its container) and through the
// sandbox's full path: the client connects to the sandbox's bridge
// (`sbx __sandbox-init` on 127.0.0.1), which hands its listening socket
// to the proxy over the proxy's Unix socket (the proxy then accepts and
// serves the client's TCP connections itself). Each runs as its own process, as
// in its container: the proxy with GOMAXPROCS=1 as the docker driver sets
// it, the bridge with what the sandbox gives it.
//
// sbx's proxy refuses loopback whatever its policy says, so it runs here
// as this program's proxy mode: the same egress.Proxy as `sbx
// __egress-proxy`, whose dialer takes the public address it was asked
// for to the loopback upstream. The bridge is this program's init mode,
// egress.InitMain as `sbx __sandbox-init` runs it.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
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
// proxyMode POLICY LISTEN UPSTREAM (LISTEN is host:port or unix:PATH).
// initMode makes it the sandbox's init and bridge: initMode ARGS... as
// `sbx __sandbox-init ARGS...`.
const (
	proxyMode = "__proxy"
	initMode  = "__init"
)

func main() {
	if len(os.Args) == 5 && os.Args[1] == proxyMode {
		if err := serveProxy(os.Args[2], os.Args[3], os.Args[4]); err != nil {
			fmt.Fprintln(os.Stderr, "egressbench proxy:", err)
			os.Exit(1)
		}
		return
	}
	if len(os.Args) > 1 && os.Args[1] == initMode {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		os.Exit(egress.InitMain(ctx, os.Args[2:], os.Stderr))
	}
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "egressbench:", err)
		os.Exit(1)
	}
}

func run() error {
	rounds := flag.Int("rounds", 3, "rounds of measures; each path's median is shown")
	flag.Parse()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dir, err := os.MkdirTemp("", "egressbench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	var stops []func()

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
	start := func(args ...string) error {
		cmd := exec.CommandContext(ctx, self, args...)
		cmd.Env = append(os.Environ(), "GOMAXPROCS=1") // as the docker driver runs the proxy
		if args[0] == initMode {
			// The sandbox's init gets no GOMAXPROCS from the driver.
			cmd.Env = os.Environ()
		}
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			return fmt.Errorf("%s: %v", args[0], err)
		}
		stops = append(stops, func() { cmd.Process.Kill(); cmd.Wait() })
		return nil
	}
	defer func() {
		for _, stop := range stops {
			stop()
		}
	}()
	if err := start(proxyMode, policy, "127.0.0.1:"+sbxPort, "127.0.0.1:"+upPort); err != nil {
		return err
	}
	waitListening("tcp", "127.0.0.1:"+sbxPort)
	// The same proxy on a Unix socket, as in its container, and the
	// sandbox's bridge in front of it.
	socket := filepath.Join(dir, "egress.sock")
	if err := start(proxyMode, policy, "unix:"+socket, "127.0.0.1:"+upPort); err != nil {
		return err
	}
	waitListening("unix", socket)
	bridgePort, err := freePort()
	if err != nil {
		return err
	}
	if err := start(initMode, "--listen", "127.0.0.1:"+bridgePort, "--socket", socket); err != nil {
		return err
	}
	waitListening("tcp", "127.0.0.1:"+bridgePort)

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
	waitListening("tcp", "127.0.0.1:"+tinyPort)

	paths := []struct{ name, proxy, socket, upstream string }{
		{"direct", "", "", "127.0.0.1:" + upPort},
		{"sbx egress proxy", "127.0.0.1:" + sbxPort, "", publicAddr + ":" + upPort},
		{"sbx egress proxy, on its Unix socket", "127.0.0.1:3128", socket, publicAddr + ":" + upPort},
		{"full path: bridge, socket, proxy", "127.0.0.1:" + bridgePort, "", publicAddr + ":" + upPort},
		{"tinyproxy " + tinyVersion(), "127.0.0.1:" + tinyPort, "", "127.0.0.1:" + upPort},
	}
	// The paths take turns, round after round, so that the machine's
	// other work weighs on each alike; the table shows each path's median.
	results := make([][]result, len(paths))
	for round := 0; round < *rounds; round++ {
		for i, c := range paths {
			r, err := measure(newClient(c.proxy, c.socket), c.upstream)
			if err != nil {
				return fmt.Errorf("%s: %v", c.name, err)
			}
			results[i] = append(results[i], r)
		}
	}
	fmt.Printf("Medians of %d rounds.\n\n", *rounds)
	fmt.Printf("| path | 1 GiB transfer | throughput | small request p50 | p99 | small requests/s |\n|---|---:|---:|---:|---:|---:|\n")
	for i, c := range paths {
		m := median(results[i])
		fmt.Printf("| %s | %s | %.0f MiB/s | %s | %s | %.0f |\n", c.name, m.big.Round(time.Millisecond), m.throughput(),
			m.p50.Round(time.Microsecond), m.p99.Round(time.Microsecond), m.rate)
	}
	fmt.Printf("\nfull path / proxy alone, per round:")
	for round := range *rounds {
		full, alone := results[3][round], results[1][round]
		fmt.Printf(" throughput %.2f× small requests %.2f×;", full.throughput()/alone.throughput(), full.rate/alone.rate)
	}
	full, alone := median(results[3]), median(results[1])
	fmt.Printf("\nof the medians: throughput %.2f×, small requests %.2f×\n", full.throughput()/alone.throughput(), full.rate/alone.rate)
	return nil
}

// result is one path's measure in one round.
type result struct {
	big      time.Duration // the 1 GiB transfer
	p50, p99 time.Duration // of the small requests
	rate     float64       // small requests per second
}

func (r result) throughput() float64 { return float64(bigSize) / (1 << 20) / r.big.Seconds() }

// measure times one 1 GiB transfer, then smallReqs small requests one
// after another.
func measure(client *http.Client, upstream string) (result, error) {
	start := time.Now()
	resp, err := client.Get("http://" + upstream + "/big")
	if err != nil {
		return result{}, err
	}
	n, _ := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	r := result{big: time.Since(start)}
	if n != bigSize {
		return result{}, fmt.Errorf("got %d bytes", n)
	}
	lat := make([]time.Duration, 0, smallReqs)
	small := time.Now()
	for range smallReqs {
		s := time.Now()
		resp, err := client.Get("http://" + upstream + "/small")
		if err != nil {
			return result{}, err
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		lat = append(lat, time.Since(s))
	}
	r.rate = smallReqs / time.Since(small).Seconds()
	slices.Sort(lat)
	r.p50, r.p99 = lat[len(lat)/2], lat[len(lat)*99/100]
	return r, nil
}

// median is the median of each measure, taken separately.
func median(rs []result) result {
	pick := func(f func(result) float64) float64 {
		v := make([]float64, len(rs))
		for i, r := range rs {
			v[i] = f(r)
		}
		slices.Sort(v)
		return v[len(v)/2]
	}
	return result{
		big:  time.Duration(pick(func(r result) float64 { return float64(r.big) })),
		p50:  time.Duration(pick(func(r result) float64 { return float64(r.p50) })),
		p99:  time.Duration(pick(func(r result) float64 { return float64(r.p99) })),
		rate: pick(func(r result) float64 { return r.rate }),
	}
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
	network := "tcp"
	if path, ok := strings.CutPrefix(listen, "unix:"); ok {
		network, listen = "unix", path
	}
	ln, err := net.Listen(network, listen)
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
// address or a Unix socket.
func waitListening(network, addr string) {
	for i := 0; i < 100; i++ {
		if c, err := net.Dial(network, addr); err == nil {
			c.Close()
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// newClient makes one connection per request, as a proxied client of a
// one-request-per-connection proxy does, so the paths compare alike. With
// socket, the connection to the proxy goes to that Unix socket.
func newClient(proxy, socket string) *http.Client {
	tr := &http.Transport{DisableKeepAlives: true}
	if proxy != "" {
		u, _ := url.Parse("http://" + proxy)
		tr.Proxy = http.ProxyURL(u)
	}
	if socket != "" {
		var d net.Dialer
		tr.DialContext = func(ctx context.Context, _, _ string) (net.Conn, error) { return d.DialContext(ctx, "unix", socket) }
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
