package sbx

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sbxhq/sbx/reconcile"
	"github.com/sbxhq/sbx/spec"
)

// TestGroupBindings: a /tcp port is two live bindings, one per loopback,
// each with its own host port when it was ephemeral (evidence §1.3); sbx
// reads it back as the one port it published (publishSpec).
func TestGroupBindings(t *testing.T) {
	tests := []struct {
		name string
		in   []binding
		want []spec.Port
	}{
		{"dual stack ephemeral", []binding{{"127.0.0.1", 49152, 3000, "tcp"}, {"::1", 49153, 3000, "tcp"}},
			[]spec.Port{{HostPort: 49152, ContainerPort: 3000, Protocol: "tcp"}}},
		{"dual stack, v6 listed first", []binding{{"::1", 49153, 3000, "tcp"}, {"127.0.0.1", 49152, 3000, "tcp"}},
			[]spec.Port{{HostPort: 49152, ContainerPort: 3000, Protocol: "tcp"}}},
		{"ipv4-only sandbox", []binding{{"127.0.0.1", 8080, 3000, "tcp"}},
			[]spec.Port{{HostPort: 8080, ContainerPort: 3000, Protocol: "tcp"}}},
		{"two dual-stack ports on one sandbox port", []binding{{"127.0.0.1", 8080, 3000, "tcp"}, {"127.0.0.1", 8081, 3000, "tcp"}, {"::1", 8081, 3000, "tcp"}, {"::1", 8080, 3000, "tcp"}},
			[]spec.Port{{HostPort: 8080, ContainerPort: 3000, Protocol: "tcp"}, {HostPort: 8081, ContainerPort: 3000, Protocol: "tcp"}}},
		{"tcp4 and tcp6 keep their address", []binding{{"127.0.0.1", 8080, 3000, "tcp4"}, {"::1", 9000, 9000, "udp6"}},
			[]spec.Port{{HostIP: "127.0.0.1", HostPort: 8080, ContainerPort: 3000, Protocol: "tcp"}, {HostIP: "::1", HostPort: 9000, ContainerPort: 9000, Protocol: "udp"}}},
		{"another address", []binding{{"0.0.0.0", 8080, 3000, "tcp"}},
			[]spec.Port{{HostIP: "0.0.0.0", HostPort: 8080, ContainerPort: 3000, Protocol: "tcp"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []spec.Port
			for _, g := range groupBindings(tt.in) {
				got = append(got, g.port)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestPublishSpec(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want string
	}{
		{"3000", "3000/tcp"},
		{"8080:3000", "8080:3000/tcp"},
		{"3000/udp", "3000/udp"},
		{"127.0.0.1:8080:3000", "127.0.0.1:8080:3000/tcp4"},
		{"127.0.0.1::3000", "3000/tcp4"},
		{"[::1]:8080:3000", "[::1]:8080:3000/tcp6"},
		{"0.0.0.0:8080:3000", "0.0.0.0:8080:3000/tcp"},
	} {
		p, err := spec.ParsePort(tt.in)
		if err != nil {
			t.Fatal(err)
		}
		if got := publishSpec(p); got != tt.want {
			t.Errorf("publishSpec(%s) = %s, want %s", tt.in, got, tt.want)
		}
	}
}

// TestReadNetwork: only the editable rules sbx added to the sandbox's scope
// are its network (evidence §1.2, §5.1); kit and global allows are notes.
func TestReadNetwork(t *testing.T) {
	own := func(decision string, res ...string) rule {
		return rule{ID: "id-" + res[0], Scope: "sandbox:api", Type: "network", Decision: decision, Status: "active", Editable: true, CreatedVia: "added", Resources: res}
	}
	rules := []rule{
		own("allow", "a.example.com"),
		own("deny", "b.example.com", "10.0.0.0/8"),
		{ID: "old", Scope: "sandbox:api", Type: "network", Decision: "allow", Status: "active", Editable: true, Resources: []string{"c.example.com"}}, // 0.42: no provenance
		{ID: "inactive", Scope: "sandbox:api", Type: "network", Decision: "allow", Status: "inactive", Editable: true, CreatedVia: "added", Resources: []string{"d.example.com"}},
		{ID: "kit1", Name: "kit:api", Scope: "sandbox:api", Type: "network", Decision: "allow", Status: "active", CreatedVia: "provisioned", Resources: []string{"openrouter.ai"}},
		{ID: "other", Scope: "sandbox:web", Type: "network", Decision: "allow", Status: "active", Editable: true, CreatedVia: "added", Resources: []string{"e.example.com"}},
		{ID: "default-ai-services", Name: "default-ai-services", Scope: "global", Type: "network", Decision: "allow", Status: "active", Editable: true, CreatedVia: "default", Resources: []string{"x:443", "y:443"}},
		{ID: "g1", Scope: "global", Type: "network", Decision: "allow", Status: "active", Editable: true, CreatedVia: "added", Resources: []string{"shared.example.com"}},
		{ID: "fs", Scope: "global", Type: "filesystem:read", Decision: "allow", Status: "active", Editable: true, Resources: []string{"/**"}},
	}
	l := &reconcile.Live{Name: "api"}
	readNetwork(l, rules)
	want := reconcile.LiveNetwork{Policy: "deny", Allow: []string{"a.example.com", "c.example.com"}, Deny: []string{"b.example.com"}, BlockCIDRs: []string{"10.0.0.0/8"}}
	if diff := cmp.Diff(want, l.Network); diff != "" {
		t.Errorf("network (-want +got):\n%s", diff)
	}
	wantNotes := []string{
		"the sandbox's kit allows openrouter.ai (rule kit:api, which sbx cannot remove)",
		`Docker's global network policy also allows every sandbox default-ai-services (2 hosts); shared.example.com, whatever sandbox.yaml says ("sbx policy ls --json" lists them)`,
	}
	if diff := cmp.Diff(wantNotes, l.Notes); diff != "" {
		t.Errorf("notes (-want +got):\n%s", diff)
	}

	// A "**" allow: the sandbox's own is policy allow; a global one makes
	// every sandbox allow-all.
	l = &reconcile.Live{Name: "api"}
	readNetwork(l, []rule{own("allow", "**")})
	if l.Network.Policy != "allow" || len(l.Notes) != 0 {
		t.Errorf("own **: %+v %v", l.Network, l.Notes)
	}
	l = &reconcile.Live{Name: "api"}
	readNetwork(l, []rule{{ID: "default-allow-all", Scope: "global", Type: "network", Decision: "allow", Status: "active", Resources: []string{"**"}}})
	if l.Network.Policy != "allow" || len(l.Notes) != 1 {
		t.Errorf("global **: %+v %v", l.Network, l.Notes)
	}
}
