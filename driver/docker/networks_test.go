package docker

import (
	"context"
	"os/exec"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sbxhq/sbx/egress"
	"github.com/sbxhq/sbx/reconcile"
)

// TestRangesOf: a network's IPAM configuration in the proxy's terms. A
// subnet without a gateway in the inspection gets its first address
// refused, as Docker's default IPAM gives a bridge its gateway there.
func TestRangesOf(t *testing.T) {
	type cfg = struct{ Subnet, Gateway string }
	for _, tc := range []struct {
		name string
		cfgs []cfg
		want egress.Network
		err  string
	}{
		{"IPv4 with its gateway", []cfg{{"172.18.0.0/16", "172.18.0.1"}},
			egress.Network{Name: "n", Subnets: []string{"172.18.0.0/16"}, Gateways: []string{"172.18.0.1"}}, ""},
		{"dual stack", []cfg{{"172.18.0.0/16", "172.18.0.1"}, {"fd30::/64", "fd30::1"}},
			egress.Network{Name: "n", Subnets: []string{"172.18.0.0/16", "fd30::/64"}, Gateways: []string{"172.18.0.1", "fd30::1"}}, ""},
		{"no gateway given", []cfg{{"10.5.0.0/24", ""}},
			egress.Network{Name: "n", Subnets: []string{"10.5.0.0/24"}, Gateways: []string{"10.5.0.1"}}, ""},
		{"host bits in the subnet", []cfg{{"10.5.0.7/24", "10.5.0.254"}},
			egress.Network{Name: "n", Subnets: []string{"10.5.0.0/24"}, Gateways: []string{"10.5.0.254"}}, ""},
		{"no subnet", nil, egress.Network{}, "network n has no subnet"},
		{"a subnet that is not one", []cfg{{"nonsense", ""}}, egress.Network{}, `network n: subnet "nonsense"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			info := &networkInfo{Name: "n"}
			for _, c := range tc.cfgs {
				info.IPAM.Config = append(info.IPAM.Config, struct{ Subnet, Gateway string }{c.Subnet, c.Gateway})
			}
			got, err := rangesOf(info)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("rangesOf = %+v, %v; want an error with %q", got, err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestEgressRepairedWithNewPolicy: a proxy made again while the file's
// policy changed enforces the file's policy, not what the earlier proxy
// left on the policy volume.
func TestEgressRepairedWithNewPolicy(t *testing.T) {
	b := newBox(t, "e2e-repair-policy")
	b.apply(b.spec("network:\n  allow: [a.example]\n"))
	if out, err := exec.Command("docker", "rm", "-f", EgressName(b.name)).CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	p := b.apply(b.spec("network:\n  allow: [b.example]\n"))
	if c := p.Sandboxes[0]; len(c.Steps) == 0 || c.Steps[0].Kind != reconcile.StepRepair {
		t.Fatalf("plan with the proxy gone: %+v", c.Steps)
	}
	pol, _, err := b.d.readPolicy(context.Background(), b.name)
	if err != nil || pol == nil || strings.Join(pol.Allow, ",") != "b.example" {
		t.Errorf("the recreated proxy's policy: %+v, %v", pol, err)
	}
}
