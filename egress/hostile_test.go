package egress

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/sbxhq/sbx/spec"
)

// hostUpstream answers every request with the Host it was sent.
func hostUpstream(t *testing.T) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "host=%s", r.Host)
	}))
	t.Cleanup(srv.Close)
	return srv.Listener.Addr().String()
}

func connectReq(target string) string {
	return "CONNECT " + target + " HTTP/1.1\r\nHost: " + target + "\r\n\r\n"
}

func getReq(uri, host string) string {
	return "GET " + uri + " HTTP/1.1\r\nHost: " + host + "\r\n\r\n"
}

// send writes a raw request and returns the status and body of the
// answer; a tunnel that opened is closed at once.
func (h *harness) send(raw string) (int, string) {
	h.t.Helper()
	c, err := net.Dial("tcp", h.addr)
	if err != nil {
		h.t.Fatal(err)
	}
	defer c.Close()
	// Written while the answer is read: the proxy may answer (and close)
	// before it has read a large request.
	go io.WriteString(c, raw)
	br := bufio.NewReader(c)
	line, err := br.ReadString('\n')
	if err != nil {
		h.t.Fatalf("%q: reading the status line: %v", raw, err)
	}
	var code int
	if _, err := fmt.Sscanf(line, "HTTP/1.1 %d", &code); err != nil {
		h.t.Fatalf("%q: status line %q", raw, line)
	}
	if code == http.StatusOK && strings.HasPrefix(raw, "CONNECT") {
		return code, ""
	}
	rest, _ := io.ReadAll(br)
	_, body, _ := strings.Cut(string(rest), "\r\n\r\n")
	return code, body
}

// hostilePolicy allows by default, with the default blocked ranges, deny
// rules by name and by address, and a Docker host address.
func hostilePolicy() Policy {
	return Policy{
		Default:    "allow",
		Deny:       []string{"denied.test", "93.184.215.34", "93.184.215.35:443"},
		BlockCIDRs: spec.DefaultBlockCIDRs,
		HostAddrs:  []string{"93.184.217.1"},
	}
}

func hostileDNS() fakeDNS {
	return fakeDNS{
		"allowed.test":       {pub4},
		"denied.test":        {pub4},
		"v6.test":            {pub6},
		"rebind.test":        {"127.0.0.1"},
		"metadata.test":      {"169.254.169.254"},
		"cgnat.test":         {"100.64.0.1"},
		"mapped.test":        {"::ffff:10.0.0.1"},
		"mappedpub.test":     {"::ffff:" + pub4},
		"mixed.test":         {"169.254.169.254", "10.0.0.1", "::1", "fd00::1", "0.0.0.0", pub4, pub4b},
		"zoned.test":         {"fe80::1%eth0"},
		"zonedmix.test":      {"fe80::1%eth0", pub6},
		"nat64.test":         {"64:ff9b::a00:1"},
		"sixtofour.test":     {"2002:a00:1::1"},
		"own.test":           {"93.184.216.10"},
		"ownv6.test":         {"2606:2800:220:1::1"},
		"gateway.test":       {"93.184.216.1"},
		"dockerhost.test":    {"93.184.217.1"},
		"denyip.test":        {"93.184.215.34"},
		"denyport.test":      {"93.184.215.35"},
		"denyipmix.test":     {"93.184.215.34", pub4},
		"xn--bcher-kva.test": {pub4},
		"unspecified.test":   {"0.0.0.0", "::"},
	}
}

