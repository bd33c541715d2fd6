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
	} {
		_, err := tt.pol.compile()
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%+v: %v, want %q", tt.pol, err, tt.want)
		}
	}
}

// TestVet: host addresses and blocked ranges are blocked; deny rules that
// are IP literals refuse the address (on their port), in canonical form.
func TestVet(t *testing.T) {
	c, err := (&Policy{
		Deny:       []string{"93.184.215.34", "[::ffff:93.184.215.35]:443", "2606:2800:220:1::9", "x.example"},
		BlockCIDRs: []string{"10.0.0.0/8"},
		HostAddrs:  []string{"93.184.217.1", "::ffff:93.184.217.2"},
	}).compile()
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		addr string
		port int
		why  refusal
		rule string
	}{
		{"10.1.2.3", 443, refBlocked, ""},
		{"93.184.217.1", 443, refBlocked, ""},
		{"93.184.217.2", 443, refBlocked, ""},
		{"93.184.215.34", 80, refDenied, "93.184.215.34"},
		{"93.184.215.35", 443, refDenied, "93.184.215.35:443"},
		{"93.184.215.35", 80, "", ""},
		{"2606:2800:220:1::9", 1, refDenied, "2606:2800:220:1::9"},
		{"93.184.215.14", 443, "", ""},
	} {
		why, rule := c.vet(mustAddr(tt.addr), tt.port)
		if why != tt.why || rule != tt.rule {
			t.Errorf("vet(%s, %d) = %q %q, want %q %q", tt.addr, tt.port, why, rule, tt.why, tt.rule)
		}
	}
}
