package sbx

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/sbxhq/sbx/driver/runner"
	"github.com/sbxhq/sbx/reconcile"
	"github.com/sbxhq/sbx/spec"
)

// probeHost is a host no rule should name: `policy check network` on it
// tells what the sandbox's default is. The .invalid TLD never resolves
// (RFC 2606), and the check sends nothing anyway ("without sending
// anything", evidence §3.11).
const probeHost = "sbx-deny-check.invalid:443"

// observed is what Observe read of an existing sandbox for the calls of
// a later step: its rules (with their IDs) and its port bindings.
type observed struct {
	rules []rule
	ports []portGroup
}

func detail(live *reconcile.Live) *observed {
	if live != nil {
		if o, ok := live.Detail.(*observed); ok {
			return o
		}
	}
	return &observed{}
}

// networkCalls change the sandbox-scoped rules (`sbx policy ... --sandbox`).
// The default is sbx's global policy: "allow" is a sandbox rule allowing
// "**", "deny" its absence. sbx has no per-sandbox blocked ranges, so
// blockCIDRs are deny rules for the ranges (CIDRs are valid resources, the
// v0.47.0 help says). From the rules Observe read (none for a sandbox this
// plan creates), in order:
//
//  1. remove each rule holding a removed resource by its ID (removal by ID
//     is what the captures use; one rule may hold several resources), with
//     --force where sbx asks first; the resources it also held that stay
//     are added again below;
//  2. add denies, then allows, one resource per rule so a later removal
//     takes only that resource. sbx refuses a deny that conflicts with an
//     allow in the same scope (evidence §2.1, v0.47.0), so removals come
//     first, and a deny that an allow sbx cannot remove (a kit's) would
//     conflict with is refused here, before anything runs;
//  3. for policy deny, ask `policy check network` whether a host no rule
//     names is denied: a global preset or rule allowing every host would
//     make the sandbox allow-all, whatever its own rules.
func (d *Driver) networkCalls(s reconcile.Step, live *reconcile.Live) ([]reconcile.Call, error) {
	n := s.Network
	if n == nil {
		return nil, nil
	}
	allowAdd, allowRm := n.AllowAdd, n.AllowRemove
	denyAdd := append(append([]string(nil), n.DenyAdd...), n.BlockCIDRsAdd...)
	denyRm := append(append([]string(nil), n.DenyRemove...), n.BlockCIDRsRemove...)
	switch n.Policy {
	case "allow":
		allowAdd = append(allowAdd, allHosts)
	case "deny":
		allowRm = append(allowRm, allHosts)
	}
	var calls []reconcile.Call
	rules := detail(live).rules
	remove := map[string][]string{"allow": allowRm, "deny": denyRm}
	var keptAllow, keptDeny []string
	for _, r := range rules {
		if !managed(r, s.Sandbox) {
			continue
		}
		var gone, kept []string
		for _, res := range r.Resources {
			if contains(remove[r.Decision], res) {
				gone = append(gone, res)
			} else {
				kept = append(kept, res)
			}
		}
		if len(gone) == 0 {
			continue
		}
		calls = append(calls, d.removeRule(s.Sandbox, r.ID))
		if r.Decision == "allow" {
			keptAllow = append(keptAllow, kept...)
		} else {
			keptDeny = append(keptDeny, kept...)
		}
	}
	allowAdd = append(keptAllow, allowAdd...)
	denyAdd = append(keptDeny, denyAdd...)
	for _, res := range denyAdd {
		for _, r := range rules {
			if r.Scope == "sandbox:"+s.Sandbox && r.Decision == "allow" && r.Status == "active" && !managed(r, s.Sandbox) && contains(r.Resources, res) {
				return nil, fmt.Errorf("cannot deny %s: rule %s of the sandbox's kit allows it and cannot be removed, and sbx refuses a deny that conflicts with an allow", res, ruleName(r))
			}
		}
	}
	for _, res := range denyAdd {
		calls = append(calls, d.call(true, "policy", "deny", "network", "--sandbox", s.Sandbox, res))
	}
	for _, res := range allowAdd {
		calls = append(calls, d.call(true, "policy", "allow", "network", "--sandbox", s.Sandbox, res))
	}
	if n.Policy == "deny" {
		calls = append(calls, d.requireDenied(s.Sandbox))
	}
	return calls, nil
}

