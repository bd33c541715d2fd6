package egress

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestPolicyFileCompatible: a policy file written before hostAddrs
// existed still loads, and a policy without host addresses is written
// as before, so the planner's view of the live policy does not change.
func TestPolicyFileCompatible(t *testing.T) {
	old := `{"default":"deny","allow":["github.com"],"deny":[],"blockCIDRs":["10.0.0.0/8"]}`
	path := filepath.Join(t.TempDir(), "policy.json")
	if err := os.WriteFile(path, []byte(old), 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := LoadPolicy(path)
	if err != nil {
		t.Fatal(err)
	}
	want := &Policy{Default: "deny", Allow: []string{"github.com"}, Deny: []string{}, BlockCIDRs: []string{"10.0.0.0/8"}}
	if diff := cmp.Diff(want, p); diff != "" {
		t.Errorf("loaded (-want +got):\n%s", diff)
	}
	b, _ := json.Marshal(p)
	if string(b) != old {
		t.Errorf("written back as %s", b)
	}
	p.HostAddrs = []string{"192.0.2.1"}
	if b, _ := json.Marshal(p); !strings.Contains(string(b), `"hostAddrs":["192.0.2.1"]`) {
		t.Errorf("with host addresses: %s", b)
	}
}

func TestPolicyCompileErrors(t *testing.T) {
	for _, tt := range []struct {
		pol  Policy
		want string
	}{
		{Policy{HostAddrs: []string{"192.0.2.1/32"}}, `hostAddrs: "192.0.2.1/32" is not an IP address`},
		{Policy{HostAddrs: []string{"fe80::1%eth0"}}, `hostAddrs: "fe80::1%eth0" is not an IP address`},
		{Policy{HostAddrs: []string{"docker.host"}}, `hostAddrs: "docker.host" is not an IP address`},
		{Policy{BlockCIDRs: []string{"10.0.0.1"}}, `blockCIDRs: netip.ParsePrefix("10.0.0.1"): no '/'`},
		{Policy{Deny: []string{"http://x.example/"}}, `write a host name, not a URL`},
		{Policy{Networks: []Network{{Name: "llm", Subnets: []string{"172.30.0.1"}}}}, `networks[llm].subnets: "172.30.0.1" is not a CIDR range`},
		{Policy{Networks: []Network{{Name: "llm", Subnets: []string{"172.30.0.0/16"}, Gateways: []string{"172.30.0.1/32"}}}}, `networks[llm].gateways: "172.30.0.1/32" is not an IP address`},
	} {
		_, err := tt.pol.compile()
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%+v: %v, want %q", tt.pol, err, tt.want)
		}
	}
}

// TestVet: host addresses and blocked ranges are blocked; deny rules that
// are IP literals refuse the address (on their port), in canonical form.
// An IP literal allowed exactly is an exception to the blocked ranges for
// that literal (and port) only, and the subnet of a joined network for a
// name an exact rule allows; the host's addresses and the networks'
// gateways stay refused whatever the rules allow.
func TestVet(t *testing.T) {
	pol := Policy{
		Default:    "deny",
		Allow:      []string{"10.9.9.9", "[fd00::5]:8443", "alias.test", "llm", "*.wild.test", "172.30.0.1", "93.184.217.1"},
		Deny:       []string{"93.184.215.34", "[::ffff:93.184.215.35]:443", "2606:2800:220:1::9", "x.example", "10.9.9.9:22"},
		BlockCIDRs: []string{"10.0.0.0/8", "172.16.0.0/12", "fc00::/7"},
		HostAddrs:  []string{"93.184.217.1", "::ffff:93.184.217.2"},
		Networks:   []Network{{Name: "llm", Subnets: []string{"172.30.0.0/16"}, Gateways: []string{"172.30.0.1"}}},
	}
	deny, err := pol.compile()
	if err != nil {
		t.Fatal(err)
	}
	pol.Default = "allow"
	allow, err := pol.compile()
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		c      *compiled
		addr   string
		target string // as a CONNECT authority
		why    refusal
		rule   string
	}{
		{deny, "10.1.2.3", "10.1.2.3:443", refBlocked, ""},
		{deny, "93.184.217.1", "a.test:443", refBlocked, ""},
		{deny, "93.184.217.2", "a.test:443", refBlocked, ""},
		{deny, "93.184.215.34", "a.test:80", refDenied, "93.184.215.34"},
		{deny, "93.184.215.35", "a.test:443", refDenied, "93.184.215.35:443"},
		{deny, "93.184.215.35", "a.test:80", "", ""},
		{deny, "2606:2800:220:1::9", "a.test:1", refDenied, "2606:2800:220:1::9"},
		{deny, "93.184.215.14", "a.test:443", "", ""},

		// The exact literal, in any spelling, on any port its rule allows.
		{deny, "10.9.9.9", "10.9.9.9:443", "", ""},
		{deny, "10.9.9.9", "[::ffff:10.9.9.9]:443", "", ""},
		{deny, "fd00::5", "[fd00::5]:8443", "", ""},
		{deny, "fd00::5", "[fd00::5]:443", refBlocked, ""},
		// Its neighbour, and a name resolving to it, are not excepted.
		{deny, "10.9.9.8", "10.9.9.8:443", refBlocked, ""},
		{deny, "10.9.9.9", "alias.test:443", refBlocked, ""},
		// A deny rule still refuses the excepted address.
		{deny, "10.9.9.9", "10.9.9.9:22", refDenied, "10.9.9.9:22"},
		// The host stays refused, with why, even allowed exactly.
		{deny, "93.184.217.1", "93.184.217.1:443", refAlways, ""},

		// A joined network's subnet, for names exact rules allow.
		{deny, "172.30.0.5", "llm:4000", "", ""},
		{deny, "172.30.0.5", "x.wild.test:443", refBlocked, ""},
		{deny, "172.30.0.5", "unlisted.test:443", refBlocked, ""},
		{deny, "172.31.0.5", "llm:4000", refBlocked, ""},
		// Its gateway is the Docker host.
		{deny, "172.30.0.1", "llm:4000", refAlways, ""},
		{deny, "172.30.0.1", "172.30.0.1:80", refAlways, ""},
		{deny, "172.30.0.1", "x.wild.test:80", refBlocked, ""},
		// Under policy allow, any name but those only a wildcard allows.
		{allow, "172.30.0.5", "unlisted.test:443", "", ""},
		{allow, "172.30.0.1", "unlisted.test:443", refAlways, ""},
		{allow, "10.9.9.8", "10.9.9.8:443", refBlocked, ""},
	} {
		d, err := parseAuthority(tt.target, 443)
		if err != nil {
			t.Fatal(err)
		}
		why, rule := tt.c.vet(mustAddr(tt.addr), d)
		if why != tt.why || rule != tt.rule {
			t.Errorf("vet(%s, %s) under %s = %q %q, want %q %q", tt.addr, tt.target, map[bool]string{true: "allow", false: "deny"}[tt.c.allowAll], why, rule, tt.why, tt.rule)
		}
	}
}
