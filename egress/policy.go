// Package egress is the docker driver's network boundary: a filtering
// HTTP/HTTPS proxy that runs in its own container, outside the sandbox's
// reach, and the in-sandbox bridge that carries the sandbox's only way out
// (127.0.0.1:3128) over a Unix socket to it. The proxy allows or denies each
// CONNECT and absolute-URI request by host and port, checks every resolved
// address against blocked ranges and dials exactly the address it checked,
// and logs every decision as a JSON line.
package egress

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"os"

	"github.com/sbxhq/sbx/spec"
)

// Policy is the proxy's configuration file, written by the docker driver.
type Policy struct {
	Default    string   `json:"default"` // "deny" or "allow"
	Allow      []string `json:"allow"`
	Deny       []string `json:"deny"`
	BlockCIDRs []string `json:"blockCIDRs"`
}

// compiled is a parsed policy, immutable once built.
type compiled struct {
	allowAll bool
	allow    []spec.Host
	deny     []spec.Host
	blocked  []netip.Prefix
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
	switch p.Default {
	case "allow":
		c.allowAll = true
	case "deny", "":
	default:
		return nil, fmt.Errorf("default must be allow or deny, not %q", p.Default)
	}
	for _, list := range []struct {
		in  []string
		out *[]spec.Host
	}{{p.Allow, &c.allow}, {p.Deny, &c.deny}} {
		for _, s := range list.in {
			h, err := spec.ParseHost(s)
			if err != nil {
				return nil, err
			}
			*list.out = append(*list.out, h)
		}
	}
	for _, s := range p.BlockCIDRs {
		pfx, err := netip.ParsePrefix(s)
		if err != nil {
			return nil, fmt.Errorf("blockCIDRs: %v", err)
		}
		c.blocked = append(c.blocked, pfx.Masked())
	}
	return c, nil
}

// Decision is the policy's answer for one host and port.
type Decision struct {
	Allow bool
	// Rule is the pattern that decided, or "default".
	Rule string
}

// decide applies the rules: deny beats allow; a host no rule names gets
// the default.
func (c *compiled) decide(host string, port int) Decision {
	for _, h := range c.deny {
		if h.Matches(host, port) {
			return Decision{Allow: false, Rule: h.String()}
		}
	}
	for _, h := range c.allow {
		if h.Matches(host, port) {
			return Decision{Allow: true, Rule: h.String()}
		}
	}
	return Decision{Allow: c.allowAll, Rule: "default"}
}

// isBlocked reports whether an address is in a blocked range (IPv4-mapped
// IPv6 addresses are checked as IPv4).
func (c *compiled) isBlocked(ip netip.Addr) bool {
	ip = ip.Unmap()
	for _, p := range c.blocked {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}
