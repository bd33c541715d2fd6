package sbx

import (
	"context"
	"fmt"
	"net/netip"
	"sort"
	"strings"

	"github.com/sbxhq/sbx/driver/cliutil"
	"github.com/sbxhq/sbx/reconcile"
	"github.com/sbxhq/sbx/spec"
)

// allHosts is sbx's resource for every host ("Use "**" to allow all
// hosts", policy allow network help).
const allHosts = "**"

// list runs `sbx ls --json`.
func (d *Driver) list(ctx context.Context, want func(string) bool) ([]sandbox, error) {
	args := []string{"ls", "--json"}
	out, err := d.cli.Output(ctx, args...)
	if err != nil {
		return nil, err
	}
	return parseList(d.cli.Source(ctx, args...), out, want)
}

// policy runs `sbx policy ls [NAME] --json`: a sandbox's rules and the
// global ones, or with name "" every rule.
func (d *Driver) policy(ctx context.Context, name string) ([]rule, error) {
	args := []string{"policy", "ls", "--json"}
	if name != "" {
		args = []string{"policy", "ls", name, "--json"}
	}
	out, err := d.cli.Output(ctx, args...)
	if err != nil {
		return nil, err
	}
	return parsePolicy(d.cli.Source(ctx, args...), out)
}

// Observe lists all sandboxes once and reads the policy of each declared
// sandbox that exists (one call each). For declared sandboxes that do not
// exist it reads the global policy once, so the plan of a new sandbox
// tells what Docker's global policy adds to it.
func (d *Driver) Observe(ctx context.Context, names []string) (map[string]*reconcile.Live, error) {
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	entries, err := d.list(ctx, func(n string) bool { return want[n] })
	if err != nil {
		return nil, err
	}
	live := map[string]*reconcile.Live{}
	for _, e := range entries {
		l := &reconcile.Live{Name: e.Name, Exists: true, Status: e.Status, Stopped: e.Status == "stopped", Agent: e.Agent}
		l.Workspace, l.Mounts = cliutil.Workspaces(e.Workspaces)
		o := &observed{ports: groupBindings(e.Ports)}
		for _, g := range o.ports {
			l.Ports = append(l.Ports, g.port)
		}
		rules, err := d.policy(ctx, e.Name)
		if err != nil {
			return nil, err
		}
		o.rules = rules
		l.Detail = o
		readNetwork(l, rules)
		live[e.Name] = l
	}
	var missing []string
	for _, n := range names {
		if live[n] == nil {
			missing = append(missing, n)
		}
	}
	if len(missing) > 0 {
		rules, err := d.policy(ctx, "")
		if err != nil {
			return nil, err
		}
		for _, n := range missing {
			l := &reconcile.Live{Name: n}
			readNetwork(l, rules)
			live[n] = &reconcile.Live{Name: n, Notes: l.Notes}
		}
	}
	return live, nil
}

// managed reports whether a rule is one sbx manages for the sandbox: an
// active network rule scoped to it ("scope" or "applies_to"
// "sandbox:NAME", evidence §1.2: origin is "scoped", never the name), that
// can be edited and was added by a user (created_via "added"; absent
// before 0.47). Kit rules (editable false, created_via provisioned) and
// global ones are not sbx's to remove, so they are never drift.
func managed(r rule, name string) bool {
	return r.Scope == "sandbox:"+name && r.Type == "network" && r.Status == "active" && r.Editable &&
		(r.CreatedVia == "added" || r.CreatedVia == "")
}

