package egress

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"
)

// sseGap is how often the benchmark's upstream sends an event: a model
// gateway streaming tokens sends one every few to few tens of
// milliseconds, each its own small write.
const sseGap = time.Millisecond

// sseEvent is the benchmark's event, an OpenAI-style completion chunk of
// 203 bytes, with the upstream's send time (ns since the benchmark's
// start) in its 20 digits at sentAt.
const (
	ssePrefix = `data: {"id":"chatcmpl-bench","object":"chat.completion.chunk","created":1700000000,"model":"bench","choices":[{"index":0,"delta":{"content":" token"},"finish_reason":null}],"sent":`
	sseEvent  = ssePrefix + "%020d}\n\n"
	sentAt    = len(ssePrefix)
)

// BenchmarkSSELatency is how long a streamed event takes from the
// upstream's write to the client's read: straight to the upstream
// (direct, the baseline) and through every path to the proxy
// (streamPaths: the proxy on TCP, the sandbox's real Bridge, BridgeFile), as chunked server-sent events, as a body that ends with
// the connection, and in a CONNECT tunnel. The upstream sends an event
// every sseGap, whatever the client does, as a model gateway does; the
// client, paths and upstream run in this process. It reports the
// latency's mean (ns/event), median, 99th percentile and maximum, and
// the first event's, which a proxy holding what it has until a buffer
// fills delays most.
func BenchmarkSSELatency(b *testing.B) {
	// A body of fixed length goes through the proxy as one ended by the
	// connection does.
	var shapes []streamShape
	for _, s := range streamShapes {
		if s.name != "fixed-length" {
			shapes = append(shapes, s)
		}
	}
	start := time.Now()
	b.Run("direct", func(b *testing.B) {
		for _, shape := range shapes {
			b.Run(shape.name, func(b *testing.B) {
				port := sseUpstream(b, shape, start)
				sseMeasure(b, start, "127.0.0.1:"+port, shape, "")
			})
		}
	})
	for _, via := range streamPaths() {
		b.Run(via.name, func(b *testing.B) {
			addr := sseProxy(b, via)
			for _, shape := range shapes {
				b.Run(shape.name, func(b *testing.B) {
					port := sseUpstream(b, shape, start)
					sseMeasure(b, start, addr, shape, "stream.test:"+port)
				})
			}
		})
	}
}

// sseProxy serves a proxy that allows stream.test (at a stand-in public
// address, dialled on loopback) by way of via, until the benchmark ends,
// and returns the address its clients connect to.
func sseProxy(b *testing.B, via path) string {
	policy := filepath.Join(b.TempDir(), "policy.json")
	data, _ := json.Marshal(testPolicy("stream.test"))
	if err := os.WriteFile(policy, data, 0o644); err != nil {
		b.Fatal(err)
	}
	var d net.Dialer
	p, err := New(Options{PolicyPath: policy, Resolver: fakeDNS{"stream.test": {pub4}}, LocalAddrs: testLocal,
		Dial: func(ctx context.Context, network, addr string) (net.Conn, error) {
			_, port, _ := net.SplitHostPort(addr)
			return d.DialContext(ctx, network, "127.0.0.1:"+port)
		}})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	addr, done := via.serve(b, ctx, p)
	b.Cleanup(func() { cancel(); <-done })
	return addr
}

// sseUpstream serves one endless event stream framed as shape: an event
// every sseGap until a write fails or the benchmark ends.
func sseUpstream(b *testing.B, shape streamShape, start time.Time) string {
	return streamUpstream(b, shape, func(c net.Conn) {
		if _, err := io.WriteString(c, shape.head(1<<62)); err != nil {
			return
		}
		tick := time.NewTicker(sseGap)
		defer tick.Stop()
		for {
			select {
			case <-tick.C:
			case <-b.Context().Done():
				return
			}
			ev := shape.frame(fmt.Sprintf(sseEvent, time.Since(start).Nanoseconds()))
			if _, err := io.WriteString(c, ev); err != nil {
				return
			}
		}
	})
}

// sseMeasure reads the stream of the upstream at target through the
// proxy at addr, or of the upstream at addr itself if target is "", one
// event per iteration, and reports the latencies.
func sseMeasure(b *testing.B, start time.Time, addr string, shape streamShape, target string) {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	br := bufio.NewReader(c)
	var body io.Reader = br
	switch {
	case shape.connect && target == "":
	case shape.connect:
		io.WriteString(c, connectReq(target))
		if line, err := br.ReadString('\n'); err != nil || line != "HTTP/1.1 200 Connection established\r\n" {
			b.Fatalf("CONNECT answered %q, %v", line, err)
		}
		if line, err := br.ReadString('\n'); err != nil || line != "\r\n" {
			b.Fatalf("CONNECT's head went on with %q, %v", line, err)
		}
	default:
		uri := "/v1/chat/completions"
		if target != "" {
			uri = "http://" + target + uri
		}
		io.WriteString(c, getReq(uri, target))
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			b.Fatal(err)
		}
		body = resp.Body
	}
	event := make([]byte, len(fmt.Sprintf(sseEvent, 0)))
	var lat []time.Duration
	for b.Loop() {
		if _, err := io.ReadFull(body, event); err != nil {
			b.Fatal(err)
		}
		now := time.Since(start)
		sent, err := strconv.ParseInt(string(event[sentAt:sentAt+20]), 10, 64)
		if err != nil {
			b.Fatalf("event %q: %v", event, err)
		}
		lat = append(lat, now-time.Duration(sent))
	}
	reportLatency(b, lat)
}

// reportLatency reports the latencies' mean, median, 99th percentile,
// maximum and first, in place of ns/op (which is sseGap).
func reportLatency(b *testing.B, lat []time.Duration) {
	if len(lat) == 0 {
		return
	}
	first := lat[0]
	var sum time.Duration
	for _, d := range lat {
		sum += d
	}
	slices.Sort(lat)
	at := func(q float64) float64 { return float64(lat[min(len(lat)-1, int(q*float64(len(lat))))].Nanoseconds()) }
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(float64(sum.Nanoseconds())/float64(len(lat)), "ns/event")
	b.ReportMetric(at(0.50), "p50-ns")
	b.ReportMetric(at(0.99), "p99-ns")
	b.ReportMetric(float64(lat[len(lat)-1].Nanoseconds()), "max-ns")
	b.ReportMetric(float64(first.Nanoseconds()), "first-ns")
}