// TestHostileTargets plays a hostile agent's request targets against the
// proxy: for each, the answer, the decision logged, what the proxy asked
// the resolver and what it dialled. Nothing but loopback is ever dialled:
// the harness's dialer only records the address the proxy chose.
func TestHostileTargets(t *testing.T) {
	eachPath(t, func(t *testing.T, newHarness harnessFunc) {
		h := newHarness(t, hostilePolicy(), hostileDNS())
		h.setUpstream(hostUpstream(t))
		const (
			blocked  = "resolves to a blocked address"
			zone     = "IPv6 zone identifiers are refused"
			percent  = "percent-encoding is refused"
			numeric  = "a numeric address must be dotted-decimal IPv4"
			userinfo = "userinfo is refused"
			badPort  = "is not a number from 1 to 65535"
			// Refused by net/http's parser before the proxy looks.
			malformed = "malformed request"
		)
		tests := []struct {
			name    string
			req     string
			status  int
			reason  string   // contained in the logged reason
			lookups []string // names the resolver was asked for
			dialed  []string
			body    string // for an answered GET
		}{
			// Zones, in every position and encoding.
			{"zone %25 in CONNECT", connectReq("[fe80::1%25eth0]:443"), 400, zone, nil, nil, ""},
			{"zone on loopback", connectReq("[::1%25x]:443"), 400, zone, nil, nil, ""},
			{"zone in absolute URI", getReq("http://[fd00::1%25eth0]/", "x"), 400, zone, nil, nil, ""},
			{"zone in absolute URI with port", getReq("http://[fd00::1%25eth0]:8080/", "x"), 400, zone, nil, nil, ""},
			{"zone double-encoded", connectReq("[fe80::1%2525eth0]:443"), 400, zone, nil, nil, ""},
			{"zone raw %", connectReq("[fe80::1%eth0]:443"), 400, "malformed request", nil, nil, ""},
			{"zone on a public address", connectReq("[" + pub6 + "%25eth0]:443"), 400, zone, nil, nil, ""},
			{"zone on IPv4", connectReq("127.0.0.1%25lo:443"), 400, percent, nil, nil, ""},
			{"zone only in Host header", getReq("http://[fd00::1]/", "[fd00::1%25eth0]"), 403, blocked, nil, nil, ""},
			{"zone in a DNS answer", connectReq("zoned.test:443"), 403, "resolves to an address with a zone", []string{"zoned.test."}, nil, ""},
			{"zoned DNS answer beside a public one", connectReq("zonedmix.test:443"), 200, "allowed by policy", []string{"zonedmix.test."}, []string{"[" + pub6 + "]:443"}, ""},
			{"percent-encoded name", connectReq("allowed%2etest:443"), 400, malformed, nil, nil, ""},
			{"percent-encoded name in URI", getReq("http://denied%2Etest/", "x"), 400, malformed, nil, nil, ""},

			// IPv4-mapped and IPv4-compatible forms are checked and dialled as IPv4.
			{"mapped loopback", connectReq("[::ffff:127.0.0.1]:443"), 403, blocked, nil, nil, ""},
			{"mapped loopback in hex", connectReq("[::ffff:7f00:1]:443"), 403, blocked, nil, nil, ""},
			{"mapped private, upper case", connectReq("[::FFFF:A00:1]:443"), 403, blocked, nil, nil, ""},
			{"mapped metadata in URI", getReq("http://[::ffff:169.254.169.254]/", "x"), 403, blocked, nil, nil, ""},
			{"mapped public dials IPv4", connectReq("[::ffff:" + pub4 + "]:443"), 200, "allowed by policy", nil, []string{pub4 + ":443"}, ""},
			{"compatible loopback", connectReq("[::127.0.0.1]:443"), 403, blocked, nil, nil, ""},
			{"compatible metadata", connectReq("[::a9fe:a9fe]:443"), 403, blocked, nil, nil, ""},
			{"compatible public dials IPv4", connectReq("[::" + pub4 + "]:443"), 200, "allowed by policy", nil, []string{pub4 + ":443"}, ""},
			{"name resolving to mapped private", connectReq("mapped.test:443"), 403, blocked, []string{"mapped.test."}, nil, ""},
			{"name resolving to mapped public", connectReq("mappedpub.test:443"), 200, "allowed by policy", []string{"mappedpub.test."}, []string{pub4 + ":443"}, ""},

			// Unspecified addresses reach the proxy's own host.
			{"0.0.0.0", connectReq("0.0.0.0:443"), 403, blocked, nil, nil, ""},
			{"::", connectReq("[::]:443"), 403, blocked, nil, nil, ""},
			{"mapped 0.0.0.0", connectReq("[::ffff:0.0.0.0]:443"), 403, blocked, nil, nil, ""},
			{"0.0.0.0 in URI", getReq("http://0.0.0.0:8080/", "x"), 403, blocked, nil, nil, ""},
			{"name resolving to unspecified", connectReq("unspecified.test:443"), 403, blocked, []string{"unspecified.test."}, nil, ""},

			// Transition prefixes that carry an IPv4 address, and other ranges.
			{"NAT64 of loopback", connectReq("[64:ff9b::7f00:1]:443"), 403, blocked, nil, nil, ""},
			{"NAT64 of a public address", connectReq("[64:ff9b::5db8:d70e]:443"), 403, blocked, nil, nil, ""},
			{"local-use NAT64", connectReq("[64:ff9b:1::a00:1]:443"), 403, blocked, nil, nil, ""},
			{"name resolving to NAT64", connectReq("nat64.test:443"), 403, blocked, []string{"nat64.test."}, nil, ""},
			{"6to4 of loopback", connectReq("[2002:7f00:1::1]:443"), 403, blocked, nil, nil, ""},
			{"name resolving to 6to4", connectReq("sixtofour.test:443"), 403, blocked, []string{"sixtofour.test."}, nil, ""},
			{"Teredo", connectReq("[2001:0:4136:e378:8000:63bf:3fff:fdd2]:443"), 403, blocked, nil, nil, ""},
			{"IPv4 multicast", connectReq("224.0.0.1:443"), 403, blocked, nil, nil, ""},
			{"SSDP multicast", connectReq("239.255.255.250:1900"), 403, blocked, nil, nil, ""},
			{"IPv6 multicast", connectReq("[ff02::1]:443"), 403, blocked, nil, nil, ""},
			{"CGNAT", connectReq("100.64.0.1:443"), 403, blocked, nil, nil, ""},
			{"name resolving to CGNAT", connectReq("cgnat.test:443"), 403, blocked, []string{"cgnat.test."}, nil, ""},
			{"benchmarking", connectReq("198.18.0.1:443"), 403, blocked, nil, nil, ""},
			{"benchmarking, second /16", connectReq("198.19.255.254:443"), 403, blocked, nil, nil, ""},
			{"limited broadcast", connectReq("255.255.255.255:443"), 403, blocked, nil, nil, ""},
			{"site-local", connectReq("[fec0::1]:443"), 403, blocked, nil, nil, ""},

			// Numeric host spellings other than dotted decimal never reach a resolver.
			{"short form", connectReq("127.1:443"), 400, numeric, nil, nil, ""},
			{"hex and short", connectReq("0x7f.1:443"), 400, numeric, nil, nil, ""},
			{"hex upper case", connectReq("0X7F.0.0.1:443"), 400, numeric, nil, nil, ""},
			{"one decimal number", connectReq("2130706433:443"), 400, numeric, nil, nil, ""},
			{"one hex number", connectReq("0x7f000001:443"), 400, numeric, nil, nil, ""},
			{"octal", connectReq("0177.0.0.1:443"), 400, numeric, nil, nil, ""},
			{"one octal number", connectReq("017700000001:443"), 400, numeric, nil, nil, ""},
			{"leading zero", connectReq("127.0.0.01:443"), 400, numeric, nil, nil, ""},
			{"three parts", getReq("http://10.1.2/", "x"), 400, numeric, nil, nil, ""},
			{"bare 0x label", connectReq("a.0x:443"), 400, numeric, nil, nil, ""},
			{"unbracketed IPv6", connectReq("::1:443"), 400, "in brackets", nil, nil, ""},
			{"IPv4 in brackets", connectReq("[127.0.0.1]:443"), 400, malformed, nil, nil, ""},

			// Case, trailing dots, long names, IDNs.
			{"upper-case name", connectReq("ALLOWED.TEST:443"), 200, "allowed by policy", []string{"allowed.test."}, []string{pub4 + ":443"}, ""},
			{"upper-case denied name", connectReq("DeNiEd.TeSt:443"), 403, "denied by policy", nil, nil, ""},
			{"upper-case name in URI", getReq("http://Allowed.Test/x", "x"), 200, "allowed by policy", []string{"allowed.test."}, []string{pub4 + ":80"}, "host=allowed.test"},
			{"trailing dot", connectReq("allowed.test.:443"), 400, "trailing dot", nil, nil, ""},
			{"trailing dot on a denied name", connectReq("denied.test.:443"), 400, "trailing dot", nil, nil, ""},
			{"trailing dot on an address", connectReq("127.0.0.1.:443"), 400, "trailing dot", nil, nil, ""},
			{"empty label", connectReq("allowed..test:443"), 400, "labels are 1 to 63 bytes", nil, nil, ""},
			{"64-byte label", connectReq(strings.Repeat("a", 64) + ".test:443"), 400, "labels are 1 to 63 bytes", nil, nil, ""},
			{"254-byte name", connectReq(strings.Repeat("a.", 127) + "aa:443"), 400, "longer than 253 bytes", nil, nil, ""},
			{"punycode IDN", connectReq("xn--bcher-kva.test:443"), 200, "allowed by policy", []string{"xn--bcher-kva.test."}, []string{pub4 + ":443"}, ""},
			{"raw UTF-8 IDN", connectReq("bücher.test:443"), 400, "punycode", nil, nil, ""},
			{"underscore", connectReq("a_b.test:443"), 502, "cannot resolve host", []string{"a_b.test."}, nil, ""},

			// Ports.
			{"port 0", connectReq("allowed.test:0"), 400, badPort, nil, nil, ""},
			{"port 65536", connectReq("allowed.test:65536"), 400, badPort, nil, nil, ""},
			{"port with sign", connectReq("allowed.test:+443"), 400, malformed, nil, nil, ""},
			{"empty port", connectReq("allowed.test:"), 400, badPort, nil, nil, ""},
			{"port 0 in URI", getReq("http://allowed.test:0/", "x"), 400, badPort, nil, nil, ""},
			{"CONNECT without port", connectReq("allowed.test"), 200, "allowed by policy", []string{"allowed.test."}, []string{pub4 + ":443"}, ""},

			// Userinfo, schemes, forms.
			{"userinfo naming an allowed host", getReq("http://allowed.test@denied.test/", "allowed.test"), 400, userinfo, nil, nil, ""},
			{"userinfo with password", getReq("http://user:pw@allowed.test/", "allowed.test"), 400, userinfo, nil, nil, ""},
			{"userinfo in CONNECT", connectReq("user@allowed.test:443"), 400, userinfo, nil, nil, ""},
			{"https absolute URI", getReq("https://allowed.test/", "allowed.test"), 400, "use CONNECT for https", nil, nil, ""},
			{"upper-case scheme", getReq("HTTP://allowed.test/", "x"), 200, "allowed by policy", []string{"allowed.test."}, []string{pub4 + ":80"}, "host=allowed.test"},
			{"origin form", getReq("/x", "allowed.test"), 400, "not a proxy request", nil, nil, ""},

			// The absolute URI decides, and its host is the Host sent upstream.
			{"Host header names a denied host", getReq("http://allowed.test/", "denied.test"), 200, "allowed by policy", []string{"allowed.test."}, []string{pub4 + ":80"}, "host=allowed.test"},
			{"Host header names an allowed host", getReq("http://denied.test/", "allowed.test"), 403, "denied by policy", nil, nil, ""},
			{"Host header with a port, URI without", getReq("http://allowed.test/", "allowed.test:1234"), 200, "allowed by policy", []string{"allowed.test."}, []string{pub4 + ":80"}, "host=allowed.test"},
			{"mapped literal sent as IPv4", getReq("http://[::ffff:"+pub4+"]:8080/", "x"), 200, "allowed by policy", nil, []string{pub4 + ":8080"}, "host=" + pub4 + ":8080"},

			// Names that resolve to what they must not reach.
			{"CONNECT to a name resolving to loopback", connectReq("rebind.test:443"), 403, blocked, []string{"rebind.test."}, nil, ""},
			{"CONNECT to a name resolving to metadata", connectReq("metadata.test:443"), 403, blocked, []string{"metadata.test."}, nil, ""},
			{"GET of a name resolving to loopback", getReq("http://rebind.test:8080/", "rebind.test"), 403, blocked, []string{"rebind.test."}, nil, ""},
			{"answer mixing public and blocked", connectReq("mixed.test:443"), 200, "allowed by policy", []string{"mixed.test."}, []string{pub4 + ":443"}, ""},
			{"the proxy's own address", connectReq("93.184.216.10:443"), 403, blocked, nil, nil, ""},
			{"a name resolving to the proxy's own address", connectReq("own.test:443"), 403, blocked, []string{"own.test."}, nil, ""},
			{"the proxy's own IPv6 address", connectReq("[2606:2800:220:1::1]:443"), 403, blocked, nil, nil, ""},
			{"a name resolving to the proxy's own IPv6 address", connectReq("ownv6.test:443"), 403, blocked, []string{"ownv6.test."}, nil, ""},
			{"the proxy's gateway", connectReq("gateway.test:443"), 403, blocked, []string{"gateway.test."}, nil, ""},
			{"the Docker host", connectReq("93.184.217.1:443"), 403, blocked, nil, nil, ""},
			{"a name resolving to the Docker host", getReq("http://dockerhost.test/", "x"), 403, blocked, []string{"dockerhost.test."}, nil, ""},

			// An IP in deny blocks the names that resolve to it.
			{"denied IP literal", connectReq("93.184.215.34:443"), 403, "denied by policy", nil, nil, ""},
			{"a name resolving to a denied IP", connectReq("denyip.test:443"), 403, "resolves to an address denied by policy", []string{"denyip.test."}, nil, ""},
			{"denied IP beside an allowed one", connectReq("denyipmix.test:443"), 200, "allowed by policy", []string{"denyipmix.test."}, []string{pub4 + ":443"}, ""},
			{"a name resolving to a denied IP:port", connectReq("denyport.test:443"), 403, "resolves to an address denied by policy", []string{"denyport.test."}, nil, ""},
			{"the same name on another port", getReq("http://denyport.test/", "x"), 200, "allowed by policy", []string{"denyport.test."}, []string{"93.184.215.35:80"}, "host=denyport.test"},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				h.reset()
				code, body := h.send(tt.req)
				if code != tt.status {
					t.Errorf("status %d (%q), want %d", code, body, tt.status)
				}
				if tt.body != "" && body != tt.body {
					t.Errorf("upstream answered %q, want %q", body, tt.body)
				}
				dialed, lookups := h.seen()
				if diff := cmp.Diff(tt.dialed, dialed); diff != "" {
					t.Errorf("dialled (-want +got):\n%s", diff)
				}
				if diff := cmp.Diff(tt.lookups, lookups); diff != "" {
					t.Errorf("resolved (-want +got):\n%s", diff)
				}
				entries := h.log.entries(t)
				if len(entries) != 1 {
					t.Fatalf("%d log entries, want 1:\n%s", len(entries), h.log.String())
				}
				e := entries[0]
				wantDecision := "deny"
				switch tt.status {
				case 200:
					wantDecision = "allow"
				case 502:
					// Not resolving is not a refusal (issue 12).
					wantDecision = "error"
				}
				if e.Decision != wantDecision || e.Status != tt.status || !strings.Contains(e.Reason, tt.reason) {
					t.Errorf("logged %+v, want decision %s, status %d, reason containing %q", e, wantDecision, tt.status, tt.reason)
				}
				if want := strings.Join(tt.dialed, ""); e.Addr != want {
					t.Errorf("logged address %q, want %q", e.Addr, want)
				}
			})
		}
	})
}

