package spec

import (
	"fmt"
	"math"
	"net/netip"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
)

// Host is a parsed network host pattern: an exact name, a one-label wildcard
// (*.example.com), or an IP address, with an optional port.
type Host struct {
	Name     string     // lower-case name; for a wildcard, the part after "*."
	Wildcard bool       // matches exactly one extra leftmost label
	IP       netip.Addr // set for IP literals
	Port     int        // 0: any port
}

// String gives the canonical form of the pattern.
func (h Host) String() string {
	var s string
	switch {
	case h.IP.IsValid():
		s = h.IP.String()
		if h.IP.Is6() && h.Port != 0 {
			s = "[" + s + "]"
		}
	case h.Wildcard:
		s = "*." + h.Name
	default:
		s = h.Name
	}
	if h.Port != 0 {
		s += ":" + strconv.Itoa(h.Port)
	}
	return s
}

// Matches reports whether the pattern covers host (a name or IP literal,
// without port) and port.
func (h Host) Matches(host string, port int) bool {
	if h.Port != 0 && h.Port != port {
		return false
	}
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	if h.IP.IsValid() {
		ip, err := netip.ParseAddr(strings.Trim(host, "[]"))
		return err == nil && ip.Unmap() == h.IP.Unmap()
	}
	if h.Wildcard {
		label, rest, ok := strings.Cut(host, ".")
		return ok && label != "" && rest == h.Name
	}
	return host == h.Name
}

// labelRE is a DNS label's rule.
var labelRE = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)

// ParseHost parses a host pattern of network.allow or network.deny.
func ParseHost(s string) (Host, error) {
	orig := s
	if strings.Contains(s, "://") || strings.Contains(s, "/") {
		u := s
		if _, after, ok := strings.Cut(u, "://"); ok {
			u = after
		}
		u, _, _ = strings.Cut(u, "/")
		return Host{}, fmt.Errorf("invalid host pattern %q: write a host name, not a URL (did you mean %q?)", orig, u)
	}
	var h Host
	// Bracketed IPv6, with optional port.
	if strings.HasPrefix(s, "[") {
		end := strings.Index(s, "]")
		if end < 0 {
			return Host{}, fmt.Errorf("invalid host pattern %q: missing ]", orig)
		}
		ip, err := netip.ParseAddr(s[1:end])
		if err != nil || !ip.Is6() {
			return Host{}, fmt.Errorf("invalid host pattern %q: %q is not an IPv6 address", orig, s[1:end])
		}
		h.IP = ip
		rest := s[end+1:]
		if rest != "" {
			if !strings.HasPrefix(rest, ":") {
				return Host{}, fmt.Errorf("invalid host pattern %q: unexpected %q after ]", orig, rest)
			}
			p, err := parsePortNumber(rest[1:])
			if err != nil {
				return Host{}, fmt.Errorf("invalid host pattern %q: %v", orig, err)
			}
			h.Port = p
		}
		return h, nil
	}
	// Bare IPv6.
	if strings.Count(s, ":") > 1 {
		ip, err := netip.ParseAddr(s)
		if err != nil {
			return Host{}, fmt.Errorf("invalid host pattern %q: not an IPv6 address (write [ADDR]:PORT to give a port)", orig)
		}
		h.IP = ip
		return h, nil
	}
	if name, port, ok := strings.Cut(s, ":"); ok {
		p, err := parsePortNumber(port)
		if err != nil {
			return Host{}, fmt.Errorf("invalid host pattern %q: %v", orig, err)
		}
		h.Port = p
		s = name
	}
	if ip, err := netip.ParseAddr(s); err == nil {
		h.IP = ip
		return h, nil
	}
	s = strings.TrimSuffix(strings.ToLower(s), ".")
	if s == "" {
		return Host{}, fmt.Errorf("invalid host pattern %q: empty host", orig)
	}
	if s == "*" {
		return Host{}, fmt.Errorf("invalid host pattern %q: a bare * matches everything; set network.policy: allow instead", orig)
	}
	if rest, ok := strings.CutPrefix(s, "*."); ok {
		h.Wildcard = true
		s = rest
		if !strings.Contains(s, ".") {
			return Host{}, fmt.Errorf("invalid host pattern %q: a wildcard needs at least two labels after it, as in *.example.com", orig)
		}
	}
	if strings.Contains(s, "*") {
		return Host{}, fmt.Errorf("invalid host pattern %q: * may only stand alone as the first label, as in *.example.com", orig)
	}
	if len(s) > 253 {
		return Host{}, fmt.Errorf("invalid host pattern %q: longer than 253 characters", orig)
	}
	for _, l := range strings.Split(s, ".") {
		if !labelRE.MatchString(l) {
			return Host{}, fmt.Errorf("invalid host pattern %q: %q is not a valid DNS label (letters, digits and inner hyphens, at most 63)", orig, l)
		}
	}
	if isAllDigits(s[strings.LastIndex(s, ".")+1:]) {
		return Host{}, fmt.Errorf("invalid host pattern %q: not a valid IP address or host name", orig)
	}
	h.Name = s
	return h, nil
}

