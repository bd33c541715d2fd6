package egress

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Resolver looks up a host's addresses (net.DefaultResolver satisfies it).
type Resolver interface {
	LookupIPAddr(ctx context.Context, host string) ([]net.IPAddr, error)
}

// Options configure a Proxy.
type Options struct {
	// PolicyPath is the policy file; Reload re-reads it.
	PolicyPath string
	Resolver   Resolver
	// Dial connects to an address that passed the checks; tests replace it.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// Log receives one JSON line per decision.
	Log io.Writer
	// HeaderTimeout bounds reading a request's head, so an idle or slow
	// client cannot hold a connection forever.
	HeaderTimeout time.Duration
}

// Proxy is the filtering proxy. It is safe for concurrent use.
type Proxy struct {
	opts   Options
	policy atomic.Pointer[compiled]
	logMu  sync.Mutex

	loadMu  sync.Mutex // serialises loads; guards current
	current Policy     // the rules of policy

	// Buffers are reused across requests: a proxied request otherwise
	// allocates three, and the garbage collections they cause show in the
	// latency tail.
	readers, writers sync.Pool
}

// New loads the policy and returns a proxy.
func New(opts Options) (*Proxy, error) {
	if opts.Resolver == nil {
		opts.Resolver = net.DefaultResolver
	}
	if opts.Dial == nil {
		d := &net.Dialer{Timeout: 30 * time.Second}
		opts.Dial = d.DialContext
	}
	if opts.Log == nil {
		opts.Log = io.Discard
	}
	if opts.HeaderTimeout == 0 {
		opts.HeaderTimeout = 30 * time.Second
	}
	p := &Proxy{opts: opts}
	if err := p.Reload(); err != nil {
		return nil, err
	}
	return p, nil
}

// Reload re-reads the policy file. On error the current policy stays.
func (p *Proxy) Reload() error {
	p.loadMu.Lock()
	defer p.loadMu.Unlock()
	data, err := os.ReadFile(p.opts.PolicyPath)
	var pol *Policy
	var c *compiled
	if err == nil {
		pol, c, err = parsePolicy(p.opts.PolicyPath, data)
	}
	if err != nil {
		p.logEvent(map[string]any{"event": "reload", "error": err.Error()})
		return err
	}
	p.install(pol, c, "reload")
	return nil
}

// Set puts a new policy in force and makes it the policy file (replaced in
// one step), so that it survives a restart. A policy that does not compile
// changes nothing.
func (p *Proxy) Set(data []byte) error {
	p.loadMu.Lock()
	defer p.loadMu.Unlock()
	pol, c, err := parsePolicy("policy", data)
	if err != nil {
		return err
	}
	tmp := p.opts.PolicyPath + ".new"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	if err := os.Rename(tmp, p.opts.PolicyPath); err != nil {
		os.Remove(tmp)
		return err
	}
	p.install(pol, c, "set")
	return nil
}

// install makes a compiled policy the one in force; loadMu is held.
func (p *Proxy) install(pol *Policy, c *compiled, event string) {
	p.policy.Store(c)
	p.current = *pol
	p.logEvent(map[string]any{"event": event, "default": pol.Default, "allow": len(pol.Allow), "deny": len(pol.Deny)})
}

// Policy returns the rules in force.
func (p *Proxy) Policy() Policy {
	p.loadMu.Lock()
	defer p.loadMu.Unlock()
	return p.current
}

// Serve accepts connections until ctx ends or ln fails.
func (p *Proxy) Serve(ctx context.Context, ln net.Listener) error {
	return serveConns(ctx, ln, func(c net.Conn) { p.handle(ctx, c) })
}

// serveConns runs handle for each accepted connection until ctx ends
// (nil) or the listener fails, and waits for the handlers.
func serveConns(ctx context.Context, ln net.Listener, handle func(net.Conn)) error {
	go func() {
		<-ctx.Done()
		ln.Close()
	}()
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		conn, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			handle(conn)
		}()
	}
}

