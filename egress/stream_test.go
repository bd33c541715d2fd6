package egress

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// streamGuard bounds how long a streaming test waits for what the proxy
// would otherwise hold back forever (the upstream sends the rest only
// once the client has read the start). It only turns that hang into a
// failure: no outcome depends on it.
const streamGuard = 10 * time.Second

// The events of a streamed answer (server-sent events, as a model
// gateway streams tokens): the upstream sends the first at once and the
// second only once the client has read the first.
const (
	firstEvent  = "event: token\ndata: {\"delta\":\"Hel\"}\n\n"
	secondEvent = "event: token\ndata: {\"delta\":\"lo\"}\n\ndata: [DONE]\n\n"
)

// streamShape is a way an upstream frames a streamed answer.
type streamShape struct {
	name    string
	connect bool // through a CONNECT tunnel: no HTTP framing at all
	// head is what the upstream sends before its first event, given the
	// body's length.
	head  func(length int) string
	frame func(event string) string // an event as it goes on the wire
	tail  string                    // what ends the answer (then the upstream closes)
}

func chunk(event string) string { return fmt.Sprintf("%x\r\n%s\r\n", len(event), event) }
func asIs(event string) string  { return event }

// streamShapes: chunked (what SSE servers send over HTTP/1.1), no length
// with the end of the connection ending the body, a fixed length, and a
// CONNECT tunnel (HTTPS to the same gateway).
var streamShapes = []streamShape{
	{name: "chunked", frame: chunk, tail: "0\r\n\r\n", head: func(int) string {
		return "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\nTransfer-Encoding: chunked\r\n\r\n"
	}},
	{name: "until-close", frame: asIs, head: func(int) string {
		return "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n"
	}},
	{name: "fixed-length", frame: asIs, head: func(n int) string {
		return "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: " + strconv.Itoa(n) + "\r\n\r\n"
	}},
	{name: "connect", connect: true, frame: asIs, head: func(int) string { return "" }},
}

// streamPaths are the ways a client reaches the proxy that the streaming
// tests take: eachPath's, and BridgeFile (the kubernetes driver's, over
// TCP).
func streamPaths() []path {
	return []path{overTCP, bridged, fileBridged}
}

// bridged serves the proxy on a Unix socket behind Bridge, as the
// sandbox runs it.
var bridged = path{"bridge", func(t testing.TB, ctx context.Context, p *Proxy) (string, <-chan struct{}) {
	sock := filepath.Join(t.TempDir(), "egress.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	bln, err := ListenBridge(ctx, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	proxyDone := make(chan struct{})
	go func() { p.Serve(ctx, ln); close(proxyDone) }()
	go func() { Bridge(ctx, bln, sock); <-proxyDone; close(done) }()
	return bln.Addr().String(), done
}}

// fileBridged serves the proxy on loopback TCP behind BridgeFile, whose
// file names the proxy's address.
var fileBridged = path{"bridge-file", func(t testing.TB, ctx context.Context, p *Proxy) (string, <-chan struct{}) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "proxy-addr")
	if err := os.WriteFile(file, []byte(ln.Addr().String()+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	bln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	proxyDone := make(chan struct{})
	go func() { p.Serve(ctx, ln); close(proxyDone) }()
	go func() { BridgeFile(ctx, bln, file); <-proxyDone; close(done) }()
	return bln.Addr().String(), done
}}

// streamUpstream serves one connection on loopback: it reads a request
// head (not in a tunnel), then script writes the answer. The connection
// is closed when script returns or the test ends. It returns its port.
func streamUpstream(t testing.TB, shape streamShape, script func(c net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		defer ln.Close()
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		stop := context.AfterFunc(t.Context(), func() { c.Close() })
		defer stop()
		if !shape.connect {
			br := bufio.NewReader(c)
			for {
				line, err := br.ReadString('\n')
				if err != nil {
					return
				}
				if line == "\r\n" {
					break
				}
			}
		}
		script(c)
	}()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	return port
}

// inTurn writes parts to c one after another, each after the first only
// once the client has acknowledged the one before (a receive from acks).
func inTurn(ctx context.Context, c net.Conn, acks <-chan struct{}, parts ...string) bool {
	for i, part := range parts {
		if i > 0 {
			select {
			case <-acks:
			case <-ctx.Done():
				return false
			}
		}
		if _, err := io.WriteString(c, part); err != nil {
			return false
		}
	}
	return true
}

// openStream asks the harness's proxy for the upstream's answer on port,
// as a GET of an absolute URI or through a CONNECT tunnel, and returns
// once it has the answer's head (the tunnel's, for CONNECT) the body's
// reader and the connection to close. Its reads fail after streamGuard.
func openStream(t *testing.T, h *harness, shape streamShape, port string) (io.Reader, net.Conn) {
	t.Helper()
	target := "stream.test:" + port
	if shape.connect {
		status, c := h.connect(target)
		c.SetDeadline(time.Now().Add(streamGuard))
		if status != "HTTP/1.1 200 Connection established" {
			c.Close()
			t.Fatalf("CONNECT answered %q", status)
		}
		return c, c
	}
	c, err := net.Dial("tcp", h.addr)
	if err != nil {
		t.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(streamGuard))
	io.WriteString(c, getReq("http://"+target+"/v1/chat/completions", target))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		c.Close()
		t.Fatalf("the answer's head did not arrive while the upstream held its body: %v", err)
	}
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		c.Close()
		t.Fatalf("answer %d with %v, want 200 text/event-stream", resp.StatusCode, resp.Header)
	}
	return resp.Body, c
}