func isAllDigits(s string) bool {
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return s != ""
}

func parsePortNumber(s string) (int, error) {
	p, err := strconv.Atoi(s)
	if err != nil || p < 1 || p > 65535 {
		return 0, fmt.Errorf("port %q is not a number from 1 to 65535", s)
	}
	return p, nil
}

// ParseCIDR parses a network.blockCIDRs entry, rejecting host bits.
func ParseCIDR(s string) (netip.Prefix, error) {
	p, err := netip.ParsePrefix(s)
	if err != nil {
		if ip, e := netip.ParseAddr(s); e == nil {
			return netip.Prefix{}, fmt.Errorf("invalid CIDR %q: missing prefix length (did you mean %q?)", s, netip.PrefixFrom(ip, ip.BitLen()).String())
		}
		return netip.Prefix{}, fmt.Errorf("invalid CIDR %q: write an address and a prefix length, as in 10.0.0.0/8", s)
	}
	if m := p.Masked(); m != p {
		return netip.Prefix{}, fmt.Errorf("invalid CIDR %q: it has host bits set (did you mean %q?)", s, m.String())
	}
	return p, nil
}

// sizeRE is a memory size, trimmed and lower-cased: the number, the unit
// and the unit's suffix.
var sizeRE = regexp.MustCompile(`^([0-9]+(?:\.[0-9]+)?)\s*([kmgt]?)(i?b)?$`)

// MinMemory is the smallest memory limit Docker accepts.
const MinMemory = 6 << 20