// TestAlwaysRefused: with an empty block list and everything allowed,
// unspecified and loopback addresses and the proxy's own addresses and
// gateways are still refused, by literal and by name.
func TestAlwaysRefused(t *testing.T) {
	dns := fakeDNS{"own.test": {"93.184.216.10"}, "gw.test": {"93.184.216.1"}, "lo.test": {"127.0.0.2"}, "lo6.test": {"::1"}, "any.test": {"0.0.0.0"}, "any6.test": {"::"}}
	h := newHarness(t, Policy{Default: "allow", Allow: []string{"127.0.0.1", "0.0.0.0"}}, dns)
	h.setUpstream(hostUpstream(t))
	for _, target := range []string{
		"127.0.0.1:443", "127.255.255.254:443", "[::1]:443", "[::ffff:127.0.0.1]:443", "[::127.0.0.2]:443",
		"0.0.0.0:443", "0.1.2.3:443", "[::]:443",
		"93.184.216.10:443", "[2606:2800:220:1::1]:443", "93.184.216.1:443", "[::ffff:93.184.216.1]:443",
		"own.test:443", "gw.test:443", "lo.test:443", "lo6.test:443", "any.test:443", "any6.test:443",
	} {
		h.reset()
		if code, body := h.send(connectReq(target)); code != 403 || !strings.Contains(body, "resolves to a blocked address") {
			t.Errorf("CONNECT %s = %d %q, want 403 blocked", target, code, body)
		}
		if dialed, _ := h.seen(); len(dialed) != 0 {
			t.Errorf("CONNECT %s dialled %v", target, dialed)
		}
	}
	// The proxy's neighbours are not its own: with no block list they
	// are the policy's business.
	h.reset()
	if code, _ := h.send(connectReq("93.184.216.11:443")); code != 200 {
		t.Errorf("CONNECT to a neighbour of the proxy = %d, want 200", code)
	}
}

