package egress

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
)

// handshakeTimeout bounds each TLS handshake of an intercepted tunnel.
const handshakeTimeout = 10 * time.Second

// SetSecrets gives the proxy the sandbox's CA and the secrets it adds to
// requests for their hosts, replacing those it had; they live in memory
// only. A tunnel to a host a secret is for is terminated from then on.
func (p *Proxy) SetSecrets(ca *CA, ss []Secret) error {
	set, err := compileSecrets(ca, ss)
	if err != nil {
		return err
	}
	p.secrets.Store(set)
	return nil
}

// setSecretsPEM is SetSecrets of a CA in PEM (the control channel's
// form), with the roots (PEM) that verify the upstreams when given; it
// returns the secrets' names. No secrets and no CA stop adding any.
func (p *Proxy) setSecretsPEM(caPEM, rootsPEM []byte, ss []Secret) ([]string, error) {
	var ca *CA
	if len(caPEM) > 0 {
		var err error
		if ca, err = ParseCA(caPEM); err != nil {
			return nil, err
		}
	}
	set, err := compileSecrets(ca, ss)
	if err != nil {
		return nil, err
	}
	if len(rootsPEM) > 0 {
		set.roots = x509.NewCertPool()
		if !set.roots.AppendCertsFromPEM(rootsPEM) {
			return nil, errors.New("the upstreams' roots hold no PEM certificate")
		}
	}
	p.secrets.Store(set)
	names := []string{}
	for _, s := range ss {
		names = append(names, s.Name)
	}
	p.logEvent(map[string]any{"event": "secrets", "secrets": names})
	return names, nil
}

// intercept serves a CONNECT to a host the proxy adds a secret for. It
// answers the CONNECT and terminates the sandbox's TLS with a certificate
// for that host from the sandbox's CA while it opens its own TLS
// connection to the upstream, verified as a client would (the roots
// that came with the secrets, else Options.UpstreamRoots, else the
// system's roots; a resumed session is checked against them again): the
// two handshakes overlap, so the sandbox's request waits for the longer,
// not for both one after the other. It forwards one request, its
// placeholders replaced (secretSet.rewrite), only over a verified
// connection, and the answer, then closes both: a client opens a tunnel
// per request, as for a plain-HTTP request. An upstream that fails
// verification gets nothing; the sandbox's request is answered 502. A
// request for another Host than the tunnel's, or carrying the
// placeholder of a secret that is not for this host, is refused and
// logged.
func (p *Proxy) intercept(conn net.Conn, buffered []byte, upstream net.Conn, d dest, set *secretSet, e entry) {
	leaf, err := set.ca.leaf(d.host)
	if err != nil {
		e.Decision, e.Reason, e.Status = "error", "certificate: "+clip(err.Error()), http.StatusInternalServerError
		p.log(e)
		writeStatus(conn, e.Status, e.Reason)
		return
	}
	roots := set.roots
	if roots == nil {
		roots = p.opts.UpstreamRoots
	}
	up := tls.Client(upstream, &tls.Config{
		ServerName:         d.host,
		RootCAs:            roots,
		NextProtos:         []string{"http/1.1"},
		MinVersion:         tls.VersionTLS12,
		ClientSessionCache: p.upstreamSessions,
	})
	up.SetDeadline(time.Now().Add(handshakeTimeout))
	upDone := make(chan error, 1)
	go func() { upDone <- up.Handshake() }()
	upHandshake := sync.OnceValue(func() error { return <-upDone })
	defer func() {
		upstream.Close() // ends the upstream's handshake if it is still on
		upHandshake()
	}()
	io.WriteString(conn, "HTTP/1.1 200 Connection established\r\n\r\n")
	down := tls.Server(&prefixConn{Conn: conn, prefix: buffered}, &tls.Config{
		Certificates: []tls.Certificate{*leaf},
		NextProtos:   []string{"http/1.1"},
		MinVersion:   tls.VersionTLS12,
	})
	down.SetDeadline(time.Now().Add(handshakeTimeout))
	if err := down.Handshake(); err != nil {
		e.Method, e.Decision, e.Reason, e.Status = "CONNECT", "error", "sandbox TLS: "+clip(err.Error()), 0
		p.log(e)
		return
	}
	down.SetReadDeadline(time.Now().Add(p.opts.HeaderTimeout))
	br := p.newReader(down, requestLimits())
	defer p.putReader(br)
	req, err := http.ReadRequest(br.Reader)
	if err != nil {
		return // the client closed the tunnel unused, or sent no request
	}
	down.SetReadDeadline(time.Time{})
	e.Method = clip(req.Method)
	bw := p.newWriter(down)
	defer p.writers.Put(bw)
	refuse := func(code int, reason string) {
		e.Decision, e.Reason, e.Status = "deny", reason, code
		p.log(e)
		writeStatus(bw, code, reason)
		bw.Flush()
	}
	if !sameHost(req.Host, d) {
		refuse(http.StatusMisdirectedRequest, fmt.Sprintf("request for %s in a tunnel to %s", clip(req.Host), d.host))
		return
	}
	added, err := set.rewrite(req, d)
	if err != nil {
		refuse(http.StatusForbidden, err.Error())
		return
	}
	if err := upHandshake(); err != nil {
		e.Decision, e.Reason, e.Status = "error", "upstream TLS: "+clip(err.Error()), http.StatusBadGateway
		p.log(e)
		writeStatus(bw, e.Status, fmt.Sprintf("%s: %s", d.host, e.Reason))
		bw.Flush()
		return
	}
	up.SetDeadline(time.Time{})
	removeHopHeaders(req.Header)
	req.Header.Set("Connection", "close")
	req.Close = true
	ubw := bufio.NewWriter(up)
	if err := req.Write(ubw); err == nil {
		err = ubw.Flush()
	}
	if err != nil {
		e.Decision, e.Reason, e.Status = "error", "upstream write failed", http.StatusBadGateway
		p.log(e)
		writeStatus(bw, e.Status, e.Reason)
		bw.Flush()
		return
	}
	ur := p.newReader(&flushFirst{r: up, w: bw}, responseLimits())
	defer p.putReader(ur)
	resp, err := http.ReadResponse(ur.Reader, req)
	if err != nil {
		e.Decision, e.Reason, e.Status = "error", "upstream answered badly", http.StatusBadGateway
		p.log(e)
		writeStatus(bw, e.Status, e.Reason)
		bw.Flush()
		return
	}
	defer resp.Body.Close()
	e.Decision, e.Status = "allow", resp.StatusCode
	e.Reason = "allowed by policy; TLS terminated"
	if len(added) > 0 {
		e.Reason += "; secrets added: " + strings.Join(added, ", ")
	}
	p.log(e)
	removeHopHeaders(resp.Header)
	resp.Close = true
	if resp.Write(bodyWriter{bw}) == nil {
		bw.Flush()
	}
	down.Close()
}

// sameHost reports whether a request's Host names the tunnel's
// destination (the port may be left out when it is 443).
func sameHost(host string, d dest) bool {
	want, err := parseAuthority(host, 443)
	return err == nil && strings.EqualFold(want.host, d.host) && want.port == d.port
}

// prefixConn is a connection whose first bytes were already read (those
// the client sent after its CONNECT head).
type prefixConn struct {
	net.Conn
	prefix []byte
}

func (c *prefixConn) Read(b []byte) (int, error) {
	if len(c.prefix) > 0 {
		n := copy(b, c.prefix)
		c.prefix = c.prefix[n:]
		return n, nil
	}
	return c.Conn.Read(b)
}