// entry is one line of the decision log.
type entry struct {
	Time     string `json:"time"`
	Method   string `json:"method"`
	Host     string `json:"host"`
	Port     int    `json:"port"`
	Decision string `json:"decision"` // allow or deny
	Reason   string `json:"reason"`
	Rule     string `json:"rule,omitempty"`
	Addr     string `json:"addr,omitempty"` // the address dialled
	Status   int    `json:"status"`
}

func (p *Proxy) log(e entry) {
	e.Time = time.Now().UTC().Format(time.RFC3339Nano)
	p.logEvent(e)
}

func (p *Proxy) logEvent(v any) {
	b, err := json.Marshal(v)
	if err != nil {
		return
	}
	p.logMu.Lock()
	defer p.logMu.Unlock()
	p.opts.Log.Write(append(b, '\n'))
}

// handle serves one connection. Every decision is logged before the
// client hears it, so whoever saw a refusal finds it in the log.
func (p *Proxy) handle(ctx context.Context, conn net.Conn) {
	defer conn.Close()
	conn.SetReadDeadline(time.Now().Add(p.opts.HeaderTimeout))
	br := p.newReader(conn)
	defer p.readers.Put(br)
	req, err := http.ReadRequest(br)
	if err != nil {
		if !errors.Is(err, io.EOF) {
			writeStatus(conn, http.StatusBadRequest, "malformed request")
		}
		return
	}
	conn.SetReadDeadline(time.Time{})
	host, port, err := target(req)
	if err != nil {
		p.log(entry{Method: req.Method, Host: req.Host, Decision: "deny", Reason: err.Error(), Status: http.StatusBadRequest})
		writeStatus(conn, http.StatusBadRequest, err.Error())
		return
	}
	e := entry{Method: req.Method, Host: host, Port: port}
	pol := p.policy.Load()
	d := pol.decide(host, port)
	e.Rule = d.Rule
	if !d.Allow {
		e.Decision, e.Reason, e.Status = "deny", "denied by policy", http.StatusForbidden
		if d.Rule == "default" {
			e.Reason = "not in the allow list (policy: deny)"
		}
		p.log(e)
		writeStatus(conn, http.StatusForbidden, fmt.Sprintf("%s is blocked by sbx egress policy (%s)", host, e.Reason))
		return
	}
	upstream, addr, reason := p.dial(ctx, pol, host, port)
	if upstream == nil {
		e.Decision, e.Reason, e.Status = "deny", reason, http.StatusForbidden
		if !strings.Contains(reason, "blocked") {
			e.Status = http.StatusBadGateway
		}
		p.log(e)
		writeStatus(conn, e.Status, fmt.Sprintf("%s: %s", host, reason))
		return
	}
	defer upstream.Close()
	e.Decision, e.Reason, e.Addr = "allow", "allowed by policy", addr
	if req.Method == http.MethodConnect {
		e.Status = http.StatusOK
		p.log(e)
		io.WriteString(conn, "HTTP/1.1 200 Connection established\r\n\r\n")
		// Bytes the client sent after the CONNECT head belong upstream.
		if n := br.Buffered(); n > 0 {
			b, _ := br.Peek(n)
			upstream.Write(b)
		}
		splice(conn, upstream)
		return
	}
	// An absolute-URI request: forward it without hop-by-hop headers, one
	// request per connection.
	req.RequestURI = ""
	removeHopHeaders(req.Header)
	req.Header.Set("Connection", "close")
	req.Close = true
	bw := p.newWriter(upstream)
	defer p.writers.Put(bw)
	if err := req.Write(bw); err == nil {
		err = bw.Flush()
	}
	if err != nil {
		e.Status = http.StatusBadGateway
		p.log(e)
		writeStatus(conn, e.Status, "upstream write failed")
		return
	}
	ur := p.newReader(upstream)
	defer p.readers.Put(ur)
	resp, err := http.ReadResponse(ur, req)
	if err != nil {
		e.Status = http.StatusBadGateway
		p.log(e)
		writeStatus(conn, e.Status, "upstream answered badly")
		return
	}
	defer resp.Body.Close()
	e.Status = resp.StatusCode
	p.log(e)
	removeHopHeaders(resp.Header)
	resp.Close = true
	// Response.Write writes the head piece by piece: buffered, it leaves
	// in one segment instead of one per header line (and a large body
	// goes straight to conn once the buffer is flushed).
	bw.Reset(conn)
	if resp.Write(bw) == nil {
		bw.Flush()
	}
}

