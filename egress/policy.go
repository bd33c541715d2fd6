// Package egress is the docker and kubernetes drivers' network boundary: a
// filtering HTTP/HTTPS proxy that runs in its own container (pod), outside
// the sandbox's reach, and the in-sandbox bridge that carries the
// sandbox's only way out (127.0.0.1:3128) over a Unix socket (over TCP to
// the proxy's pod) to it. The proxy allows or denies each
// CONNECT and absolute-URI request by host and port; refuses targets it
// cannot read one way only (zones, percent-encoding, numeric spellings
// other than dotted decimal); checks every resolved address, in canonical
// form, against blocked ranges (but for the exceptions the policy names:
// an IP literal allowed exactly, and the subnets of the Docker networks
// the proxy joined), IP deny rules and what it always refuses
// (unspecified and loopback addresses, its own, the Docker host's and the
// joined networks' gateways); dials exactly the address it checked;
// bounds what a client can make it hold; and logs every decision as a
// JSON line. For the hosts a secret is for (SetSecrets) it terminates
// the sandbox's TLS with a certificate from the sandbox's own CA and adds
// the secret in place of the placeholder the sandbox holds
// (intercept.go); every other tunnel is spliced unread.
package egress

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"slices"
	"sort"

	"github.com/sbxhq/sbx/spec"
)

// Policy is the proxy's configuration file, written by the docker driver.
type Policy struct {
	Default    string   `json:"default"` // "deny" or "allow"
	Allow      []string `json:"allow"`
	Deny       []string `json:"deny"`
	BlockCIDRs []string `json:"blockCIDRs"`
	// HostAddrs are the addresses of the machine that runs the Docker
	// daemon, always refused: they are not part of the user's declaration
	// (and not compared by the planner), but what the driver found.
	HostAddrs []string `json:"hostAddrs,omitempty"`
	// Networks are the Docker networks the proxy's container joined
	// (docker.networks), as the driver read them from the daemon when it
	// wrote the policy. Not part of the declaration either: the planner
	// compares the networks' names, read from the container.
	Networks []Network `json:"networks,omitempty"`
	// HostPorts are the ports on the host's loopback the agent reaches as
	// spec.HostAlias:PORT (network.hostPorts), through the host relay
	// (Options.HostRelay); no other port of the host, whatever the rules.
	HostPorts []int `json:"hostPorts,omitempty"`
	// Services are the sandbox's services' ports by name: reached as
	// NAME:PORT through the service's own parked connections
	// (Proxy.ServeServiceSockets), never resolved or dialled.
	Services map[string][]int `json:"services,omitempty"`
}

// Network is one Docker network the proxy joined. An address in one of
// its subnets is an exception to BlockCIDRs, for a destination an exact
// rule allows (a name, not a wildcard) or under policy allow: the
// containers on it are what the user named the network for, found by
// Docker's embedded DNS. Its gateways are the Docker host's addresses on
// it, always refused.
type Network struct {
	Name     string   `json:"name"`
	Subnets  []string `json:"subnets"`
	Gateways []string `json:"gateways,omitempty"`
}

// PolicyOf is the proxy's policy for a sandbox: the file's rules with the
// agent's hosts and presets, the blocked ranges, and hostAddrs (the
// addresses of the machine the sandbox runs on, always refused).
func PolicyOf(sp *spec.Spec, hostAddrs []string) Policy {
	p := Policy{Default: sp.Network.Policy, Allow: []string{}, Deny: []string{}, BlockCIDRs: []string{}, HostAddrs: hostAddrs}
	for _, r := range sp.Network.AllowRules(sp.Agent) {
		p.Allow = append(p.Allow, r.Host)
	}
	p.Deny = append(p.Deny, sp.Network.Deny...)
	sort.Strings(p.Deny)
	for _, c := range sp.Network.BlockCIDRs {
		p.BlockCIDRs = append(p.BlockCIDRs, c.String())
	}
	sort.Strings(p.BlockCIDRs)
	p.HostPorts = slices.Sorted(slices.Values(sp.Network.HostPorts))
	for name, s := range sp.Services {
		if p.Services == nil {
			p.Services = map[string][]int{}
		}
		p.Services[name] = slices.Sorted(slices.Values(s.Ports))
	}
	return p
}