// readNetwork fills l's network from the rules of `policy ls NAME` (or, for
// a sandbox not yet created, the global ones): its own rules as the
// allow/deny lists, a "**" allow as policy allow, CIDR denies as blocked
// ranges (sbx has no per-sandbox CIDR list, see setNetwork). Rules it
// cannot change but that widen what the sandbox reaches become notes: a
// kit's allows, and the global allows (a preset's default-* groups, or
// global rules added by hand), which sandbox.yaml cannot narrow. A global
// "**" allow makes the sandbox allow-all whatever its own rules say.
func readNetwork(l *reconcile.Live, rules []rule) {
	l.Network.Policy = "deny"
	var global []string
	allowAll := ""
	for _, r := range rules {
		if r.Type != "network" || r.Status != "active" {
			continue
		}
		switch {
		case managed(r, l.Name):
			for _, res := range r.Resources {
				switch {
				case res == allHosts && r.Decision == "allow":
					l.Network.Policy = "allow"
				case r.Decision == "allow":
					l.Network.Allow = append(l.Network.Allow, res)
				case isCIDR(res):
					l.Network.BlockCIDRs = append(l.Network.BlockCIDRs, res)
				default:
					l.Network.Deny = append(l.Network.Deny, res)
				}
			}
		case r.Decision != "allow":
		case r.Scope == "sandbox:"+l.Name:
			l.Notes = append(l.Notes, fmt.Sprintf("the sandbox's kit allows %s (rule %s, which sbx cannot remove)", strings.Join(r.Resources, ", "), ruleName(r)))
		case r.Scope == "global" && contains(r.Resources, allHosts):
			allowAll = ruleName(r)
		case r.Scope == "global":
			global = append(global, describe(r))
		}
	}
	if allowAll != "" {
		l.Network.Policy = "allow"
		l.Notes = append(l.Notes, fmt.Sprintf(`Docker's global network policy allows every host (rule %s), so network.policy deny cannot hold on the sbx backend; run "sbx policy reset", then "sbx policy init deny-all" (or balanced)`, allowAll))
	}
	if len(global) > 0 {
		l.Notes = append(l.Notes, fmt.Sprintf(`Docker's global network policy also allows every sandbox %s, whatever sandbox.yaml says ("sbx policy ls --json" lists them)`, strings.Join(global, "; ")))
	}
	sort.Strings(l.Network.Allow)
	sort.Strings(l.Network.Deny)
	sort.Strings(l.Network.BlockCIDRs)
}

// describe names a global allow rule for a note: a preset's group
// ("default-ai-services", created_via "default", evidence §1.2) by its name
// and size, a rule added by hand by its hosts.
func describe(r rule) string {
	if r.CreatedVia == "default" || strings.HasPrefix(r.ID, "default-") {
		return fmt.Sprintf("%s (%d hosts)", r.Name, len(r.Resources))
	}
	return strings.Join(r.Resources, ", ")
}

func ruleName(r rule) string {
	if r.Name != "" {
		return r.Name
	}
	return r.ID
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

func isCIDR(s string) bool {
	_, err := netip.ParsePrefix(s)
	return err == nil
}

// portGroup is one port as sandbox.yaml says it and the host bindings that
// make it.
type portGroup struct {
	port     spec.Port
	bindings []binding
}

// groupBindings turns sbx's host bindings into the spec's ports. "tcp" (or
// "udp") without a host IP binds 127.0.0.1 and ::1, listed as two entries
// with their own host ports (evidence §1.3, §3.7; 127.0.0.1 alone on an
// IPv4-only sandbox): such a pair, or a lone half, is one port with no
// host IP, as the driver publishes a port without one (publishSpec).
// tcp4/tcp6 bindings are the spec's tcp on that address.
func groupBindings(bs []binding) []portGroup {
	var out []portGroup
	paired := map[int]bool{}
	for i, b := range bs {
		if paired[i] {
			continue
		}
		proto := strings.TrimRight(b.Protocol, "46")
		g := portGroup{port: spec.Port{HostIP: b.HostIP, HostPort: b.HostPort, ContainerPort: b.SandboxPort, Protocol: proto}, bindings: []binding{b}}
		if dualStack(b) {
			g.port.HostIP = ""
			// Its other half: the first unpaired binding of the other
			// loopback for the same port, with the same host port if
			// there is one.
			other := -1
			for j := i + 1; j < len(bs); j++ {
				c := bs[j]
				if paired[j] || !dualStack(c) || c.HostIP == b.HostIP || c.SandboxPort != b.SandboxPort || c.Protocol != b.Protocol {
					continue
				}
				if other < 0 || c.HostPort == b.HostPort {
					other = j
				}
			}
			if other >= 0 {
				paired[other] = true
				g.bindings = append(g.bindings, bs[other])
				if bs[other].HostIP == "127.0.0.1" {
					g.port.HostPort = bs[other].HostPort
				}
			}
		}
		out = append(out, g)
	}
	return out
}

// dualStack reports whether a binding is (half of) a port published as
// plain tcp/udp without a host IP.
func dualStack(b binding) bool {
	return (b.Protocol == "tcp" || b.Protocol == "udp") && (b.HostIP == "127.0.0.1" || b.HostIP == "::1")
}
