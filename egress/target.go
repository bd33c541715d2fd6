package egress

import (
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
)

// dest is where a request wants to go, in the one spelling the policy is
// checked against: a lower-case DNS name, or an IP literal in canonical
// form (see canonical).
type dest struct {
	host    string     // the name, or ip's text (no brackets)
	ip      netip.Addr // valid for an IP literal
	port    int
	hasPort bool // the client wrote the port (kept in the forwarded Host)
}

// authority is the dest in URI authority form: a bracketed IPv6 literal,
// and the port only when the client gave one.
func (d dest) authority() string {
	h := d.host
	if d.ip.Is6() {
		h = "[" + h + "]"
	}
	if d.hasPort {
		h += ":" + strconv.Itoa(d.port)
	}
	return h
}

// destOf finds where a request wants to go: the CONNECT authority (port
// 443 if none), or the authority of an absolute http:// URI (port 80 if
// none). It reads the request-target as the client wrote it, not the
// URL net/http decoded from it, so a percent-encoded or zoned host is
// refused rather than decoded. Origin-form requests ("GET /path") are not
// proxy requests.
func destOf(req *http.Request) (dest, error) {
	if req.Method == http.MethodConnect {
		return parseAuthority(req.RequestURI, 443)
	}
	uri := req.RequestURI
	scheme, rest, ok := strings.Cut(uri, "://")
	if !ok || strings.HasPrefix(uri, "/") {
		return dest{}, errors.New("not a proxy request: use CONNECT or an absolute URI")
	}
	if !strings.EqualFold(scheme, "http") {
		return dest{}, fmt.Errorf("unsupported scheme %q (use CONNECT for https)", clip(scheme))
	}
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		rest = rest[:i]
	}
	return parseAuthority(rest, 80)
}

// parseAuthority parses host[:port] strictly. Refused: userinfo (RFC 9110
// §4.2.4 tells a recipient to treat it as an error), percent-encoding and
// IPv6 zone identifiers (RFC 6874's %25 form included: a zone names an
// interface of the proxy, never a destination), an IPv4 literal in any
// spelling but dotted decimal, names that end in a number (WHATWG URL
// §3.5 "ends in a number": resolvers and browsers read 127.1, 0x7f.1 and
// 2130706433 as IPv4 addresses), a trailing dot, labels over 63 bytes,
// names over 253, non-ASCII (IDNs travel as xn-- punycode), and ports
// outside 1–65535.
func parseAuthority(s string, defPort int) (dest, error) {
	switch {
	case s == "":
		return dest{}, errors.New("empty host")
	case strings.Contains(s, "@"):
		return dest{}, fmt.Errorf("bad target %q: userinfo is refused", clip(s))
	case strings.HasPrefix(s, "[") && strings.Contains(s, "%"):
		return dest{}, fmt.Errorf("bad target %q: IPv6 zone identifiers are refused", clip(s))
	case strings.Contains(s, "%"):
		return dest{}, fmt.Errorf("bad target %q: percent-encoding is refused in a host", clip(s))
	}
	d := dest{port: defPort}
	host, port := s, ""
	if strings.HasPrefix(s, "[") {
		end := strings.IndexByte(s, ']')
		if end < 0 {
			return dest{}, fmt.Errorf("bad target %q: missing ]", clip(s))
		}
		host = s[1:end]
		switch rest := s[end+1:]; {
		case rest == "":
		case rest[0] == ':':
			port, d.hasPort = rest[1:], true
		default:
			return dest{}, fmt.Errorf("bad target %q", clip(s))
		}
		ip, err := netip.ParseAddr(host)
		if err != nil || !ip.Is6() {
			return dest{}, fmt.Errorf("bad target %q: %q is not an IPv6 address", clip(s), clip(host))
		}
		d.ip = ip
	} else {
		if strings.Count(s, ":") > 1 {
			return dest{}, fmt.Errorf("bad target %q: write an IPv6 address in brackets", clip(s))
		}
		if i := strings.IndexByte(s, ':'); i >= 0 {
			host, port, d.hasPort = s[:i], s[i+1:], true
		}
		if ip, err := parseIPv4(host); err == nil {
			d.ip = ip
		} else if err := checkName(host); err != nil {
			return dest{}, err
		}
	}
	if d.hasPort {
		p, ok := parsePort(port)
		if !ok {
			return dest{}, fmt.Errorf("bad target %q: port %q is not a number from 1 to 65535", clip(s), clip(port))
		}
		d.port = p
	}
	if d.ip.IsValid() {
		d.ip = canonical(d.ip)
		d.host = d.ip.String()
	} else {
		d.host = strings.ToLower(host)
	}
	return d, nil
}

