package egress

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
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
	// LocalAddrs finds the addresses of the proxy's own network namespace
	// (interfaces and gateways), which it always refuses; on Linux it
	// reads them from the kernel, elsewhere it finds none. Tests replace
	// it.
	LocalAddrs func() ([]netip.Addr, error)
	// Log receives one JSON line per decision.
	Log io.Writer
	// HeaderTimeout bounds reading a request's head, so an idle or slow
	// client cannot hold a connection forever.
	HeaderTimeout time.Duration
	// MaxConns bounds the connections served at once (default 1024). One
	// more is answered 503 and closed at once rather than left waiting:
	// a client learns why at once instead of hanging in the listen
	// backlog behind tunnels that may stay open for hours, and a refused
	// connection costs no goroutine.
	MaxConns int
	// UpstreamRoots verify the upstreams of the tunnels the proxy
	// terminates to add secrets (SetSecrets); nil is the system's roots.
	// Tests name their servers' CA.
	UpstreamRoots *x509.CertPool
	// HostRelay is the host relay's Unix socket (hostrelay.go), through
	// which the policy's HostPorts are reached; "" when there is none.
	HostRelay string
}

// ServeServiceSockets takes the parked connections of each of the policy's
// services on dir/NAME/service.sock, until ctx ends: the proxy reaches a
// service only through them (a service has no network). It returns once
// each socket listens.
func (p *Proxy) ServeServiceSockets(ctx context.Context, dir string) error {
	pol := p.Policy()
	p.servicesMu.Lock()
	defer p.servicesMu.Unlock()
	for name := range pol.Services {
		ln, err := listenOn("unix:" + ServiceSocket(dir, name))
		if err != nil {
			return err
		}
		f := NewForwarder()
		go f.ServeParked(ctx, ln)
		if p.services == nil {
			p.services = map[string]*Forwarder{}
		}
		p.services[name] = f
	}
	return nil
}

// ServiceSocket is where service name parks its connections, under dir.
func ServiceSocket(dir, name string) string { return dir + "/" + name + "/service.sock" }

// serviceConn connects to a service's port over its parked connections.
func (p *Proxy) serviceConn(ctx context.Context, name string, port int) (net.Conn, error) {
	p.servicesMu.Lock()
	f := p.services[name]
	p.servicesMu.Unlock()
	if f == nil {
		return nil, fmt.Errorf("service %s has no connection to the proxy", name)
	}
	return f.Take(ctx, port)
}

// Proxy is the filtering proxy. It is safe for concurrent use.
type Proxy struct {
	opts   Options
	policy atomic.Pointer[compiled]
	logMu  sync.Mutex

	// always are the addresses refused whatever the policy: unspecified,
	// loopback, and the proxy's own (LocalAddrs), found once at start.
	always prefixes

	loadMu  sync.Mutex // serialises loads; guards current
	current Policy     // the rules of policy

	// Buffers are reused across requests: a proxied request otherwise
	// allocates three, and the garbage collections they cause show in the
	// latency tail. (A response's body is copied through net/http's own
	// pooled buffer: see bodyWriter.)
	readers, writers sync.Pool

	// slots bounds the connections served at once (MaxConns).
	slots chan struct{}

	// secrets are what the proxy adds to requests, and the sandbox's CA
	// (SetSecrets); nil when it adds none.
	secrets atomic.Pointer[secretSet]

	// upstreamSessions are the TLS sessions of the upstreams the proxy
	// terminated tunnels to (intercept): it opens a connection per
	// request, and resuming one skips the upstream's certificate and its
	// verification, a third of what its handshake costs the proxy.
	upstreamSessions tls.ClientSessionCache

	servicesMu sync.Mutex
	// services are the parked connections of the sandbox's services, by
	// name (ServeServiceSockets).
	services map[string]*Forwarder
}