// compiled is a parsed policy, immutable once built.
type compiled struct {
	allowAll bool
	allow    []rule
	deny     []rule
	// denyIPs are the deny rules that are IP literals: they refuse the
	// address whatever name resolved to it.
	denyIPs []rule
	// blocked are BlockCIDRs.
	blocked prefixes
	// refused are HostAddrs and the networks' gateways: refused whatever
	// the rules allow.
	refused prefixes
	// reach are the subnets of the networks the proxy joined: exceptions
	// to blocked for a destination an exact rule allows (see excepted).
	reach prefixes
	// hostPorts are Policy.HostPorts.
	hostPorts []int
	// services are Policy.Services.
	services map[string][]int
}

// rule is a host pattern of the policy, an IP literal in canonical form,
// with its text for the log.
type rule struct {
	spec.Host
	text string
}

// matches reports whether the rule covers a destination: a name pattern
// a name, an IP literal the same address.
func (r rule) matches(d dest) bool {
	if r.IP.IsValid() {
		return d.ip == r.IP && (r.Port == 0 || r.Port == d.port)
	}
	return !d.ip.IsValid() && r.Matches(d.host, d.port)
}

// LoadPolicy reads and compiles a policy file.
func LoadPolicy(path string) (*Policy, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	p, _, err := parsePolicy(path, data)
	return p, err
}

// parsePolicy decodes and compiles a policy; what names where it came from.
func parsePolicy(what string, data []byte) (*Policy, *compiled, error) {
	var p Policy
	if err := json.Unmarshal(data, &p); err != nil {
		return nil, nil, fmt.Errorf("%s: %v", what, err)
	}
	c, err := p.compile()
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %v", what, err)
	}
	return &p, c, nil
}

func (p *Policy) compile() (*compiled, error) {
	c := &compiled{}
	for _, hp := range p.HostPorts {
		if hp < 1 || hp > 65535 {
			return nil, fmt.Errorf("host port %d is not a port", hp)
		}
		c.hostPorts = append(c.hostPorts, hp)
	}
	for name, ports := range p.Services {
		if !spec.ServiceName(name) {
			return nil, fmt.Errorf("%q is not a service name", name)
		}
		if c.services == nil {
			c.services = map[string][]int{}
		}
		c.services[name] = slices.Clone(ports)
	}
	switch p.Default {
	case "allow":
		c.allowAll = true
	case "deny", "":
	default:
		return nil, fmt.Errorf("default must be allow or deny, not %q", p.Default)
	}
	for _, list := range []struct {
		in  []string
		out *[]rule
	}{{p.Allow, &c.allow}, {p.Deny, &c.deny}} {
		for _, s := range list.in {
			h, err := spec.ParseHost(s)
			if err != nil {
				return nil, err
			}
			if h.IP.IsValid() {
				h.IP = canonical(h.IP)
			}
			*list.out = append(*list.out, rule{h, h.String()})
		}
	}
	for _, r := range c.deny {
		if r.IP.IsValid() {
			c.denyIPs = append(c.denyIPs, r)
		}
	}
	for _, s := range p.BlockCIDRs {
		pfx, err := netip.ParsePrefix(s)
		if err != nil {
			return nil, fmt.Errorf("blockCIDRs: %v", err)
		}
		c.blocked.add(pfx.Masked())
	}
	if err := addAddrs(&c.refused, "hostAddrs", p.HostAddrs); err != nil {
		return nil, err
	}
	for _, n := range p.Networks {
		what := fmt.Sprintf("networks[%s]", n.Name)
		if err := addAddrs(&c.refused, what+".gateways", n.Gateways); err != nil {
			return nil, err
		}
		for _, s := range n.Subnets {
			pfx, err := netip.ParsePrefix(s)
			if err != nil || pfx.Addr().Zone() != "" {
				return nil, fmt.Errorf("%s.subnets: %q is not a CIDR range", what, s)
			}
			c.reach.add(netip.PrefixFrom(canonical(pfx.Addr()), pfx.Bits()).Masked())
		}
	}
	return c, nil
}

// addAddrs adds plain addresses (what names the list, for errors), in
// canonical form, to a set.
func addAddrs(ps *prefixes, what string, addrs []string) error {
	for _, s := range addrs {
		a, err := netip.ParseAddr(s)
		if err != nil || a.Zone() != "" {
			return fmt.Errorf("%s: %q is not an IP address", what, s)
		}
		a = canonical(a)
		ps.add(netip.PrefixFrom(a, a.BitLen()))
	}
	return nil
}

