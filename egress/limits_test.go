package egress

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"runtime"
	"strings"
	"testing"
	"testing/iotest"
	"time"
)

// TestHeadReader feeds heads through the counter whole and one byte at a
// time: the bound crossed, if any, is the same either way.
func TestHeadReader(t *testing.T) {
	lim := headLimits{line: 16, size: 32, fields: 3}
	tests := []struct {
		name, in string
		want     error
	}{
		{"small", "GET http://a/ HTTP/1.1\r\n", errStartLineTooLong},
		{"line at the bound", "GET http://a/ H\r\nA: b\r\n\r\n", nil},
		{"line at the bound, LF only", "GET http://a/ HT\nA: b\n\n", nil},
		{"line over the bound", "GET http://a/ HTT\r\n\r\n", errStartLineTooLong},
		{"line never ends", "GET " + strings.Repeat("x", 100), errStartLineTooLong},
		{"three fields", "GET / HTTP/1.1\r\nA: 1\r\nB: 2\r\nC: 3\r\n\r\n", nil},
		{"four fields", "GET / HTTP/1.1\r\nA: 1\r\nB: 2\r\nC: 3\r\nD: 4\r\n\r\n", errTooManyFields},
		{"fields at the size bound", "GET / HTTP/1.1\r\nA: " + strings.Repeat("x", 26) + "\r\n\r\n", nil},
		{"fields over the size bound", "GET / HTTP/1.1\r\nA: " + strings.Repeat("x", 27) + "\r\n\r\n", errHeaderTooBig},
		{"field never ends", "GET / HTTP/1.1\r\nA: " + strings.Repeat("x", 100), errHeaderTooBig},
		{"body after the head is not counted", "GET / HTTP/1.1\r\nA: 1\r\n\r\n" + strings.Repeat("x\n", 100), nil},
		{"a bare CR line is not the end", "GET / HTTP/1.1\r\nA: 1\r\n\r \r\nB: 2\r\nC: 3\r\n\r\n", errTooManyFields},
	}
	for _, tt := range tests {
		for _, chunking := range []string{"whole", "bytes"} {
			var r io.Reader = strings.NewReader(tt.in)
			if chunking == "bytes" {
				r = iotest.OneByteReader(r)
			}
			h := &headReader{r: r, lim: lim}
			_, err := io.Copy(io.Discard, h)
			if err != tt.want {
				t.Errorf("%s (%s): %v, want %v", tt.name, chunking, err, tt.want)
			}
		}
	}
}

// heapDuring returns the bytes allocated by the whole process while f
// runs.
func heapDuring(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// flood sends head and then repeats chunk until the proxy stops
// reading, while reading the proxy's answer; it returns the answer's
// status line and how many bytes went out.
func (h *harness) flood(head string, chunk []byte, limit int64) (string, int64) {
	c, err := net.Dial("tcp", h.addr)
	if err != nil {
		h.t.Fatal(err)
	}
	defer c.Close()
	sent := make(chan int64, 1)
	go func() {
		n, _ := io.WriteString(c, head)
		total := int64(n)
		for total < limit {
			n, err := c.Write(chunk)
			total += int64(n)
			if err != nil {
				break
			}
		}
		sent <- total
	}()
	line, _ := bufio.NewReader(c).ReadString('\n')
	c.Close()
	return strings.TrimSpace(line), <-sent
}

// TestHugeHeadBounded: a client sending a 400 MB header line, or a
// header of endless small fields, is refused while it sends, and the
// proxy allocates a bounded amount whatever the client sends.
func TestHugeHeadBounded(t *testing.T) {
	eachPath(t, func(t *testing.T, newHarness harnessFunc) {
		h := newHarness(t, Policy{Default: "allow"}, fakeDNS{"a.test": {pub4}})
		h.setUpstream(hostUpstream(t))
		const size = 400 << 20
		const bound = 4 << 20
		for _, tt := range []struct {
			name, head, chunk, status string
		}{
			{"one huge field", "GET http://a.test/ HTTP/1.1\r\nX-Big: ", "a", "HTTP/1.1 431 Request Header Fields Too Large"},
			{"endless fields", "GET http://a.test/ HTTP/1.1\r\n", "A: b\r\n", "HTTP/1.1 431 Request Header Fields Too Large"},
			{"huge request line", "GET http://a.test/", "a", "HTTP/1.1 414 Request URI Too Long"},
			{"huge CONNECT host", "CONNECT ", "a", "HTTP/1.1 414 Request URI Too Long"},
		} {
			chunk := bytes.Repeat([]byte(tt.chunk), (64<<10)/len(tt.chunk))
			h.reset()
			var status string
			var sent int64
			alloc := heapDuring(func() { status, sent = h.flood(tt.head, chunk, size) })
			if status != tt.status {
				t.Errorf("%s: answered %q, want %q", tt.name, status, tt.status)
			}
			if sent >= size {
				t.Errorf("%s: the proxy read all %d bytes", tt.name, sent)
			}
			if alloc > bound {
				t.Errorf("%s: %d bytes allocated while the client sent %d, want at most %d", tt.name, alloc, sent, bound)
			}
			t.Logf("%s: client sent %d bytes, process allocated %d", tt.name, sent, alloc)
		}
	})
}

// TestLongHostLogShort: a 5 MB host name, wherever the client puts it,
// is refused, and the log line that says so stays short.
func TestLongHostLogShort(t *testing.T) {
	eachPath(t, func(t *testing.T, newHarness harnessFunc) {
		h := newHarness(t, Policy{Default: "allow"}, fakeDNS{})
		big := strings.Repeat("a", 5<<20)
		long := strings.Repeat("a.", 3000) + "test" // fits the request line, not a name
		for _, tt := range []struct {
			name, req string
			status    int
		}{
			{"CONNECT", connectReq(big + ":443"), 414},
			{"absolute URI", getReq("http://"+big+"/", "x"), 414},
			{"Host header", getReq("http://a.test/", big), 431},
			{"long invalid name", connectReq(long + ":443"), 400},
			{"long invalid name in URI", getReq("http://"+long+":8080/", "x"), 400},
		} {
			h.reset()
			code, _ := h.send(tt.req)
			if code != tt.status {
				t.Errorf("%s: %d, want %d", tt.name, code, tt.status)
			}
			logged := h.log.String()
			if logged == "" {
				t.Errorf("%s: nothing logged", tt.name)
			}
			for _, line := range strings.Split(strings.TrimSpace(logged), "\n") {
				if len(line) > 2*maxLogString+512 {
					t.Errorf("%s: a log line of %d bytes", tt.name, len(line))
				}
			}
		}
	})
}

// TestResponseHeadBounded: an upstream answering with an endless head
// gets the client a 502, and the proxy stops reading it.
func TestResponseHeadBounded(t *testing.T) {
	eachPath(t, func(t *testing.T, newHarness harnessFunc) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		wrote := make(chan int64, 1)
		go func() {
			c, err := ln.Accept()
			if err != nil {
				wrote <- 0
				return
			}
			defer c.Close()
			go io.Copy(io.Discard, c)
			n, _ := io.WriteString(c, "HTTP/1.1 200 OK\r\nX-Big: ")
			total := int64(n)
			chunk := bytes.Repeat([]byte("a"), 64<<10)
			for total < 400<<20 {
				n, err := c.Write(chunk)
				total += int64(n)
				if err != nil {
					break
				}
			}
			wrote <- total
		}()
		h := newHarness(t, Policy{Default: "allow"}, fakeDNS{"up.test": {pub4}})
		h.setUpstream(ln.Addr().String())
		var code int
		var body string
		alloc := heapDuring(func() { code, body = h.send(getReq("http://up.test/", "up.test")) })
		if code != 502 || !strings.Contains(body, "upstream response head too large") {
			t.Errorf("answered %d %q, want 502", code, body)
		}
		if n := <-wrote; n >= 400<<20 {
			t.Errorf("the proxy read all %d bytes of the upstream's head", n)
		}
		if alloc > 4<<20 {
			t.Errorf("%d bytes allocated", alloc)
		}
	})
}

