package egress

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/sbxhq/sbx/spec"
)

// TestExceptions plays a hostile agent against a policy with the default
// blocked ranges and both kinds of exception: an IP literal allowed
// exactly (a model gateway at 10.1.2.3:4000), and a joined Docker network
// (llm, 172.30.0.0/16, gateway 172.30.0.1) whose containers are allowed
// by name. The agent tries the exception's neighbours, other ports,
// names that resolve into the exceptions, the network's gateway, and what
// the proxy always refuses. The harness's dialer records the address the
// proxy chose and never dials it. What is allowed is asked for with GET.
func TestExceptions(t *testing.T) {
	pol := Policy{
		Default: "deny",
		Allow: []string{"10.1.2.3:4000", "[fd00::7]", "litellm:4000", "alias.test", "*.wild.test", "gw.test",
			"172.30.0.1", "93.184.217.1", "127.0.0.1", "93.184.216.10"},
		BlockCIDRs: spec.DefaultBlockCIDRs,
		HostAddrs:  []string{"93.184.217.1"},
		Networks:   []Network{{Name: "llm", Subnets: []string{"172.30.0.0/16", "fd30::/64"}, Gateways: []string{"172.30.0.1", "fd30::1"}}},
	}
	dns := fakeDNS{
		"litellm":      {"172.30.0.5", "fd30::5"},
		"alias.test":   {"10.1.2.3"},
		"evil.test":    {"172.30.0.5"},
		"x.wild.test":  {"172.30.0.5"},
		"gw.test":      {"172.30.0.1", "fd30::1"},
		"outside.test": {"172.31.0.5"},
	}
	const (
		allowed = "allowed by policy"
		blocked = "resolves to a blocked address"
		always  = "the proxy always refuses"
		unlist  = "not in the allow list"
	)
	eachPath(t, func(t *testing.T, newHarness harnessFunc) {
		h := newHarness(t, pol, dns)
		h.setUpstream(hostUpstream(t))
		for _, tt := range []struct {
			name   string
			req    string
			status int
			reason string
			dialed []string
		}{
			{"the allowed literal", getReq("http://10.1.2.3:4000/v1/models", "x"), 200, allowed, []string{"10.1.2.3:4000"}},
			{"the allowed literal, mapped", getReq("http://[::ffff:10.1.2.3]:4000/", "x"), 200, allowed, []string{"10.1.2.3:4000"}},
			{"the allowed literal on another port", connectReq("10.1.2.3:22"), 403, unlist, nil},
			{"its neighbour", connectReq("10.1.2.4:4000"), 403, unlist, nil},
			{"a name resolving to it", connectReq("alias.test:4000"), 403, blocked, nil},
			{"an IPv6 literal, any port", getReq("http://[fd00::7]:8443/", "x"), 200, allowed, []string{"[fd00::7]:8443"}},

			{"a container on the joined network", getReq("http://litellm:4000/v1/models", "x"), 200, allowed, []string{"172.30.0.5:4000"}},
			{"the container on another port", connectReq("litellm:22"), 403, unlist, nil},
			{"a name the policy does not allow, resolving into the network", connectReq("evil.test:443"), 403, unlist, nil},
			{"a wildcard name resolving into the network", connectReq("x.wild.test:443"), 403, blocked, nil},
			{"a name resolving outside the network", connectReq("outside.test:443"), 403, unlist, nil},
			{"the network's gateway by name", connectReq("gw.test:443"), 403, always, nil},
			{"the network's gateway, allowed as a literal", connectReq("172.30.0.1:443"), 403, always, nil},

			{"the Docker host, allowed as a literal", connectReq("93.184.217.1:443"), 403, always, nil},
			{"loopback, allowed as a literal", connectReq("127.0.0.1:443"), 403, always, nil},
			{"the proxy's own address, allowed as a literal", connectReq("93.184.216.10:443"), 403, always, nil},
		} {
			t.Run(tt.name, func(t *testing.T) {
				h.reset()
				code, body := h.send(tt.req)
				if code != tt.status {
					t.Errorf("status %d (%q), want %d", code, body, tt.status)
				}
				dialed, _ := h.seen()
				if diff := cmp.Diff(tt.dialed, dialed); diff != "" {
					t.Errorf("dialled (-want +got):\n%s", diff)
				}
				entries := h.log.entries(t)
				if len(entries) != 1 || !strings.Contains(entries[0].Reason, tt.reason) {
					t.Errorf("logged %+v, want one entry whose reason holds %q", entries, tt.reason)
				}
			})
		}
	})
}