// Decision is the policy's answer for one host and port.
type Decision struct {
	Allow bool
	// Rule is the pattern that decided, or "default".
	Rule string
}

// decide applies the rules to a destination: deny beats allow; a host no
// rule names gets the default.
func (c *compiled) decide(d dest) Decision {
	for _, r := range c.deny {
		if r.matches(d) {
			return Decision{Allow: false, Rule: r.text}
		}
	}
	// The host's loopback and the services: the ports the file lists and
	// nothing else of them, whatever the allow rules or the default say.
	if d.hostAlias() {
		return Decision{Allow: slices.Contains(c.hostPorts, d.port), Rule: hostPortsRule}
	}
	if ports, ok := c.service(d); ok {
		return Decision{Allow: slices.Contains(ports, d.port), Rule: "services." + d.host}
	}
	for _, r := range c.allow {
		if r.matches(d) {
			return Decision{Allow: true, Rule: r.text}
		}
	}
	return Decision{Allow: c.allowAll, Rule: "default"}
}

// service returns the ports of the service d names, if it names one.
func (c *compiled) service(d dest) ([]int, bool) {
	if d.ip.IsValid() {
		return nil, false
	}
	ports, ok := c.services[d.host]
	return ports, ok
}

// refusal says why an address is not dialled; "" when it may be.
type refusal string

const (
	refBlocked refusal = "resolves to a blocked address"
	refDenied  refusal = "resolves to an address denied by policy"
	refZone    refusal = "resolves to an address with a zone"
	// refAlways is why an address the policy allows exactly is refused
	// all the same: the file may say 172.17.0.1, but that is the Docker
	// host. It keeps refBlocked's words, which say what happened.
	refAlways refusal = "resolves to a blocked address the proxy always refuses (unspecified, loopback, its own, the Docker host's or a joined network's gateway), whatever the policy allows"
)

// vet checks a canonical address a for destination d against the
// policy: the Docker host's addresses and the joined networks' gateways,
// the blocked ranges (unless excepted for d), then deny rules that are
// IP literals. It returns the deny rule that refused it, if one did.
func (c *compiled) vet(a netip.Addr, d dest) (refusal, string) {
	switch {
	case c.refused.contain(a) && c.excepted(a, d):
		return refAlways, ""
	case c.refused.contain(a), c.blocked.contain(a) && !c.excepted(a, d):
		return refBlocked, ""
	}
	for _, r := range c.denyIPs {
		if r.IP == a && (r.Port == 0 || r.Port == d.port) {
			return refDenied, r.text
		}
	}
	return "", ""
}

// excepted reports whether the policy lets d reach a although a blocked
// range holds it: d is that IP literal and an allow rule names exactly
// that address (on d's port, if the rule has one); or a lies in the
// subnet of a network the proxy joined and d is allowed by an exact
// rule or by policy allow. A name that resolves to a blocked address is
// never excepted by an IP rule (only the literal is); and under policy
// deny a name only a wildcard allows never reaches a joined network:
// whoever controls DNS under the wildcard would choose what it reaches.
func (c *compiled) excepted(a netip.Addr, d dest) bool {
	exact := c.exactlyAllowed(d)
	if d.ip.IsValid() && d.ip == a && exact {
		return true
	}
	return c.reach.contain(a) && (exact || c.allowAll)
}

// exactlyAllowed reports whether an allow rule that is no wildcard covers
// d (deny rules were applied before the address was looked at).
func (c *compiled) exactlyAllowed(d dest) bool {
	for _, r := range c.allow {
		if !r.Wildcard && r.matches(d) {
			return true
		}
	}
	return false
}

// prefixes is a set of ranges, kept by address family so that an
// address is compared with its own family's only.
type prefixes struct {
	v4, v6 []netip.Prefix
}

func (ps *prefixes) add(p netip.Prefix) {
	if p.Addr().Is4() {
		ps.v4 = append(ps.v4, p)
	} else {
		ps.v6 = append(ps.v6, p)
	}
}

// contain reports whether a is in one of the ranges.
func (ps *prefixes) contain(a netip.Addr) bool {
	list := ps.v6
	if a.Is4() {
		list = ps.v4
	}
	for _, p := range list {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// all lists the ranges, IPv4 first.
func (ps *prefixes) all() []netip.Prefix {
	return append(append([]netip.Prefix(nil), ps.v4...), ps.v6...)
}