// TestConnLimit: beyond MaxConns a connection is answered 503 at once,
// and logged; a slot freed serves again.
func TestConnLimit(t *testing.T) {
	eachPath(t, func(t *testing.T, newHarness harnessFunc) {
		h := newHarness(t, Policy{Default: "allow"}, fakeDNS{"a.test": {pub4}}, func(o *Options) { o.MaxConns = 2 })
		h.setUpstream(hostUpstream(t))
		var tunnels []net.Conn
		for i := 0; i < 2; i++ {
			status, c := h.connect("a.test:443")
			if status != "HTTP/1.1 200 Connection established" {
				t.Fatalf("tunnel %d: %q", i, status)
			}
			tunnels = append(tunnels, c)
		}
		h.reset()
		code, body := h.send(connectReq("a.test:443"))
		if code != 503 || !strings.Contains(body, "over 2 connections at once") {
			t.Errorf("third connection: %d %q, want 503", code, body)
		}
		if e := h.log.entries(t); len(e) != 1 || e[0].Status != 503 {
			t.Errorf("logged %+v", e)
		}
		if dialed, _ := h.seen(); len(dialed) != 0 {
			t.Errorf("dialled %v for a refused connection", dialed)
		}
		for _, c := range tunnels {
			c.Close()
		}
		// The tunnels' handlers end once the upstream sees them close; there
		// is nothing to wait on but a new connection getting through.
		for i := 0; ; i++ {
			code, _ := h.send(connectReq("a.test:443"))
			if code == 200 {
				break
			}
			if code != 503 || i == 1000 {
				t.Fatalf("after the tunnels closed: %d (attempt %d)", code, i)
			}
		}
	})
}

func TestHeadStatus(t *testing.T) {
	for _, tt := range []struct {
		err  error
		code int
		msg  string
	}{
		{errStartLineTooLong, 414, fmt.Sprintf("request line over %d bytes", maxRequestLine)},
		{errHeaderTooBig, 431, fmt.Sprintf("request header fields over %d bytes", maxHeaderBytes)},
		{errTooManyFields, 431, fmt.Sprintf("more than %d request header fields", maxRequestFields)},
		{io.EOF, 0, ""},
	} {
		if code, msg := headStatus(tt.err); code != tt.code || msg != tt.msg {
			t.Errorf("headStatus(%v) = %d %q", tt.err, code, msg)
		}
	}
}

// TestSlowHead: a client that never finishes its request head is
// answered 408 once HeaderTimeout passes, and the refusal is logged.
func TestSlowHead(t *testing.T) {
	eachPath(t, func(t *testing.T, newHarness harnessFunc) {
		h := newHarness(t, Policy{Default: "allow"}, fakeDNS{}, func(o *Options) { o.HeaderTimeout = 50 * time.Millisecond })
		c, err := net.Dial("tcp", h.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		io.WriteString(c, "CONNECT a.test:443 HTTP/1.1\r\nHost: a.te")
		line, _ := bufio.NewReader(c).ReadString('\n')
		if !strings.HasPrefix(line, "HTTP/1.1 408") {
			t.Errorf("answered %q, want 408", line)
		}
		if e := h.log.entries(t); len(e) != 1 || e[0].Status != 408 || e[0].Reason != "no whole request head within 50ms" {
			t.Errorf("logged %+v", e)
		}
	})
}
