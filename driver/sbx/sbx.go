// Package sbx drives Docker's standalone Docker Sandboxes CLI, also named
// sbx (microVM sandboxes; docker-sandboxes-cli.md §1.3). Every call passes
// --no-input so nothing ever prompts, and output is parsed defensively:
// notices around the JSON, either top-level key, unknown fields ignored.
package sbx

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/sbxhq/sbx/driver/buildctx"
	"github.com/sbxhq/sbx/driver/cliutil"
	"github.com/sbxhq/sbx/driver/runner"
	"github.com/sbxhq/sbx/reconcile"
	"github.com/sbxhq/sbx/spec"
)

// MinVersion is the oldest Docker sbx this driver supports: `ls --json`
// with ids (0.33), per-sandbox policy (0.32), create -e (0.39), and
// `policy ls --json` and `version --json` (0.42) — §7.
var MinVersion = cliutil.Version{0, 42, 0}

// Options configure the driver.
type Options struct {
	Runner *runner.Runner
	// Binary is Docker's sbx executable.
	Binary string
	// Docker is the docker CLI, used to build templates.
	Docker string
}

// Driver is the sbx driver.
type Driver struct {
	opts Options
}

var _ reconcile.Driver = (*Driver)(nil)

// New returns a driver that runs opts.Binary.
func New(opts Options) *Driver {
	if opts.Runner == nil {
		opts.Runner = &runner.Runner{}
	}
	if opts.Docker == "" {
		opts.Docker = "docker"
	}
	return &Driver{opts: opts}
}

// Name is the driver's name in sandbox.yaml.
func (d *Driver) Name() string { return "sbx" }

// Caps is the sbx backend's table of what changes in place.
func (d *Driver) Caps() reconcile.Caps { return reconcile.SbxCaps() }

func (d *Driver) sbx(args ...string) []string {
	return append([]string{d.opts.Binary, "--no-input"}, args...)
}

func (d *Driver) output(ctx context.Context, args ...string) ([]byte, error) {
	out, err := d.opts.Runner.Output(ctx, d.sbx(args...)...)
	if err != nil && isNotFound(err) {
		return out, fmt.Errorf("%w: %v", cliutil.ErrNotFound, err)
	}
	return out, err
}

// notFound matches the documented not-found messages (§2.11): "no sandbox
// named 'x'" (v0.39) and "sandbox 'x' not found" (v0.42+).
var notFound = regexp.MustCompile(`no sandbox named '|sandbox '[^']*' not found`)

func isNotFound(err error) bool {
	var re *runner.Error
	return errors.As(err, &re) && notFound.MatchString(re.Stderr)
}

// Version probes `sbx version` (a single line "v0.53.0 COMMIT" since 0.32,
// §2.10) and rejects versions older than MinVersion.
func (d *Driver) Version(ctx context.Context) (string, error) {
	if d.opts.Binary == "" {
		return "", errors.New("Docker's sbx CLI was not found")
	}
	out, err := d.output(ctx, "version")
	if err != nil {
		return "", err
	}
	fields := strings.Fields(string(out))
	for _, f := range fields {
		if v, err := cliutil.ParseVersion(f); err == nil && strings.HasPrefix(f, "v") {
			if v.Less(MinVersion) {
				return "", fmt.Errorf("Docker's sbx %s is too old: sbx needs %s or newer (update it, e.g. brew upgrade docker/tap/sbx)", v, MinVersion)
			}
			return v.String(), nil
		}
	}
	return "", fmt.Errorf("cannot read the version from %q", strings.TrimSpace(string(out)))
}

// BuildHash is "" for an image template; a template built from a
// Dockerfile is built with docker and loaded with `sbx template load`.
func (d *Driver) BuildHash(sp *spec.Spec) (string, error) {
	if sp.Template.Build == nil {
		return "", nil
	}
	return buildctx.Hash(sp.Template.Build)
}

// lsEntry is one sandbox of `sbx ls --json` (§2.6: name, id, agent,
// status, workspaces with ":ro" suffixes, ports). Other fields are ignored.
type lsEntry struct {
	Name       string      `json:"name"`
	Agent      string      `json:"agent"`
	Status     string      `json:"status"`
	Workspaces []string    `json:"workspaces"`
	Ports      []portEntry `json:"ports"`
}

// portEntry is a published port as `sbx ls --json` reports it (§2.6 [3P]).
type portEntry struct {
	HostIP      string `json:"host_ip"`
	HostPort    int    `json:"host_port"`
	SandboxPort int    `json:"sandbox_port"`
	Protocol    string `json:"protocol"`
}

