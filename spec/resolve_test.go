package spec_test

import (
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/sbxhq/sbx/spec"
)

func write(t testing.TB, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func defaultCIDRs() []netip.Prefix {
	var out []netip.Prefix
	for _, c := range spec.DefaultBlockCIDRs {
		out = append(out, netip.MustParsePrefix(c))
	}
	return out
}

// specOpts compares specs without their provenance, which
// TestProvenance checks.
var specOpts = cmp.Options{
	cmpopts.EquateComparable(netip.Prefix{}),
	cmpopts.IgnoreFields(spec.Spec{}, "Origins", "Declarations"),
}

func TestResolveDefaults(t *testing.T) {
	dir := t.TempDir()
	ws := filepath.Join(dir, "api")
	f := write(t, ws, "sandbox.yaml", "version: 1\nagent: claude\n")
	res, err := spec.Load([]string{f}, spec.Options{Schema: compile(t)})
	if err != nil {
		t.Fatal(err)
	}
	want := &spec.Spec{
		Files:       []string{f},
		Dir:         ws,
		Name:        "claude-api",
		NameDerived: true,
		Agent:       "claude",
		Driver:      "auto",
		Template:    spec.Template{Image: "docker/sandbox-templates:claude-code"},
		Workspace:   spec.Workspace{Path: ws},
		Network:     spec.Network{Policy: "deny", AgentHosts: true, BlockCIDRs: defaultCIDRs()},
		Docker:      spec.Docker{NoNewPrivileges: true},
		Protect:     true,
		Sensitive:   map[string]bool{},
	}
	if diff := cmp.Diff([]*spec.Spec{want}, res.Specs, specOpts); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestResolveLayersAndInterpolation(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "PROMPT.md", "do it\n")
	write(t, dir, "data/x", "")
	base := write(t, dir, "sandbox.yaml", `version: 1
name: api-box
agent: codex
template: {image: "myorg/agent:${TAG:-dev}", build: {context: ., dockerfile: PROMPT.md, args: {V: 1.26}}}
mounts: ["~/cache:/cache:ro", {source: ./data, target: /data}]
env:
  NODE_ENV: development
  DATABASE_URL: ${DATABASE_URL:-postgresql://localhost/app}
  TOKENISH: ${SECRET_THING}
  PORT: ${PORT:-3000}
  MODE: 0755
resources: {cpus: "${CPUS:-2}", memory: 8g}
ports: [3000, "127.0.0.1:8080:3000"]
network:
  allow: [GitHub.com, "*.npmjs.org"]
  presets: [golang]
loop:
  prompt: PROMPT.md
  maxIterations: 5
  completion: {promise: COMPLETE}
  iterationTimeout: 10m
`)
	write(t, dir, "home/cache/.keep", "")
	layer := write(t, dir, "ci.yaml", "env:\n  NODE_ENV: test\nnetwork:\n  allow: [example.com]\n")
	write(t, dir, "sandbox.local.yaml", "resources: {cpus: 4}\n")
	vars := map[string]string{"HOME": filepath.Join(dir, "home"), "SECRET_THING": "s3cret", "CPUS": "3"}
	res, err := spec.Load([]string{base, layer}, spec.Options{Schema: compile(t), LookupEnv: env(vars)})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Specs) != 1 {
		t.Fatalf("got %d specs, want 1", len(res.Specs))
	}
	s := res.Specs[0]
	want := &spec.Spec{
		Files:  []string{base, layer, filepath.Join(dir, "sandbox.local.yaml")},
		Dir:    dir,
		Name:   "api-box",
		Agent:  "codex",
		Driver: "auto",
		Template: spec.Template{Image: "myorg/agent:dev", Build: &spec.Build{
			Context: dir, Dockerfile: "PROMPT.md", Args: map[string]string{"V": "1.26"},
		}},
		Workspace: spec.Workspace{Path: dir},
		Mounts: []spec.Mount{
			{Source: filepath.Join(dir, "home/cache"), Target: "/cache", ReadOnly: true},
			{Source: filepath.Join(dir, "data"), Target: "/data"},
		},
		Env: map[string]string{
			"NODE_ENV":     "test",
			"DATABASE_URL": "postgresql://localhost/app",
			"TOKENISH":     "s3cret",
			"PORT":         "3000",
			"MODE":         "0755",
		},
		Resources: spec.Resources{CPUs: 4, Memory: 8 << 30},
		Ports: []spec.Port{
			{ContainerPort: 3000, Protocol: "tcp"},
			{HostIP: "127.0.0.1", HostPort: 8080, ContainerPort: 3000, Protocol: "tcp"},
		},
		Network: spec.Network{Policy: "deny", Allow: []string{"example.com"}, Presets: []string{"golang"}, AgentHosts: true, BlockCIDRs: defaultCIDRs()},
		Loop: &spec.Loop{
			Prompt:           filepath.Join(dir, "PROMPT.md"),
			PromptRoot:       dir,
			MaxIterations:    5,
			Completion:       spec.Completion{Promise: "COMPLETE"},
			IterationTimeout: 10 * time.Minute,
			Breaker:          spec.Breaker{NoProgress: 3, SameError: 5},
			Backoff:          spec.Backoff{Initial: 10 * time.Second, Max: 5 * time.Minute},
			Checkpoint:       spec.LoopCheckpoint{When: "never", Keep: 3},
		},
		Docker:  spec.Docker{NoNewPrivileges: true},
		Protect: true,
		HostVars: map[string][]string{
			"env.DATABASE_URL": {"DATABASE_URL"},
			"env.PORT":         {"PORT"},
			"env.TOKENISH":     {"SECRET_THING"},
			"template.image":   {"TAG"},
		},
		Sensitive:  map[string]bool{"env.TOKENISH": true},
		HostValues: []spec.HostValue{{Var: "SECRET_THING", Value: "s3cret"}, {Var: "CPUS", Value: "3"}},
	}
	if diff := cmp.Diff(want, s, specOpts); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestResolveSeveralSandboxes(t *testing.T) {
	dir := t.TempDir()
	a := write(t, dir, "a/sandbox.yaml", "version: 1\nagent: claude\n")
	b := write(t, dir, "b/sandbox.yaml", "version: 1\nagent: codex\n")
	res, err := spec.Load([]string{a, b}, spec.Options{Schema: compile(t)})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range res.Specs {
		names = append(names, s.Name)
	}
	if diff := cmp.Diff([]string{"claude-a", "codex-b"}, names); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestLocalFileNamedLoadsBase(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "sandbox.yaml", "version: 1\nagent: claude\n")
	local := write(t, dir, "sandbox.local.yaml", "name: mine\n")
	res, err := spec.Load([]string{local}, spec.Options{Schema: compile(t)})
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Specs[0].Name; got != "mine" {
		t.Errorf("name = %q, want mine", got)
	}
}

func TestOfflineNeeded(t *testing.T) {
	dir := t.TempDir()
	f := write(t, dir, "sandbox.yaml", "version: 1\nagent: claude\nenv:\n  DB: ${DATABASE_URL:?set it}\nmounts: [\"${DATA_DIR}:/data\"]\n")
	res, err := spec.Load([]string{f}, spec.Options{Schema: compile(t), Offline: true})
	if err != nil {
		t.Fatalf("offline load failed: %v", err)
	}
	want := spec.Diagnostics{
		{File: f, Line: 4, Col: 7, Path: "env.DB", Message: `variable "DATABASE_URL" must be set`},
		{File: f, Line: 5, Col: 10, Path: "mounts[0]", Message: `variable "DATA_DIR" must be set`},
	}
	if diff := cmp.Diff(want, res.Needed); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestAllowRules(t *testing.T) {
	n := spec.Network{Allow: []string{"api.anthropic.com", "example.com"}, Presets: []string{"pypi"}, AgentHosts: true}
	got := n.AllowRules("claude")
	var hosts []string
	for _, r := range got {
		if r.Host == "api.anthropic.com" && r.Source != "network.allow" {
			t.Errorf("api.anthropic.com from %q, want network.allow (first source wins)", r.Source)
		}
		hosts = append(hosts, r.Host+" <- "+r.Source)
	}
	want := []string{
		"api.anthropic.com <- network.allow",
		"claude.ai <- agent claude",
		"console.anthropic.com <- agent claude",
		"example.com <- network.allow",
		"files.pythonhosted.org <- preset pypi",
		"platform.claude.com <- agent claude",
		"pypi.org <- preset pypi",
	}
	if diff := cmp.Diff(want, hosts); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// TestProvenance checks that every value knows the file and position that
// wrote it after layers are merged, that a list replaced by a layer is
// that layer's, that removals name the nearest enclosing value, and that
// the files' digests are kept.
func TestProvenance(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "data/x", "")
	base := write(t, dir, "sandbox.yaml", `version: 1
agent: claude
mounts: ["./data:/data:ro"]
env:
  A: one
network:
  allow: [a.example.com, b.example.com]
`)
	local := write(t, dir, "sandbox.local.yaml", `mounts: ["./data:/data", "./data:/other:ro"]
env:
  B: ${HOME}
network:
  presets: [npm]
`)
	res, err := spec.Load([]string{base}, spec.Options{Schema: compile(t), LookupEnv: env(map[string]string{"HOME": dir})})
	if err != nil {
		t.Fatal(err)
	}
	s := res.Specs[0]
	at := func(file string, line, col int) string {
		return spec.Origin{File: file, Line: line, Col: col}.String()
	}
	tests := []struct {
		path string
		want string
	}{
		{"agent", at(base, 2, 8)},
		{"mounts", at(local, 1, 9)},
		{"mounts[1]", at(local, 1, 26)},
		{"env.A", at(base, 5, 6)},
		{"env.B", at(local, 3, 6)},
		{"network.allow[1]", at(base, 7, 26)},
		{"network.presets[0]", at(local, 5, 13)},
		{"network.deny", at(base, 7, 3)}, // the merged network mapping is the base file's
		{"docker.runtime", ""},
	}
	for _, tt := range tests {
		o, ok := s.OriginOf(tt.path)
		if got := o.String(); got != tt.want || ok != (tt.want != "") {
			t.Errorf("OriginOf(%q) = %q, %v; want %q", tt.path, got, ok, tt.want)
		}
	}
	o, _ := s.OriginOfItem("network.allow", func(v string) bool { return v == "b.example.com" })
	if got, want := o.String(), at(base, 7, 26); got != want {
		t.Errorf("OriginOfItem(b.example.com) = %q, want %q", got, want)
	}
	if o.Path != base {
		t.Errorf("origin path = %q, want %q", o.Path, base)
	}
	if diff := cmp.Diff(map[string][]string{"env.B": {"HOME"}}, s.HostVars); diff != "" {
		t.Errorf("HostVars (-want +got):\n%s", diff)
	}
	if len(s.Declarations) != 2 || s.Declarations[0].Path != base || s.Declarations[1].Path != local || len(s.Declarations[1].SHA256) != 64 {
		t.Errorf("Declarations = %+v", s.Declarations)
	}
	if !s.Writable(local) || s.Writable(filepath.Join(filepath.Dir(dir), "elsewhere")) {
		t.Errorf("Writable: the local file is in the workspace, a sibling directory is not")
	}
}

// TestBlankLocalOverlay: a sandbox.local.yaml with only comments is no
// overlay (the docker driver leaves such a file so the sandbox cannot
// create its own), while a blank sandbox file is still an error.
func TestBlankLocalOverlay(t *testing.T) {
	dir := t.TempDir()
	base := write(t, dir, "sandbox.yaml", "version: 1\nagent: claude\n")
	write(t, dir, "sandbox.local.yaml", "# personal overrides\n\n")
	res, err := spec.Load([]string{base}, spec.Options{Schema: compile(t)})
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Specs[0].Files; len(got) != 1 {
		t.Errorf("Files = %v, want only the base file", got)
	}
	other := write(t, dir, "other.yaml", "# nothing\n")
	if _, err := spec.Load([]string{other}, spec.Options{Schema: compile(t)}); err == nil {
		t.Errorf("a blank sandbox file must fail")
	}
}

// TestResolveExceptions: an exact private address in network.allow (IPv4
// or IPv6, with or without a port) is valid with the default blocked
// ranges, which stay as they are; docker.networks are read in order, and
// a sandbox.local.yaml overlay replaces them as it replaces any list.
func TestResolveExceptions(t *testing.T) {
	dir := t.TempDir()
	f := write(t, dir, "sandbox.yaml", `version: 1
agent: claude
driver: docker
network:
  allow: [172.18.0.5:4000, "[FD00::1]", 10.1.2.3, litellm:4000]
docker:
  networks: [llm-gateway, models]
`)
	res, err := spec.Load([]string{f}, spec.Options{Schema: compile(t), NoLocal: true})
	if err != nil {
		t.Fatal(err)
	}
	sp := res.Specs[0]
	want := spec.Network{Policy: "deny", AgentHosts: true, BlockCIDRs: defaultCIDRs(),
		Allow: []string{"172.18.0.5:4000", "fd00::1", "10.1.2.3", "litellm:4000"}}
	if diff := cmp.Diff(want, sp.Network, specOpts); diff != "" {
		t.Errorf("network (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"llm-gateway", "models"}, sp.Docker.Networks); diff != "" {
		t.Errorf("docker.networks (-want +got):\n%s", diff)
	}

	write(t, dir, "sandbox.local.yaml", "docker:\n  networks: [lan]\n")
	res, err = spec.Load([]string{f}, spec.Options{Schema: compile(t)})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"lan"}, res.Specs[0].Docker.Networks); diff != "" {
		t.Errorf("docker.networks with the overlay (-want +got):\n%s", diff)
	}
	if o, ok := res.Specs[0].OriginOfItem("docker.networks", func(v string) bool { return v == "lan" }); !ok || filepath.Base(o.File) != "sandbox.local.yaml" {
		t.Errorf("origin of docker.networks[0] = %+v, %v; want sandbox.local.yaml", o, ok)
	}
}