// New loads the policy, finds the proxy's own addresses and returns a
// proxy.
func New(opts Options) (*Proxy, error) {
	if opts.Resolver == nil {
		opts.Resolver = net.DefaultResolver
	}
	if opts.Dial == nil {
		d := &net.Dialer{Timeout: 30 * time.Second}
		opts.Dial = d.DialContext
	}
	if opts.LocalAddrs == nil {
		opts.LocalAddrs = localAddrs
	}
	if opts.Log == nil {
		opts.Log = io.Discard
	}
	if opts.HeaderTimeout == 0 {
		opts.HeaderTimeout = 30 * time.Second
	}
	if opts.MaxConns == 0 {
		opts.MaxConns = maxConns
	}
	p := &Proxy{opts: opts, upstreamSessions: tls.NewLRUClientSessionCache(0)}
	if opts.MaxConns > 0 {
		p.slots = make(chan struct{}, opts.MaxConns)
	}
	// "This network" (a connect to 0.0.0.0 or :: reaches the local
	// host), loopback, and the addresses of the proxy's own namespace.
	for _, s := range []string{"0.0.0.0/8", "127.0.0.0/8", "::/128", "::1/128"} {
		p.always.add(netip.MustParsePrefix(s))
	}
	local, err := opts.LocalAddrs()
	if err != nil {
		return nil, fmt.Errorf("finding the proxy's own addresses: %v", err)
	}
	for _, a := range local {
		a = canonical(a.WithZone(""))
		if !p.always.contain(a) {
			p.always.add(netip.PrefixFrom(a, a.BitLen()))
		}
	}
	if err := p.Reload(); err != nil {
		return nil, err
	}
	return p, nil
}

// AlwaysBlocked lists what the proxy refuses whatever its policy says.
func (p *Proxy) AlwaysBlocked() []string {
	var out []string
	for _, pfx := range p.always.all() {
		out = append(out, pfx.String())
	}
	return out
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
	p.logEvent(map[string]any{"event": event, "default": pol.Default, "allow": len(pol.Allow), "deny": len(pol.Deny), "hostAddrs": len(pol.HostAddrs)})
}

// Policy returns the rules in force.
func (p *Proxy) Policy() Policy {
	p.loadMu.Lock()
	defer p.loadMu.Unlock()
	return p.current
}

// Serve accepts connections, on a TCP listener or the Unix socket the
// sandbox's bridge copies connections over, until ctx ends or ln fails.
// It returns once every connection it served is closed.
func (p *Proxy) Serve(ctx context.Context, ln net.Listener) error {
	return serveConns(ctx, ln, p.slots, p.refuseConn, func(c net.Conn) {
		c.SetReadDeadline(time.Now().Add(p.opts.HeaderTimeout))
		p.handle(ctx, c, c)
	})
}

// refuseConn answers a connection over MaxConns. The answer fits in any
// socket buffer; the deadline only guards against one that does not.
func (p *Proxy) refuseConn(conn net.Conn) {
	defer conn.Close()
	reason := fmt.Sprintf("over %d connections at once", p.opts.MaxConns)
	p.log(entry{Decision: "deny", Reason: reason, Status: http.StatusServiceUnavailable})
	conn.SetWriteDeadline(time.Now().Add(time.Second))
	writeStatus(conn, http.StatusServiceUnavailable, reason)
}