// list runs `sbx ls --json` and accepts each observed shape (§2.6): a
// {"sandboxes": [...]} object, the G2-style {"vms": [...]}, or a bare array.
func (d *Driver) list(ctx context.Context) ([]lsEntry, error) {
	out, err := d.output(ctx, "ls", "--json")
	if err != nil {
		return nil, err
	}
	var raw any
	if err := cliutil.DecodeJSON(out, &raw); err != nil {
		return nil, fmt.Errorf("sbx ls --json: %v", err)
	}
	var doc struct {
		Sandboxes []lsEntry `json:"sandboxes"`
		VMs       []lsEntry `json:"vms"`
	}
	var entries []lsEntry
	if _, isArray := raw.([]any); isArray {
		err = cliutil.DecodeJSON(out, &entries)
	} else if err = cliutil.DecodeJSON(out, &doc); err == nil {
		entries = append(doc.Sandboxes, doc.VMs...)
	}
	if err != nil {
		return nil, fmt.Errorf("sbx ls --json: %v", err)
	}
	return entries, nil
}

// policyDoc is `sbx policy ls NAME --json` (0.42+). Docker does not
// document its schema (§2.8); the fields read are the rules' origin,
// decision and resource, and the global default, all else ignored.
type policyDoc struct {
	Default string `json:"default"`
	Rules   []struct {
		ID       string `json:"id"`
		Origin   string `json:"origin"`
		Decision string `json:"decision"`
		Resource string `json:"resource"`
	} `json:"rules"`
}

// allHosts is sbx's pattern for every host (§1.3 policy allow).
const allHosts = "**"

// Observe lists all sandboxes once and reads the policy of each declared
// sandbox that exists (one call each).
func (d *Driver) Observe(ctx context.Context, names []string) (map[string]*reconcile.Live, error) {
	entries, err := d.list(ctx)
	if err != nil {
		return nil, err
	}
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	live := map[string]*reconcile.Live{}
	for _, e := range entries {
		if !want[e.Name] {
			continue
		}
		l := &reconcile.Live{Name: e.Name, Exists: true, Status: e.Status, Agent: e.Agent}
		for i, w := range e.Workspaces {
			path, ro := strings.CutSuffix(w, ":ro")
			if i == 0 {
				l.Workspace = spec.Workspace{Path: path, ReadOnly: ro}
				continue
			}
			l.Mounts = append(l.Mounts, spec.Mount{Source: path, Target: path, ReadOnly: ro})
		}
		for _, p := range e.Ports {
			l.Ports = append(l.Ports, spec.Port{HostIP: p.HostIP, HostPort: p.HostPort, ContainerPort: p.SandboxPort, Protocol: protocol(p.Protocol)})
		}
		if err := d.readPolicy(ctx, l); err != nil {
			return nil, err
		}
		live[e.Name] = l
	}
	return live, nil
}

// protocol maps sbx's tcp4/tcp6 variants to the spec's tcp/udp.
func protocol(p string) string {
	return strings.TrimRight(p, "46")
}

func (d *Driver) readPolicy(ctx context.Context, l *reconcile.Live) error {
	out, err := d.output(ctx, "policy", "ls", l.Name, "--json")
	if err != nil {
		return err
	}
	var doc policyDoc
	if err := cliutil.DecodeJSON(out, &doc); err != nil {
		return fmt.Errorf("sbx policy ls %s --json: %v", l.Name, err)
	}
	l.Network.Policy = "deny"
	if doc.Default == "allow-all" {
		l.Network.Policy = "allow"
	}
	for _, r := range doc.Rules {
		if r.Origin != "sandbox:"+l.Name {
			continue
		}
		for _, res := range strings.Split(r.Resource, ",") {
			res = strings.TrimSpace(res)
			switch {
			case res == allHosts && r.Decision == "allow":
				l.Network.Policy = "allow"
			case r.Decision == "allow":
				l.Network.Allow = append(l.Network.Allow, res)
			case r.Decision == "deny" && isCIDR(res):
				// sbx has no per-sandbox blocked ranges; sbx writes them as
				// deny rules (see setNetwork).
				l.Network.BlockCIDRs = append(l.Network.BlockCIDRs, res)
			case r.Decision == "deny":
				l.Network.Deny = append(l.Network.Deny, res)
			}
		}
	}
	sort.Strings(l.Network.Allow)
	sort.Strings(l.Network.Deny)
	return nil
}

func isCIDR(s string) bool {
	_, err := netip.ParsePrefix(s)
	return err == nil
}

