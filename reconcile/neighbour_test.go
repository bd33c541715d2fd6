package reconcile

import (
	"net/netip"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sbxhq/sbx/spec"
)

// declared gives a spec its files: base (absolute) and, when local, the
// sandbox.local.yaml next to it.
func declared(sb *spec.Spec, base string, local bool) *spec.Spec {
	sb.Files = []string{base}
	sb.Dir = filepath.Dir(base)
	sb.Declarations = []spec.Declaration{{Path: base, SHA256: "x"}}
	if local {
		sb.Files = append(sb.Files, spec.LocalPath(base))
		sb.Declarations = append(sb.Declarations, spec.Declaration{Path: spec.LocalPath(base), SHA256: "y"})
	}
	return sb
}

// TestApprovalFor: an approval belongs to the files a sandbox was applied
// from, not to the name a file gives: a renamed declaration finds its
// file's approval, and a file that takes another file's sandbox's name
// does not get that sandbox's approval.
func TestApprovalFor(t *testing.T) {
	rec := func(name, base string) *Record {
		sb := baseSpec()
		sb.Name = name
		if base != "" {
			declared(sb, base, false)
		}
		return recordOf(t, sbxCaps(), sb)
	}
	tests := []struct {
		name      string
		approvals []*Record
		file      string
		declared  []string
		want      string // the approval's name, "" none
	}{
		{name: "its own name and file", approvals: []*Record{rec("api", "/src/api/sandbox.yaml")}, file: "/src/api/sandbox.yaml", want: "api"},
		{name: "nothing approved", file: "/src/api/sandbox.yaml"},
		{name: "renamed: the only approval of its file", approvals: []*Record{rec("api", "/src/api/sandbox.yaml")}, file: "/src/api/sandbox.yaml", declared: []string{"new"}, want: "api"},
		{name: "another file's sandbox's name", approvals: []*Record{rec("wide", "/src/wide/sandbox.yaml")}, file: "/src/api/sandbox.yaml", declared: []string{"wide"}},
		{name: "renamed to a sibling still declared", approvals: []*Record{rec("a", "/src/api/sandbox.yaml"), rec("b", "/src/api/sandbox.yaml")}, file: "/src/api/sandbox.yaml", declared: []string{"new", "b"}, want: "a"},
		{name: "renamed, two approvals of its file: neither", approvals: []*Record{rec("a", "/src/api/sandbox.yaml"), rec("b", "/src/api/sandbox.yaml")}, file: "/src/api/sandbox.yaml", declared: []string{"new"}},
		{name: "a record without declarations", approvals: []*Record{rec("api", "")}, file: "/src/api/sandbox.yaml", declared: []string{"api"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sb := baseSpec()
			sb.Name = "new"
			if len(tc.declared) == 0 {
				sb.Name = "api"
			}
			declared(sb, tc.file, false)
			names := tc.declared
			if len(names) == 0 {
				names = []string{sb.Name}
			}
			got := ""
			if r := ApprovalFor(sb, tc.approvals, names); r != nil {
				got = r.Name
			}
			if got != tc.want {
				t.Errorf("ApprovalFor = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestUnapprovedWidenings plays the hostile agent that renames the
// sandbox in a declaration it can write (name: NEW) and widens it, and
// the agent that rewrites a neighbour's declaration in a shared
// workspace: with no approval for the files, everything beyond the
// defaults is a widening as soon as any known sandbox could have written
// them, and every widening names who could have.
func TestUnapprovedWidenings(t *testing.T) {
	const base = "/src/api/sandbox.yaml"
	local := spec.Origin{File: "sandbox.local.yaml", Path: "/src/api/sandbox.local.yaml", Line: 2, Col: 5}
	hostile := func(sb *spec.Spec) {
		sb.Name = "new"
		sb.Secrets = nil
		sb.Env = map[string]string{"STOLEN": "x"}
		sb.HostVars = map[string][]string{"env.STOLEN": {"AWS_SECRET_ACCESS_KEY"}}
		sb.Mounts = []spec.Mount{{Source: "/", Target: "/hostroot", ReadOnly: true}}
		sb.Network = spec.Network{Policy: "allow", AgentHosts: true, BlockCIDRs: defaultPrefixes(t)}
		sb.Docker.Runtime = "runc"
		sb.Origins = map[string]spec.Origin{"name": local, "mounts[0]": local, "network.policy": local, "env.STOLEN": local, "docker.runtime": local}
		declared(sb, base, true)
	}
	neighbour := func(name, ws string, protected bool, decl string) Neighbour {
		sb := baseSpec()
		sb.Name = name
		sb.Workspace.Path = ws
		sb.Docker.Runtime = "runsc"
		declared(sb, decl, true)
		return Neighbour{Name: name, Spec: sb, Protected: protected}
	}
	// The default runtime is runc: from the defaults, only a file's
	// approval makes runsc → runc a widening.
	all := func(writers ...string) []Widening {
		return []Widening{
			{Path: "env.STOLEN", What: "env.STOLEN reads host environment variable AWS_SECRET_ACCESS_KEY", Origin: local.String(), FromSandbox: true, Writers: writers},
			{Path: "mounts[0]", What: "host path / mounted at /hostroot, read-only", Origin: local.String(), FromSandbox: true, Writers: writers},
			{Path: "network.policy", What: "network.policy allow: the sandbox may reach any host", Origin: local.String(), FromSandbox: true, Writers: writers},
		}
	}
	tests := []struct {
		name       string
		caps       Caps
		approved   *spec.Spec
		neighbours []Neighbour
		widens     []Widening
	}{
		{
			name: "first use: no sandbox could have written the files",
			caps: dockerCaps(),
		},
		{
			name:       "a sandbox whose workspace is elsewhere",
			caps:       dockerCaps(),
			neighbours: []Neighbour{neighbour("other", "/src/other", false, "/src/other/sandbox.yaml")},
		},
		{
			name:       "renamed by the sandbox that could write it (protection off)",
			caps:       dockerCaps(),
			neighbours: []Neighbour{neighbour("api", "/src/api", false, base)},
			widens:     all("api"),
		},
		{
			name:       "renamed on a driver that protects nothing",
			caps:       sbxCaps(),
			neighbours: []Neighbour{neighbour("api", "/src/api", false, base)},
			widens: []Widening{
				{Path: "env.STOLEN", What: "env.STOLEN reads host environment variable AWS_SECRET_ACCESS_KEY", Origin: local.String(), FromSandbox: true, Writers: []string{"api"}},
				{Path: "mounts[0]", What: "host path / mounted at /hostroot, read-only", Origin: local.String(), FromSandbox: true, Writers: []string{"api"}},
				{Path: "network.policy", What: "network.policy allow: the sandbox may reach any host", Origin: local.String(), FromSandbox: true, Writers: []string{"api"}},
			},
		},
		{
			name:       "a neighbour in the workspace protects only its own files",
			caps:       dockerCaps(),
			neighbours: []Neighbour{neighbour("api", "/src/api", true, base), neighbour("review", "/src/api", true, "/src/api/review.yaml")},
			widens:     all("review"),
		},
		{
			name:       "the only sandbox protects this file",
			caps:       dockerCaps(),
			neighbours: []Neighbour{neighbour("api", "/src/api", true, base)},
		},
		{
			name: "renamed, measured from its file's approval",
			caps: dockerCaps(),
			approved: func() *spec.Spec {
				sb := neighbour("api", "/src/api", false, base).Spec
				sb.Env = map[string]string{"STOLEN": "x"}
				sb.HostVars = map[string][]string{"env.STOLEN": {"AWS_SECRET_ACCESS_KEY"}}
				sb.Protect = false
				sb.Network = spec.Network{Policy: "deny", AgentHosts: true, BlockCIDRs: defaultPrefixes(t)}
				return sb
			}(),
			neighbours: []Neighbour{neighbour("api", "/src/api", false, base)},
			widens: []Widening{
				{Path: "docker.runtime", What: "runtime runc instead of gVisor (runsc)", Origin: local.String(), FromSandbox: true, Writers: []string{"api"}},
				{Path: "mounts[0]", What: "host path / mounted at /hostroot, read-only", Origin: local.String(), FromSandbox: true, Writers: []string{"api"}},
				{Path: "network.policy", What: "network.policy allow: the sandbox may reach any host", Origin: local.String(), FromSandbox: true, Writers: []string{"api"}},
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			want := baseSpec()
			hostile(want)
			d := desiredOf(t, want)
			d.Neighbours = tc.neighbours
			if tc.approved != nil {
				d.Approved = recordOf(t, tc.caps, tc.approved)
			}
			if diff := cmp.Diff(tc.widens, widenings(d, tc.caps, false)); diff != "" {
				t.Errorf("widenings (-want +got):\n%s", diff)
			}
		})
	}
}

func defaultPrefixes(t *testing.T) []netip.Prefix {
	t.Helper()
	var out []netip.Prefix
	for _, c := range spec.DefaultBlockCIDRs {
		p, err := spec.ParseCIDR(c)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, p)
	}
	return out
}