// serveConns runs handle for each accepted connection until ctx ends
// (nil) or the listener fails, and waits for the handlers. With slots, a
// connection accepted while every slot is taken goes to refuse instead,
// in the accepting goroutine.
func serveConns(ctx context.Context, ln net.Listener, slots chan struct{}, refuse, handle func(net.Conn)) error {
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
		if slots != nil {
			select {
			case slots <- struct{}{}:
			default:
				refuse(conn)
				continue
			}
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if slots != nil {
				defer func() { <-slots }()
			}
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
	Decision string `json:"decision"` // allow, deny, or error (the name did not resolve, the upstream did not answer)
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

// handle serves one connection, reading its request head from head (the
// connection, or what was read of it already and then the connection)
// under the read deadline its caller set. Every decision is logged before
// the client hears it, so whoever saw a refusal finds it in the log.
func (p *Proxy) handle(ctx context.Context, conn net.Conn, head io.Reader) {
	defer conn.Close()
	br := p.newReader(head, requestLimits())
	defer p.putReader(br)
	req, err := http.ReadRequest(br.Reader)
	if err != nil {
		if errors.Is(err, io.EOF) && br.head.err == nil {
			return
		}
		code, reason := headStatus(br.head.err)
		var ne net.Error
		switch {
		case code != 0:
		case errors.As(err, &ne) && ne.Timeout():
			code, reason = http.StatusRequestTimeout, fmt.Sprintf("no whole request head within %v", p.opts.HeaderTimeout)
		default:
			code, reason = http.StatusBadRequest, "malformed request: "+clip(err.Error())
		}
		p.log(entry{Decision: "deny", Reason: reason, Status: code})
		writeStatus(conn, code, reason)
		return
	}
	conn.SetReadDeadline(time.Time{})
	d, err := destOf(req)
	if err != nil {
		p.log(entry{Method: clip(req.Method), Host: clip(req.Host), Decision: "deny", Reason: err.Error(), Status: http.StatusBadRequest})
		writeStatus(conn, http.StatusBadRequest, err.Error())
		return
	}
	e := entry{Method: clip(req.Method), Host: d.host, Port: d.port}
	pol := p.policy.Load()
	dec := pol.decide(d)
	e.Rule = dec.Rule
	if !dec.Allow {
		e.Decision, e.Reason, e.Status = "deny", "denied by policy", http.StatusForbidden
		switch dec.Rule {
		case "default":
			e.Reason = "not in the allow list (policy: deny)"
		case hostPortsRule:
			e.Reason = "a port of the host's loopback not in network.hostPorts"
		case "services." + d.host:
			e.Reason = "not a port of service " + d.host
		}
		p.log(e)
		writeStatus(conn, http.StatusForbidden, fmt.Sprintf("%s is blocked by sbx egress policy (%s)", d.host, e.Reason))
		return
	}
	upstream, addr, refused, rule, err := p.dial(ctx, pol, d)
	if upstream == nil {
		// A refused address is the policy's answer; a name that does not
		// resolve or an upstream that does not answer is a bad gateway.
		e.Decision, e.Reason, e.Status = "deny", string(refused), http.StatusForbidden
		if rule != "" {
			e.Rule = rule
		}
		if err != nil {
			// Not the policy's answer: logged as an error, so a name that
			// does not resolve is never counted as a refusal.
			e.Decision, e.Reason, e.Status = "error", err.Error(), http.StatusBadGateway
		}
		p.log(e)
		writeStatus(conn, e.Status, fmt.Sprintf("%s: %s", d.host, e.Reason))
		return
	}
	defer upstream.Close()
	e.Decision, e.Reason, e.Addr = "allow", "allowed by policy", addr
	set := p.secrets.Load()
	if req.Method == http.MethodConnect && set.terminates(d) {
		var buffered []byte
		if n := br.Buffered(); n > 0 {
			b, _ := br.Peek(n)
			buffered = append([]byte(nil), b...)
		}
		p.intercept(conn, buffered, upstream, d, set, e)
		return
	}
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
	// A secret goes only over TLS the proxy terminated: its placeholder
	// in a plain-HTTP request is refused, whatever the host.
	if err := set.refusePlain(req); err != nil {
		e.Decision, e.Reason, e.Status = "deny", err.Error(), http.StatusForbidden
		p.log(e)
		writeStatus(conn, e.Status, fmt.Sprintf("%s: %s", d.host, e.Reason))
		return
	}
	// An absolute-URI request: forward it without hop-by-hop headers, one
	// request per connection, to the host that was checked (RFC 9112
	// §3.2.2: a proxy replaces the Host header with the target's host).
	req.RequestURI = ""
	req.URL.Host = d.authority()
	req.Host = req.URL.Host
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
	// The client's writer is flushed before each read of the upstream
	// (flushFirst), so what arrived goes on before the proxy waits for
	// more: a streamed answer (server-sent events, chunked) would
	// otherwise wait in the writer's buffer until 4 KiB of it came.
	ur := p.newReader(&flushFirst{r: upstream, w: bw}, responseLimits())
	defer p.putReader(ur)
	resp, err := http.ReadResponse(ur.Reader, req)
	if err != nil {
		e.Status = http.StatusBadGateway
		p.log(e)
		msg := "upstream answered badly"
		if ur.head.err != nil {
			msg = "upstream response head too large"
		}
		writeStatus(conn, e.Status, msg)
		return
	}
	defer resp.Body.Close()
	e.Status = resp.StatusCode
	p.log(e)
	removeHopHeaders(resp.Header)
	resp.Close = true
	// Response.Write writes the head piece by piece: buffered, it leaves
	// in one segment instead of one per header line, with whatever of
	// the body arrived with it.
	bw.Reset(conn)
	if resp.Write(bodyWriter{bw}) == nil {
		bw.Flush()
	}
}

// flushFirst reads r, first flushing w: r is the upstream's socket under
// the response's reader, which reads it only when it has nothing left to
// give, so whatever the proxy holds for the client goes out before it
// waits for more, and only then (a body that arrives faster than the
// client takes it still goes out in large writes). The flush's error (the
// client gone, now or at an earlier write) is the read's: Response.Write
// closes the body after a failed write, and closing a body reads what is
// left of it (net/http drains a chunked body for its trailer, a body of
// known length to its end), which for an answer that never ends would
// hold the upstream, and this connection, for as long as it streams.
type flushFirst struct {
	r io.Reader
	w *bufio.Writer
}

func (f *flushFirst) Read(b []byte) (int, error) {
	// A flush with nothing buffered makes no system call; it returns
	// the error of an earlier write, if one failed.
	if err := f.w.Flush(); err != nil {
		return 0, err
	}
	return f.r.Read(b)
}

// bodyWriter is what a response is written to: the client's buffered
// writer without its ReadFrom. bufio.Writer.ReadFrom reads a body into
// the buffer until it is full, holding what arrived (and flushFirst's
// flush in the middle of it would corrupt it). Response.Write copies a
// body into bodyWriter through net/http's pooled 32 KiB buffer instead,
// a read at a time, and what does not fit w's buffer w writes straight
// to the connection: a large body still goes in large writes, on a
// *net.UnixConn too, which has no ReadFrom (the sandbox's bridge reaches
// the proxy over a Unix socket). Its one field makes it fit an interface
// without an allocation; WriteString spares Response.Write one for each
// string it writes.
type bodyWriter struct{ w *bufio.Writer }

func (b bodyWriter) Write(p []byte) (int, error)       { return b.w.Write(p) }
func (b bodyWriter) WriteString(s string) (int, error) { return b.w.WriteString(s) }

func (p *Proxy) newWriter(w io.Writer) *bufio.Writer {
	if bw, ok := p.writers.Get().(*bufio.Writer); ok {
		bw.Reset(w)
		return bw
	}
	return bufio.NewWriter(w)
}

// dial resolves the destination (a name as a fully qualified one, so no
// resolv.conf search domain turns it into another), checks every address
// in canonical form (for d: an exact allow rule may except an address
// from the blocked ranges, never from what the proxy always refuses), and
// dials one of those that passed itself, so a DNS answer that changes
// between check and use cannot bypass the checks. It returns the
// connection and the address dialled; or why the policy refused every
// address, with the deny rule if one did; or why nothing could be
// dialled.
func (p *Proxy) dial(ctx context.Context, pol *compiled, d dest) (net.Conn, string, refusal, string, error) {
	if d.hostAlias() {
		// decide let it through: one of the policy's HostPorts.
		if p.opts.HostRelay == "" {
			return nil, "", "", "", errors.New("this proxy has no relay to the host's loopback")
		}
		c, err := dialHostRelay(ctx, p.opts.HostRelay, d.port)
		return c, hostAddr(d.port), "", "", err
	}
	if _, ok := pol.service(d); ok {
		// decide let it through: one of the service's ports.
		c, err := p.serviceConn(ctx, d.host, d.port)
		return c, "service " + d.host + ":" + strconv.Itoa(d.port), "", "", err
	}
	var addrs []netip.Addr
	why, rule := refBlocked, ""
	if d.ip.IsValid() {
		addrs = []netip.Addr{d.ip}
	} else {
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		ips, err := p.opts.Resolver.LookupIPAddr(rctx, d.host+".")
		cancel()
		if err != nil || len(ips) == 0 {
			return nil, "", "", "", errors.New("cannot resolve host")
		}
		for _, ip := range ips {
			a, ok := netip.AddrFromSlice(ip.IP)
			switch {
			case !ok:
			case ip.Zone != "":
				why = refZone
			default:
				addrs = append(addrs, canonical(a))
			}
		}
	}
	var allowed []netip.Addr
	for _, a := range addrs {
		if p.always.contain(a) {
			if pol.excepted(a, d) {
				why = refAlways
			}
			continue
		}
		switch r, denyRule := pol.vet(a, d); r {
		case "":
			allowed = append(allowed, a)
		case refDenied, refAlways:
			why, rule = r, denyRule
		}
	}
	if len(allowed) == 0 {
		return nil, "", why, rule, nil
	}
	var lastErr error
	for _, a := range allowed {
		addr := netip.AddrPortFrom(a, uint16(d.port)).String()
		c, err := p.opts.Dial(ctx, "tcp", addr)
		if err == nil {
			return c, addr, "", "", nil
		}
		lastErr = err
	}
	return nil, "", "", "", fmt.Errorf("connect failed: %v", lastErr)
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