// Do carries out one step with the commands of §1.3.
func (d *Driver) Do(ctx context.Context, s reconcile.Step, sb *spec.Spec, secrets reconcile.Secrets) error {
	switch s.Kind {
	case reconcile.StepBuild:
		return d.build(ctx, sb)
	case reconcile.StepStop:
		_, err := d.output(ctx, "stop", s.Sandbox)
		if errors.Is(err, cliutil.ErrNotFound) {
			return nil
		}
		return err
	case reconcile.StepRemove:
		_, err := d.output(ctx, "rm", "--force", s.Sandbox)
		if errors.Is(err, cliutil.ErrNotFound) {
			return nil
		}
		return err
	case reconcile.StepCreate:
		return d.create(ctx, sb)
	case reconcile.StepSetPorts:
		return d.setPorts(ctx, s)
	case reconcile.StepSetNetwork:
		return d.setNetwork(ctx, s)
	case reconcile.StepSetSecrets:
		// Secrets reach the agent per exec (-e NAME, the value in sbx's
		// environment), never stored in the sandbox.
		return nil
	case reconcile.StepVerify:
		return d.verify(ctx, s.Sandbox)
	}
	return fmt.Errorf("the sbx driver cannot %s", s.Kind)
}

// create runs `sbx create` with every create-time field. Env values go in a
// 0600 env file, not argv.
func (d *Driver) create(ctx context.Context, sb *spec.Spec) error {
	args := []string{"create", "--name", sb.Name}
	if img := templateImage(sb); img != "" {
		args = append(args, "--template", img)
		if sb.Template.Build != nil {
			args = append(args, "--pull", "never")
		}
	}
	if sb.Resources.CPUs > 0 {
		args = append(args, "--cpus", strconv.Itoa(int(sb.Resources.CPUs+0.999)))
	}
	if sb.Resources.Memory > 0 {
		args = append(args, "--memory", spec.FormatSize(sb.Resources.Memory))
	}
	for _, p := range sb.Ports {
		args = append(args, "--publish", p.String())
	}
	for _, h := range sb.Network.Deny {
		args = append(args, "--deny-network", h)
	}
	if len(sb.Env) > 0 {
		f, err := cliutil.EnvFile(sb.Env)
		if err != nil {
			return err
		}
		defer os.Remove(f)
		args = append(args, "--env-file", f)
	}
	ws := sb.Workspace.Path
	if sb.Workspace.ReadOnly {
		ws += ":ro"
	}
	args = append(args, sb.Agent, ws)
	for _, m := range sb.Mounts {
		if m.Target != m.Source {
			return fmt.Errorf("mount %s: the sbx backend mounts extra paths at the same path as on the host; set target to %s", m.Source, m.Source)
		}
		p := m.Source
		if m.ReadOnly {
			p += ":ro"
		}
		args = append(args, p)
	}
	_, err := d.output(ctx, args...)
	return err
}

// templateImage is the image to create from: the template's image, or the
// tag sbx gives a built one.
func templateImage(sb *spec.Spec) string {
	if sb.Template.Image != "" {
		return sb.Template.Image
	}
	if sb.Template.Build != nil {
		return "sbx-template-" + strings.ToLower(sb.Name) + ":latest"
	}
	return ""
}

// build builds a template with docker and loads it into sbx's image store,
// which is separate from the host's (§5.2: docker image save + sbx
// template load).
func (d *Driver) build(ctx context.Context, sb *spec.Spec) error {
	b := sb.Template.Build
	img := templateImage(sb)
	args := []string{d.opts.Docker, "build", "-t", img, "-f", filepath.Join(b.Context, b.Dockerfile)}
	keys := make([]string, 0, len(b.Args))
	for k := range b.Args {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		args = append(args, "--build-arg", k+"="+b.Args[k])
	}
	if b.Target != "" {
		args = append(args, "--target", b.Target)
	}
	args = append(args, b.Context)
	if _, err := d.opts.Runner.Output(ctx, args...); err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "sbx-template-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	tar := filepath.Join(dir, "template.tar")
	if _, err := d.opts.Runner.Output(ctx, d.opts.Docker, "image", "save", img, "-o", tar); err != nil {
		return err
	}
	_, err = d.output(ctx, "template", "load", tar)
	return err
}

