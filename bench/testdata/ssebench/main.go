// Command ssebench measures how long a server-sent event takes from an
// upstream's write to a client's read, across processes and containers:
// bench/sse.sh runs its server in a container of its own and its client
// straight to that container (the baseline) and inside sandboxes made by
// sbx's docker driver, through the sandbox's egress path.
//
//	ssebench serve [-listen :8080]
//	ssebench read -target HOST:PORT [-proxy HOST:PORT] [-shape chunked|close|connect] [-n 1000] [-gap 1ms] [-probes 200]
//
// The server answers any GET with an endless event stream (one event
// every gap, each an OpenAI-style completion chunk carrying its send
// time, CLOCK_REALTIME, which runc containers share with the host),
// chunked or (close) with no length, the end of the connection ending
// it; it stops when the client goes. The client asks for n events (through the proxy
// if given: an absolute-URI GET, or for connect a CONNECT tunnel with
// the GET inside, as HTTPS would carry it), reads them and prints one
// line of latencies: mean, p50, p99, max and the first event's, in
// microseconds, on the server's clock: first it estimates how far that
// is ahead of its own through the same path (offset), and prints the
// estimate and its bound.
package main

import (
	"bufio"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"time"
)

// event is the stream's event, 203 bytes, its send time (Unix ns) in the
// 20 digits at sentAt.
const (
	prefix = `data: {"id":"chatcmpl-bench","object":"chat.completion.chunk","created":1700000000,"model":"bench","choices":[{"index":0,"delta":{"content":" token"},"finish_reason":null}],"sent":`
	event  = prefix + "%020d}\n\n"
	sentAt = len(prefix)
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: ssebench serve|read [flags]")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "serve":
		err = serve(os.Args[2:])
	case "read":
		err = read(os.Args[2:])
	default:
		err = fmt.Errorf("unknown mode %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "ssebench:", err)
		os.Exit(1)
	}
}

func serve(args []string) error {
	fs := flag.NewFlagSet("serve", flag.ExitOnError)
	listen := fs.String("listen", ":8080", "address to listen on")
	fs.Parse(args)
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	for {
		c, err := ln.Accept()
		if err != nil {
			return err
		}
		go stream(c)
	}
}

// stream answers one request on c with events until a write fails.
func stream(c net.Conn) {
	defer c.Close()
	req, err := http.ReadRequest(bufio.NewReader(c))
	if err != nil {
		return
	}
	if req.URL.Path == "/clock" {
		clock(c)
		return
	}
	q := req.URL.Query()
	gap, err := time.ParseDuration(q.Get("gap"))
	if err != nil || gap <= 0 {
		gap = time.Millisecond
	}
	chunked := q.Get("shape") != "close"
	head := "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
	if chunked {
		head += "Transfer-Encoding: chunked\r\n\r\n"
	} else {
		head += "Connection: close\r\n\r\n"
	}
	if _, err := io.WriteString(c, head); err != nil {
		return
	}
	tick := time.NewTicker(gap)
	defer tick.Stop()
	for range tick.C {
		ev := fmt.Sprintf(event, time.Now().UnixNano())
		if chunked {
			ev = fmt.Sprintf("%x\r\n%s\r\n", len(ev), ev)
		}
		if _, err := io.WriteString(c, ev); err != nil {
			return
		}
	}
}

// clock answers each 8 bytes the client sends with its own time (Unix
// ns, 8 bytes big-endian), after an answer's head.
func clock(c net.Conn) {
	if _, err := io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\n\r\n"); err != nil {
		return
	}
	b := make([]byte, 8)
	for {
		if _, err := io.ReadFull(c, b); err != nil {
			return
		}
		binary.BigEndian.PutUint64(b, uint64(time.Now().UnixNano()))
		if _, err := c.Write(b); err != nil {
			return
		}
	}
}