// parseIPv4 parses a dotted-decimal IPv4 address, without the error
// netip builds for the names most hosts are.
func parseIPv4(s string) (netip.Addr, error) {
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < '0' || c > '9') && c != '.' {
			return netip.Addr{}, errNotIPv4
		}
	}
	ip, err := netip.ParseAddr(s)
	if err != nil || !ip.Is4() {
		return netip.Addr{}, errNotIPv4
	}
	return ip, nil
}

var errNotIPv4 = errors.New("not an IPv4 address")

// parsePort accepts 1 to 5 ASCII digits with a value from 1 to 65535.
func parsePort(s string) (int, bool) {
	if s == "" || len(s) > 5 {
		return 0, false
	}
	n := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, n >= 1 && n <= 65535
}

// Bounds of a DNS name (RFC 1035 §2.3.4, in presentation form).
const (
	maxName  = 253
	maxLabel = 63
)

// checkName accepts a DNS name of letters, digits, hyphens and
// underscores that does not end in a number.
func checkName(h string) error {
	switch {
	case h == "":
		return errors.New("empty host")
	case len(h) > maxName:
		return fmt.Errorf("invalid host name %q: longer than %d bytes", clip(h), maxName)
	case strings.HasSuffix(h, "."):
		return fmt.Errorf("invalid host name %q: a trailing dot is refused", clip(h))
	}
	last := ""
	for label := range strings.SplitSeq(h, ".") {
		if label == "" || len(label) > maxLabel {
			return fmt.Errorf("invalid host name %q: labels are 1 to %d bytes", clip(h), maxLabel)
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
				return fmt.Errorf("invalid host name %q: only letters, digits, - and _ (internationalised names as xn-- punycode)", clip(h))
			}
		}
		last = label
	}
	if endsInNumber(last) {
		return fmt.Errorf("invalid host name %q: a numeric address must be dotted-decimal IPv4", clip(h))
	}
	return nil
}

// endsInNumber reports whether a name's last label reads as a number to
// an IPv4 parser: all decimal digits, or 0x followed by hex digits
// (WHATWG URL Standard §3.5, "ends in a number checker").
func endsInNumber(label string) bool {
	digits := label
	hex := len(label) >= 2 && label[0] == '0' && (label[1] == 'x' || label[1] == 'X')
	if hex {
		digits = label[2:]
		if digits == "" {
			return true
		}
	}
	for i := 0; i < len(digits); i++ {
		c := digits[i]
		switch {
		case '0' <= c && c <= '9':
		case hex && ('a' <= c && c <= 'f' || 'A' <= c && c <= 'F'):
		default:
			return false
		}
	}
	return true
}

// canonical is the form of an address the proxy checks and dials: an
// IPv4-mapped (::ffff:a.b.c.d) or IPv4-compatible (::a.b.c.d, deprecated
// by RFC 4291 §2.5.5.1) address becomes the IPv4 address it carries, so
// the IPv4 ranges apply to it. :: and ::1 stay IPv6. A zone is kept (and
// refused by the caller).
func canonical(a netip.Addr) netip.Addr {
	if a.Is4In6() {
		return a.Unmap()
	}
	if a.Is6() && a.Zone() == "" {
		b := a.As16()
		for _, x := range b[:12] {
			if x != 0 {
				return a
			}
		}
		if v4 := netip.AddrFrom4([4]byte(b[12:])); v4.Compare(netip.AddrFrom4([4]byte{0, 0, 0, 1})) > 0 {
			return v4
		}
	}
	return a
}

// maxLogString bounds every client-supplied string in a log line or an
// error message: a valid host name fits whole.
const maxLogString = 256

// clip cuts a client-supplied string to maxLogString bytes, saying how
// long it was.
func clip(s string) string {
	if len(s) <= maxLogString {
		return s
	}
	return s[:maxLogString] + "…(" + strconv.Itoa(len(s)) + " bytes)"
}