// removeRule removes one rule by ID: `policy rm network --sandbox S --id
// ID`, with -f/--force from the release that asks first (forceVersion).
func (d *Driver) removeRule(sandbox, id string) reconcile.Call {
	args := []string{"policy", "rm", "network", "--sandbox", sandbox, "--id", id}
	if v, _ := d.cli.Known(); !v.Less(forceVersion) {
		args = append(args, "--force")
	}
	return d.call(true, args...)
}

// requireDenied checks with `policy check network --json` that the sandbox
// denies a host no rule names: the authoritative answer for the effective
// default, which the rule listing cannot give (the global fallback
// default-deny-all is not in a sandbox's listing, evidence §1.2).
func (d *Driver) requireDenied(sandbox string) reconcile.Call {
	args := []string{"policy", "check", "network", "--sandbox", sandbox, probeHost, "--json"}
	return reconcile.Call{Desc: runner.Quote(d.cli.Cmd(args...)) + "  # must answer denied", Run: func(ctx context.Context) error {
		out, err := d.cli.Output(ctx, args...)
		var re *runner.Error
		if err != nil && !(errors.As(err, &re) && re.ExitCode == 1) {
			return err
		}
		c, perr := parseCheck(d.cli.Source(ctx, args...), out)
		if perr != nil {
			return perr
		}
		if c.Allowed {
			return fmt.Errorf(`network.policy deny does not hold for sandbox %q: "%s" answers allowed for a host no sandbox rule names, so Docker's global policy allows every host; run "sbx policy reset", then "sbx policy init deny-all" (or balanced)`, sandbox, runner.Quote(d.cli.Cmd(args...)))
		}
		return nil
	}}
}

// publishSpec writes a port for `--publish` (evidence §3.7): a port with no
// host IP as /tcp (or /udp), which binds both 127.0.0.1 and ::1, as a
// docker-run-style port binds both address families; 127.0.0.1 and ::1 as
// tcp4/tcp6, which bind only that loopback (the host IP can then go: sbx
// needs HOST_PORT with a HOST_IP); any other host IP as written. Observe
// reads the bindings back the same way (groupBindings).
func publishSpec(p spec.Port) string {
	proto := p.Protocol
	switch p.HostIP {
	case "127.0.0.1":
		proto += "4"
	case "::1":
		proto += "6"
	}
	s := strconv.Itoa(p.ContainerPort) + "/" + proto
	if p.HostPort != 0 {
		s = strconv.Itoa(p.HostPort) + ":" + s
		if p.HostIP != "" {
			s = hostIP(p.HostIP) + ":" + s
		}
	}
	return s
}

func hostIP(ip string) string {
	if strings.Contains(ip, ":") {
		return "[" + ip + "]"
	}
	return ip
}

// portCalls unpublish, then publish (`sbx ports NAME --unpublish ...`,
// then `--publish ...`: mixing both in one call is undocumented). sbx
// needs the host port to unpublish ([HOST_IP:]HOST_PORT:SANDBOX_PORT), and
// a port with an ephemeral host port has one per loopback, so each removed
// port's bindings, as Observe listed them, are named exactly.
func (d *Driver) portCalls(s reconcile.Step, live *reconcile.Live) ([]reconcile.Call, error) {
	if s.Ports == nil {
		return nil, nil
	}
	var calls []reconcile.Call
	if len(s.Ports.Unpublish) > 0 {
		unpub := []string{"ports", s.Sandbox}
		for _, g := range detail(live).ports {
			for _, p := range s.Ports.Unpublish {
				if !samePort(p, g.port) {
					continue
				}
				for _, b := range g.bindings {
					unpub = append(unpub, "--unpublish", fmt.Sprintf("%s:%d:%d/%s", hostIP(b.HostIP), b.HostPort, b.SandboxPort, b.Protocol))
				}
				break
			}
		}
		if len(unpub) > 2 {
			calls = append(calls, d.call(true, unpub...))
		}
	}
	if len(s.Ports.Publish) > 0 {
		args := []string{"ports", s.Sandbox}
		for _, p := range s.Ports.Publish {
			args = append(args, "--publish", publishSpec(p))
		}
		calls = append(calls, d.call(true, args...))
	}
	return calls, nil
}

// samePort reports whether a planned port (from the live ports, its host
// port possibly left out) is a live group's.
func samePort(planned, live spec.Port) bool {
	return planned.ContainerPort == live.ContainerPort && planned.Protocol == live.Protocol &&
		planned.HostIP == live.HostIP && (planned.HostPort == 0 || planned.HostPort == live.HostPort)
}