// offset estimates how far the server's clock is ahead of this one (a
// gVisor sandbox keeps its own): through a tunnel (CONNECT through the
// proxy, or straight), probes times it asks the server's time; the
// exchange that took least, rtt, bounds the estimate's error to rtt/2
// (NTP's reasoning, RFC 5905 §8).
func offset(target, proxy string, probes int) (off, rtt time.Duration, err error) {
	addr := target
	if proxy != "" {
		addr = proxy
	}
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return 0, 0, err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(time.Minute))
	br := bufio.NewReader(c)
	if proxy != "" {
		fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target)
		if resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect}); err != nil || resp.StatusCode != http.StatusOK {
			return 0, 0, fmt.Errorf("CONNECT for the clock: %v %v", resp, err)
		}
	}
	fmt.Fprintf(c, "GET /clock HTTP/1.1\r\nHost: %s\r\n\r\n", target)
	if _, err := http.ReadResponse(br, nil); err != nil {
		return 0, 0, err
	}
	b := make([]byte, 8)
	rtt = time.Hour
	for range probes {
		t0 := time.Now()
		if _, err := c.Write(b); err != nil {
			return 0, 0, err
		}
		if _, err := io.ReadFull(br, b); err != nil {
			return 0, 0, err
		}
		t2 := time.Now()
		if d := t2.Sub(t0); d < rtt {
			mid := t0.UnixNano() + d.Nanoseconds()/2
			rtt, off = d, time.Duration(int64(binary.BigEndian.Uint64(b))-mid)
		}
	}
	return off, rtt, nil
}

func read(args []string) error {
	fs := flag.NewFlagSet("read", flag.ExitOnError)
	target := fs.String("target", "", "the server's HOST:PORT")
	proxy := fs.String("proxy", "", "an HTTP proxy's HOST:PORT (none: straight to the server)")
	shape := fs.String("shape", "chunked", "chunked, close, or connect (chunked, in a CONNECT tunnel)")
	n := fs.Int("n", 1000, "events to read")
	gap := fs.Duration("gap", time.Millisecond, "the server's time between events")
	probes := fs.Int("probes", 200, "clock probes before the events (see offset)")
	fs.Parse(args)
	if *target == "" || *n < 1 || *probes < 1 {
		return errors.New("read needs -target, and -n and -probes of at least 1")
	}
	off, rtt, err := offset(*target, *proxy, *probes)
	if err != nil {
		return err
	}
	addr := *target
	if *proxy != "" {
		addr = *proxy
	}
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(time.Duration(*n)*(*gap) + time.Minute))
	br := bufio.NewReader(c)
	uri := "/events?" + url.Values{"shape": {*shape}, "gap": {gap.String()}}.Encode()
	switch {
	case *shape == "connect" && *proxy != "":
		fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", *target, *target)
		resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
		if err != nil {
			return err
		}
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("CONNECT answered %s", resp.Status)
		}
	case *proxy != "":
		uri = "http://" + *target + uri
	}
	fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: %s\r\n\r\n", uri, *target)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("answered %s", resp.Status)
	}
	buf := make([]byte, len(fmt.Sprintf(event, 0)))
	lat := make([]time.Duration, 0, *n)
	for range *n {
		if _, err := io.ReadFull(resp.Body, buf); err != nil {
			return fmt.Errorf("after %d events: %v", len(lat), err)
		}
		// This clock's time, on the server's clock.
		now := time.Now().UnixNano() + off.Nanoseconds()
		sent, err := strconv.ParseInt(string(buf[sentAt:sentAt+20]), 10, 64)
		if err != nil {
			return fmt.Errorf("event %q: %v", buf, err)
		}
		lat = append(lat, time.Duration(now-sent))
	}
	fmt.Printf("%s offset_us=%.0f rtt_us=%.0f\n", summary(lat), float64(off)/1e3, float64(rtt)/1e3)
	return nil
}

// summary is the latencies' mean, median, 99th percentile, maximum and
// first, in microseconds.
func summary(lat []time.Duration) string {
	first := lat[0]
	var sum time.Duration
	for _, d := range lat {
		sum += d
	}
	slices.Sort(lat)
	us := func(d time.Duration) string { return strconv.FormatFloat(float64(d)/1e3, 'f', 0, 64) }
	at := func(q float64) time.Duration { return lat[min(len(lat)-1, int(q*float64(len(lat))))] }
	return fmt.Sprintf("events=%d mean_us=%s p50_us=%s p99_us=%s max_us=%s first_us=%s",
		len(lat), us(sum/time.Duration(len(lat))), us(at(0.5)), us(at(0.99)), us(lat[len(lat)-1]), us(first))
}