// ParseSize parses a memory size: a number of bytes, or a number with a
// binary unit (k, m, g, t; "b", "ib" suffixes and case ignored): 512m, 8g,
// 1.5g, 4GiB.
func ParseSize(s string) (int64, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	m := sizeRE.FindStringSubmatch(t)
	if m == nil {
		return 0, fmt.Errorf("invalid size %q: use a number with a unit, as in 512m or 8g", s)
	}
	num, unit, suffix := m[1], m[2], m[3]
	if unit == "" && suffix == "ib" {
		return 0, fmt.Errorf("invalid size %q: use a number with a unit, as in 512m or 8g", s)
	}
	f, err := strconv.ParseFloat(num, 64)
	if err != nil {
		return 0, fmt.Errorf("invalid size %q", s)
	}
	mult := map[string]float64{"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}[unit]
	v := f * mult
	if v >= math.MaxInt64/2 {
		return 0, fmt.Errorf("invalid size %q: too large", s)
	}
	return int64(v), nil
}

// FormatSize prints a byte count in the largest unit that divides it.
func FormatSize(n int64) string {
	for _, u := range []struct {
		s string
		v int64
	}{{"t", 1 << 40}, {"g", 1 << 30}, {"m", 1 << 20}, {"k", 1 << 10}} {
		if n >= u.v && n%u.v == 0 {
			return strconv.FormatInt(n/u.v, 10) + u.s
		}
	}
	return strconv.FormatInt(n, 10)
}

// HumanSize formats n bytes for people, in binary units with at most one
// decimal (1.2 GiB, 512 MiB, 900 B): what a size column or message shows.
// JSON outputs keep the exact number of bytes.
func HumanSize(n int64) string {
	if n < 1<<10 {
		return strconv.FormatInt(n, 10) + " B"
	}
	units := []string{"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"}
	v, u := float64(n)/(1<<10), 0
	for v >= 1023.95 && u < len(units)-1 {
		v /= 1 << 10
		u++
	}
	return strings.TrimSuffix(strconv.FormatFloat(v, 'f', 1, 64), ".0") + " " + units[u]
}

// ParsePort parses a ports entry in docker run -p form:
// [IP:][HOSTPORT:]CONTAINERPORT[/PROTO].
func ParsePort(s string) (Port, error) {
	p := Port{Protocol: "tcp"}
	rest := s
	if i := strings.LastIndex(rest, "/"); i >= 0 {
		p.Protocol = strings.ToLower(rest[i+1:])
		rest = rest[:i]
		if p.Protocol != "tcp" && p.Protocol != "udp" {
			return Port{}, fmt.Errorf("invalid port %q: protocol must be tcp or udp", s)
		}
	}
	var parts []string
	if strings.HasPrefix(rest, "[") {
		end := strings.Index(rest, "]")
		if end < 0 || end+1 >= len(rest) || rest[end+1] != ':' {
			return Port{}, fmt.Errorf("invalid port %q", s)
		}
		parts = append([]string{rest[1:end]}, strings.Split(rest[end+2:], ":")...)
	} else {
		parts = strings.Split(rest, ":")
	}
	var err error
	switch len(parts) {
	case 1:
		p.ContainerPort, err = parsePortNumber(parts[0])
	case 2:
		if p.HostPort, err = parsePortNumber(parts[0]); err == nil {
			p.ContainerPort, err = parsePortNumber(parts[1])
		}
	case 3:
		ip, e := netip.ParseAddr(parts[0])
		if e != nil {
			return Port{}, fmt.Errorf("invalid port %q: %q is not an IP address", s, parts[0])
		}
		p.HostIP = ip.String()
		if parts[1] != "" {
			p.HostPort, err = parsePortNumber(parts[1])
		}
		if err == nil {
			p.ContainerPort, err = parsePortNumber(parts[2])
		}
	default:
		return Port{}, fmt.Errorf("invalid port %q: use [IP:][HOST:]CONTAINER[/tcp|udp]", s)
	}
	if err != nil {
		return Port{}, fmt.Errorf("invalid port %q: %v", s, err)
	}
	return p, nil
}

// String prints the port in docker run -p form.
func (p Port) String() string {
	var b strings.Builder
	if p.HostIP != "" {
		if strings.Contains(p.HostIP, ":") {
			b.WriteString("[" + p.HostIP + "]:")
		} else {
			b.WriteString(p.HostIP + ":")
		}
		if p.HostPort != 0 {
			b.WriteString(strconv.Itoa(p.HostPort))
		}
		b.WriteString(":")
	} else if p.HostPort != 0 {
		b.WriteString(strconv.Itoa(p.HostPort) + ":")
	}
	b.WriteString(strconv.Itoa(p.ContainerPort))
	b.WriteString("/" + p.Protocol)
	return b.String()
}

// nameRE is the characters of a sandbox name.
var nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9.-]*$`)

// CheckName applies Docker's sandbox name rule (docker-sandboxes-cli.md
// §5.1): 2–63 characters, starting with a letter or digit, then letters,
// digits, hyphens and periods, not ending in a hyphen or period, and not
// "default".
func CheckName(name string) error {
	switch {
	case len(name) < 2:
		return fmt.Errorf("invalid name %q: must be at least 2 characters", name)
	case len(name) > 63:
		return fmt.Errorf("invalid name %q: must be at most 63 characters", name)
	case !nameRE.MatchString(name):
		return fmt.Errorf("invalid name %q: must start with a letter or digit and contain only letters, digits, hyphens and periods", name)
	case strings.HasSuffix(name, "-") || strings.HasSuffix(name, "."):
		return fmt.Errorf("invalid name %q: must not end in a hyphen or period", name)
	case name == "default":
		return fmt.Errorf("invalid name %q: \"default\" is reserved", name)
	}
	return nil
}

// DeriveName makes the default sandbox name, <agent>-<workspace basename>,
// valid under CheckName.
func DeriveName(agent, workspace string) string {
	base := filepath.Base(workspace)
	var b strings.Builder
	b.WriteString(agent + "-")
	dash := true
	for _, r := range base {
		ok := r < 128 && (r == '.' || r == '-' || ('a' <= r && r <= 'z') || ('A' <= r && r <= 'Z') || ('0' <= r && r <= '9'))
		switch {
		case ok:
			b.WriteRune(r)
			dash = r == '-'
		case !dash:
			b.WriteByte('-')
			dash = true
		}
	}
	name := b.String()
	if len(name) > 63 {
		name = name[:63]
	}
	name = strings.TrimRight(name, "-.")
	if len(name) < 2 || name == agent {
		name = agent + "-sandbox"
	}
	return name
}