// TestStreamedAnswers: an answer reaches the client as the upstream
// sends it, framed every way, through every path to the proxy. The
// upstream sends the answer's head, then its first event, then the rest,
// each only once the client has read what came before, so a proxy (or
// bridge) that holds back what it has until more comes (a buffer
// filling, the body's end) never delivers it.
func TestStreamedAnswers(t *testing.T) {
	for _, via := range streamPaths() {
		t.Run(via.name, func(t *testing.T) {
			for _, shape := range streamShapes {
				t.Run(shape.name, func(t *testing.T) {
					h := newHarnessVia(t, via, testPolicy("stream.test"), fakeDNS{"stream.test": {pub4}})
					acks := make(chan struct{}, 2)
					port := streamUpstream(t, shape, func(c net.Conn) {
						inTurn(t.Context(), c, acks,
							shape.head(len(firstEvent)+len(secondEvent)),
							shape.frame(firstEvent),
							shape.frame(secondEvent)+shape.tail)
					})
					body, c := openStream(t, h, shape, port)
					defer c.Close()
					acks <- struct{}{}
					got := make([]byte, len(firstEvent))
					if _, err := io.ReadFull(body, got); err != nil {
						t.Fatalf("the first event did not arrive while the upstream held the rest: %v", err)
					}
					acks <- struct{}{}
					rest, err := io.ReadAll(body)
					if err != nil {
						t.Fatalf("reading the rest: %v", err)
					}
					if diff := cmp.Diff(firstEvent+secondEvent, string(got)+string(rest)); diff != "" {
						t.Errorf("streamed body (-want +got):\n%s", diff)
					}
				})
			}
		})
	}
}

// TestStreamAgentHangsUp plays an agent that asks for an answer that
// never ends (an event stream, or a body announced far longer than it
// will ever be), reads its first event and hangs up: the proxy must hang
// up on the upstream, not go on reading it for no one, holding the
// connection (and one of its MaxConns) for as long as the upstream
// streams.
func TestStreamAgentHangsUp(t *testing.T) {
	for _, via := range streamPaths() {
		t.Run(via.name, func(t *testing.T) {
			for _, shape := range streamShapes {
				t.Run(shape.name, func(t *testing.T) {
					h := newHarnessVia(t, via, testPolicy("stream.test"), fakeDNS{"stream.test": {pub4}})
					acks := make(chan struct{}, 2)
					released := make(chan struct{})
					port := streamUpstream(t, shape, func(c net.Conn) {
						defer close(released)
						// Announced as far longer than it will ever be.
						if !inTurn(t.Context(), c, acks, shape.head(1<<62)+shape.frame(firstEvent), "") {
							return
						}
						// Events until a write fails: the proxy closed
						// its end.
						ev := shape.frame(strings.Repeat("x", 200))
						for {
							if _, err := io.WriteString(c, ev); err != nil {
								return
							}
						}
					})
					body, c := openStream(t, h, shape, port)
					got := make([]byte, len(firstEvent))
					if _, err := io.ReadFull(body, got); err != nil {
						c.Close()
						t.Fatalf("reading the first event: %v", err)
					}
					c.Close()
					acks <- struct{}{}
					select {
					case <-released:
					case <-time.After(streamGuard):
						t.Errorf("the upstream still streams %v after the agent hung up", streamGuard)
					}
				})
			}
		})
	}
}