func (p *Proxy) newReader(r io.Reader) *bufio.Reader {
	if br, ok := p.readers.Get().(*bufio.Reader); ok {
		br.Reset(r)
		return br
	}
	return bufio.NewReader(r)
}

func (p *Proxy) newWriter(w io.Writer) *bufio.Writer {
	if bw, ok := p.writers.Get().(*bufio.Writer); ok {
		bw.Reset(w)
		return bw
	}
	return bufio.NewWriter(w)
}

// target finds the host and port a request wants: the CONNECT authority,
// or the absolute URI's host (port 80 for http://). Origin-form requests
// ("GET /path") are not proxy requests.
func target(req *http.Request) (string, int, error) {
	var hostport string
	defPort := 80
	switch {
	case req.Method == http.MethodConnect:
		hostport, defPort = req.RequestURI, 443
	case req.URL != nil && req.URL.IsAbs():
		if req.URL.Scheme != "http" {
			return "", 0, fmt.Errorf("unsupported scheme %q (use CONNECT for https)", req.URL.Scheme)
		}
		hostport = req.URL.Host
	default:
		return "", 0, errors.New("not a proxy request: use CONNECT or an absolute URI")
	}
	host, portStr, err := net.SplitHostPort(hostport)
	if err != nil {
		host, portStr = strings.Trim(hostport, "[]"), strconv.Itoa(defPort)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil || port < 1 || port > 65535 || host == "" {
		return "", 0, fmt.Errorf("bad target %q", hostport)
	}
	return strings.ToLower(strings.TrimSuffix(host, ".")), port, nil
}

// dial resolves host, drops every address in a blocked range, and dials
// one of the checked addresses itself, so a DNS answer that changes
// between check and use cannot bypass the ranges.
func (p *Proxy) dial(ctx context.Context, pol *compiled, host string, port int) (net.Conn, string, string) {
	var addrs []netip.Addr
	if ip, err := netip.ParseAddr(host); err == nil {
		addrs = []netip.Addr{ip}
	} else {
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		ips, err := p.opts.Resolver.LookupIPAddr(rctx, host)
		cancel()
		if err != nil || len(ips) == 0 {
			return nil, "", "cannot resolve host"
		}
		for _, ip := range ips {
			if a, ok := netip.AddrFromSlice(ip.IP); ok {
				addrs = append(addrs, a.Unmap())
			}
		}
	}
	var allowed []netip.Addr
	for _, a := range addrs {
		if !pol.isBlocked(a) {
			allowed = append(allowed, a)
		}
	}
	if len(allowed) == 0 {
		return nil, "", "resolves to a blocked address"
	}
	var lastErr error
	for _, a := range allowed {
		addr := netip.AddrPortFrom(a, uint16(port)).String()
		c, err := p.opts.Dial(ctx, "tcp", addr)
		if err == nil {
			return c, addr, ""
		}
		lastErr = err
	}
	return nil, "", "connect failed: " + lastErr.Error()
}

var hopHeaders = []string{"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate", "Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade"}

func removeHopHeaders(h http.Header) {
	for _, f := range h.Values("Connection") {
		for _, name := range strings.Split(f, ",") {
			h.Del(strings.TrimSpace(name))
		}
	}
	for _, name := range hopHeaders {
		h.Del(name)
	}
}

func writeStatus(w io.Writer, code int, msg string) {
	body := msg + "\n"
	fmt.Fprintf(w, "HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s",
		code, http.StatusText(code), len(body), body)
}

// splice copies both ways until both sides are done, half-closing each
// direction as it ends.
func splice(a, b net.Conn) {
	var wg sync.WaitGroup
	wg.Add(2)
	cp := func(dst, src net.Conn) {
		defer wg.Done()
		io.Copy(dst, src)
		if cw, ok := dst.(interface{ CloseWrite() error }); ok {
			cw.CloseWrite()
		} else {
			dst.Close()
		}
	}
	go cp(a, b)
	go cp(b, a)
	wg.Wait()
}