// TestDefaultRangesRefused: the first, a middle and the last address of
// every default blocked range are refused as literals and by name. Not
// ::ffff:0:0/96: the proxy checks an IPv4-mapped address as the IPv4
// address it carries (TestHostileTargets), as a resolver's answer cannot
// tell an A record from a mapped AAAA.
func TestDefaultRangesRefused(t *testing.T) {
	dns := fakeDNS{}
	var literals []string
	for _, s := range spec.DefaultBlockCIDRs {
		if s == "::ffff:0:0/96" {
			continue
		}
		p := netip.MustParsePrefix(s)
		first := p.Addr()
		last := lastAddr(p)
		mid := midAddr(p)
		for _, a := range []netip.Addr{first, mid, last} {
			lit := a.String()
			if a.Is6() {
				lit = "[" + lit + "]"
			}
			literals = append(literals, lit)
			name := fmt.Sprintf("r%d.test", len(dns))
			dns[name] = []string{a.String()}
			literals = append(literals, name)
		}
	}
	h := newHarness(t, Policy{Default: "allow", BlockCIDRs: spec.DefaultBlockCIDRs}, dns)
	h.setUpstream(hostUpstream(t))
	for _, target := range literals {
		h.reset()
		if code, body := h.send(connectReq(target + ":443")); code != 403 {
			t.Errorf("CONNECT %s = %d %q, want 403", target, code, body)
		}
		if dialed, _ := h.seen(); len(dialed) != 0 {
			t.Errorf("CONNECT %s dialled %v", target, dialed)
		}
	}
	// Just outside a few ranges is public.
	for _, target := range []string{"100.128.0.1", "198.20.0.1", "223.255.255.254", "[2001:200::1]", "[2003::1]"} {
		h.reset()
		if code, body := h.send(connectReq(target + ":443")); code != 200 {
			t.Errorf("CONNECT %s = %d %q, want 200", target, code, body)
		}
	}
}

func lastAddr(p netip.Prefix) netip.Addr {
	b := p.Addr().AsSlice()
	for i := p.Bits(); i < len(b)*8; i++ {
		b[i/8] |= 0x80 >> (i % 8)
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}

// midAddr sets the first host bit of a prefix with room for one.
func midAddr(p netip.Prefix) netip.Addr {
	b := p.Addr().AsSlice()
	if i := p.Bits(); i < len(b)*8 {
		b[i/8] |= 0x80 >> (i % 8)
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}