func (d *Driver) setPorts(ctx context.Context, s reconcile.Step) error {
	if s.Ports == nil {
		return nil
	}
	args := []string{"ports", s.Sandbox}
	for _, p := range s.Ports.Unpublish {
		args = append(args, "--unpublish", p.String())
	}
	for _, p := range s.Ports.Publish {
		args = append(args, "--publish", p.String())
	}
	_, err := d.output(ctx, args...)
	return err
}

// setNetwork changes the sandbox-scoped rules (§1.3 policy, --sandbox).
// The default policy is sbx's global one; "allow" is a sandbox rule
// allowing every host, "deny" the absence of it.
func (d *Driver) setNetwork(ctx context.Context, s reconcile.Step) error {
	n := s.Network
	if n == nil {
		return nil
	}
	var allowAdd, allowRm = n.AllowAdd, n.AllowRemove
	switch n.Policy {
	case "allow":
		allowAdd = append(allowAdd, allHosts)
	case "deny":
		if err := d.requireDenyDefault(ctx, s.Sandbox); err != nil {
			return err
		}
		allowRm = append(allowRm, allHosts)
	}
	if len(n.BlockCIDRsAdd)+len(n.BlockCIDRsRemove) > 0 {
		// sbx blocks private ranges itself and has no per-sandbox CIDR
		// rules; deny rules for the ranges are the closest it has.
		n.DenyAdd = append(append([]string(nil), n.DenyAdd...), n.BlockCIDRsAdd...)
		n.DenyRemove = append(append([]string(nil), n.DenyRemove...), n.BlockCIDRsRemove...)
	}
	for _, rm := range [][]string{allowRm, n.DenyRemove} {
		if len(rm) == 0 {
			continue
		}
		if _, err := d.output(ctx, "policy", "rm", "network", "--sandbox", s.Sandbox, "--resource", strings.Join(rm, ",")); err != nil && !ruleMissing(err) {
			return err
		}
	}
	if len(n.DenyAdd) > 0 {
		if _, err := d.output(ctx, "policy", "deny", "network", "--sandbox", s.Sandbox, strings.Join(n.DenyAdd, ",")); err != nil {
			return err
		}
	}
	if len(allowAdd) > 0 {
		if _, err := d.output(ctx, "policy", "allow", "network", "--sandbox", s.Sandbox, strings.Join(allowAdd, ",")); err != nil {
			return err
		}
	}
	return nil
}

// ruleMissing reports an rm of a rule that is already gone.
func ruleMissing(err error) bool {
	var re *runner.Error
	return errors.As(err, &re) && strings.Contains(strings.ToLower(re.Stderr), "no matching rule")
}

// requireDenyDefault checks that sbx's global default denies: a sandbox's
// deny-by-default rests on it, since sbx has no per-sandbox default.
func (d *Driver) requireDenyDefault(ctx context.Context, name string) error {
	out, err := d.output(ctx, "policy", "ls", name, "--json")
	if err != nil {
		return err
	}
	var doc policyDoc
	if err := cliutil.DecodeJSON(out, &doc); err != nil {
		return err
	}
	if doc.Default == "allow-all" {
		return errors.New(`network.policy deny needs sbx's global policy to deny by default, but it is allow-all; run "sbx policy reset" then "sbx policy init deny-all" (or balanced)`)
	}
	return nil
}

func (d *Driver) verify(ctx context.Context, name string) error {
	entries, err := d.list(ctx)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if e.Name == name {
			return nil
		}
	}
	return fmt.Errorf("sandbox %q is not listed after apply", name)
}

// Exec runs argv in the sandbox (`sbx exec`, §1.3) and returns its exit
// status.
func (d *Driver) Exec(ctx context.Context, name string, argv []string, o cliutil.ExecOptions) (int, error) {
	flags, env := cliutil.ExecArgs(o)
	args := append(append(append([]string{"exec"}, flags...), name), argv...)
	return cliutil.ExitCode(d.opts.Runner.Run(ctx, runner.Cmd{Args: d.sbx(args...), Env: env, Stdin: o.Stdin, Stdout: o.Stdout, Stderr: o.Stderr}))
}

// NetLog prints the sandbox's network log (`sbx policy log NAME`, §2.9).
func (d *Driver) NetLog(ctx context.Context, name string, asJSON, follow bool, w io.Writer) error {
	if follow {
		return errors.New("the sbx backend cannot follow its network log")
	}
	args := []string{"policy", "log", name}
	if asJSON {
		args = append(args, "--json")
	}
	out, err := d.output(ctx, args...)
	if err != nil {
		return err
	}
	_, err = w.Write(out)
	return err
}

// Executable is the backend CLI the driver runs.
func (d *Driver) Executable() string { return d.opts.Binary }
