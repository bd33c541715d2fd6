// Package dockersandbox drives the Docker Desktop `docker sandbox` plugin
// (docker-sandboxes-cli.md §1.2, "G2"). Docker has deprecated it in favour
// of the standalone sbx, but it is still widely installed. The plugin has no
// create-time env and cannot remove a network rule, so env reaches the agent
// per exec and a removed rule replaces the sandbox (reconcile's
// DockerSandboxCaps).
package dockersandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"regexp"
	"sort"
	"strings"

	"github.com/sbxhq/sbx/driver/cliutil"
	"github.com/sbxhq/sbx/driver/runner"
	"github.com/sbxhq/sbx/reconcile"
	"github.com/sbxhq/sbx/spec"
)

// MinVersion is the oldest plugin supported (the first microVM plugin,
// §1.2); DeprecatedVersion is the first that only prints a deprecation
// notice (§0).
var (
	MinVersion        = cliutil.Version{0, 7, 1}
	DeprecatedVersion = cliutil.Version{0, 13, 0}
)

// Options configure the driver.
type Options struct {
	Runner *runner.Runner
	// Docker is the docker CLI that has the sandbox plugin.
	Docker string
}

// Driver is the docker-sandbox driver.
type Driver struct {
	opts Options
}

var _ reconcile.Driver = (*Driver)(nil)

// New returns a driver that runs opts.Docker sandbox ….
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
func (d *Driver) Name() string { return "docker-sandbox" }

// Caps is the plugin's table of what changes in place.
func (d *Driver) Caps() reconcile.Caps { return reconcile.DockerSandboxCaps() }

func (d *Driver) cmd(args ...string) []string {
	return append([]string{d.opts.Docker, "sandbox"}, args...)
}

// notFound matches the plugin's not-found message.
var notFound = regexp.MustCompile(`sandbox "[^"]*" not found`)

func (d *Driver) output(ctx context.Context, args ...string) ([]byte, error) {
	out, err := d.opts.Runner.Output(ctx, d.cmd(args...)...)
	var re *runner.Error
	if errors.As(err, &re) && notFound.MatchString(re.Stderr) {
		return out, fmt.Errorf("%w: %v", cliutil.ErrNotFound, err)
	}
	return out, err
}

// Version probes `docker sandbox version`, which prints
// "github.com/docker/sandboxes/cli-plugin v0.7.1 COMMIT" (§2.3).
func (d *Driver) Version(ctx context.Context) (string, error) {
	out, err := d.output(ctx, "version")
	if err != nil {
		return "", err
	}
	for _, f := range strings.Fields(string(out)) {
		if !strings.HasPrefix(f, "v") {
			continue
		}
		v, err := cliutil.ParseVersion(f)
		if err != nil {
			continue
		}
		switch {
		case v.Less(MinVersion):
			return "", fmt.Errorf("the docker sandbox plugin %s is too old: sbx needs %s or newer (Docker Desktop 4.58+)", v, MinVersion)
		case !v.Less(DeprecatedVersion):
			return "", fmt.Errorf("the docker sandbox plugin %s is deprecated and no longer runs sandboxes; use Docker's standalone sbx (driver: sbx)", v)
		}
		return v.String(), nil
	}
	return "", fmt.Errorf("cannot read the plugin version from %q", strings.TrimSpace(string(out)))
}

// BuildHash rejects template.build: the plugin loads no local images in its
// current versions (--load-local-template was removed, §1.2).
func (d *Driver) BuildHash(sp *spec.Spec) (string, error) {
	if sp.Template.Build != nil {
		return "", fmt.Errorf("sandbox %q: the docker-sandbox driver cannot use template.build (the plugin no longer loads local images); push the image and name it in template.image, or use the sbx or docker driver", sp.Name)
	}
	return "", nil
}

// vm is one entry of `docker sandbox ls --json` (§2.3): a VM and its
// agent, status and workspaces (":ro" suffixes possible). Stopped VMs omit
// workspaces (§2.3 example); Observe marks them unreported.
type vm struct {
	Name       string   `json:"name"`
	Agent      string   `json:"agent"`
	Status     string   `json:"status"`
	Workspaces []string `json:"workspaces"`
}

func (d *Driver) list(ctx context.Context) ([]vm, error) {
	out, err := d.output(ctx, "ls", "--json")
	if err != nil {
		return nil, err
	}
	// Both top-level keys are seen (§2.3, [3P]).
	var doc struct {
		VMs       []vm `json:"vms"`
		Sandboxes []vm `json:"sandboxes"`
	}
	if err := cliutil.DecodeJSON(out, &doc); err != nil {
		return nil, fmt.Errorf("docker sandbox ls --json: %v", err)
	}
	return append(doc.VMs, doc.Sandboxes...), nil
}

// Observe lists the sandboxes once. The plugin's network policy cannot be
// read back (its file format is undocumented, §3.5), so no per-sandbox
// call is made.
func (d *Driver) Observe(ctx context.Context, names []string) (map[string]*reconcile.Live, error) {
	vms, err := d.list(ctx)
	if err != nil {
		return nil, err
	}
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	live := map[string]*reconcile.Live{}
	for _, v := range vms {
		if !want[v.Name] {
			continue
		}
		l := &reconcile.Live{Name: v.Name, Exists: true, Status: v.Status, Agent: v.Agent}
		if len(v.Workspaces) == 0 {
			// Every sandbox has a workspace: an entry without any (a
			// stopped VM, §2.3) did not report them.
			l.Unreported = []reconcile.Field{reconcile.FieldWorkspace, reconcile.FieldMounts}
		}
		for i, w := range v.Workspaces {
			path, ro := strings.CutSuffix(w, ":ro")
			if i == 0 {
				l.Workspace = spec.Workspace{Path: path, ReadOnly: ro}
				continue
			}
			l.Mounts = append(l.Mounts, spec.Mount{Source: path, Target: path, ReadOnly: ro})
		}
		live[v.Name] = l
	}
	return live, nil
}

// Do carries out one step with the plugin's commands (§1.2).
func (d *Driver) Do(ctx context.Context, s reconcile.Step, sb *spec.Spec, secrets reconcile.Secrets) error {
	switch s.Kind {
	case reconcile.StepStop, reconcile.StepRemove:
		verb := map[reconcile.StepKind]string{reconcile.StepStop: "stop", reconcile.StepRemove: "rm"}[s.Kind]
		_, err := d.output(ctx, verb, s.Sandbox)
		if errors.Is(err, cliutil.ErrNotFound) {
			return nil
		}
		return err
	case reconcile.StepCreate:
		return d.create(ctx, sb)
	case reconcile.StepSetNetwork:
		return d.setNetwork(ctx, s)
	case reconcile.StepSetEnv, reconcile.StepSetSecrets:
		// Applied per exec: the plugin has no stored env.
		return nil
	case reconcile.StepVerify:
		vms, err := d.list(ctx)
		if err != nil {
			return err
		}
		for _, v := range vms {
			if v.Name == s.Sandbox {
				return nil
			}
		}
		return fmt.Errorf("sandbox %q is not listed after apply", s.Sandbox)
	}
	return fmt.Errorf("the docker-sandbox driver cannot %s", s.Kind)
}

func (d *Driver) create(ctx context.Context, sb *spec.Spec) error {
	args := []string{"create", "--name", sb.Name}
	if sb.Template.Image != "" {
		args = append(args, "--template", sb.Template.Image)
	}
	ws := sb.Workspace.Path
	if sb.Workspace.ReadOnly {
		ws += ":ro"
	}
	args = append(args, sb.Agent, ws)
	for _, m := range sb.Mounts {
		if m.Target != m.Source {
			return fmt.Errorf("mount %s: the docker-sandbox backend mounts extra workspaces at the same path as on the host; set target to %s", m.Source, m.Source)
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

// setNetwork adds rules with `docker sandbox network proxy` (§1.2). The
// plugin has no flag to remove a host rule; the planner replaces the
// sandbox instead. --allow-cidr removes a blocked range.
func (d *Driver) setNetwork(ctx context.Context, s reconcile.Step) error {
	n := s.Network
	if n == nil {
		return nil
	}
	if len(n.AllowRemove)+len(n.DenyRemove) > 0 {
		return errors.New("the docker-sandbox backend cannot remove a network rule")
	}
	args := []string{"network", "proxy", s.Sandbox}
	if n.Policy != "" {
		args = append(args, "--policy", n.Policy)
	}
	for _, h := range sorted(n.AllowAdd) {
		args = append(args, "--allow-host", h)
	}
	for _, h := range sorted(n.DenyAdd) {
		args = append(args, "--block-host", h)
	}
	for _, c := range sorted(n.BlockCIDRsAdd) {
		args = append(args, "--block-cidr", c)
	}
	for _, c := range sorted(n.BlockCIDRsRemove) {
		args = append(args, "--allow-cidr", c)
	}
	if len(args) == 3 {
		return nil
	}
	_, err := d.output(ctx, args...)
	return err
}

func sorted(ss []string) []string {
	out := append([]string(nil), ss...)
	sort.Strings(out)
	return out
}

// Exec runs argv in the sandbox (`docker sandbox exec`, §1.2).
func (d *Driver) Exec(ctx context.Context, name string, argv []string, o cliutil.ExecOptions) (int, error) {
	flags, env := cliutil.ExecArgs(o)
	args := append(append(append([]string{"exec"}, flags...), name), argv...)
	return cliutil.ExitCode(d.opts.Runner.Run(ctx, runner.Cmd{Args: d.cmd(args...), Env: env, Stdin: o.Stdin, Stdout: o.Stdout, Stderr: o.Stderr}))
}

// NetLog prints the plugin's network log (§2.4), which covers every
// sandbox, filtered to this one.
func (d *Driver) NetLog(ctx context.Context, name string, asJSON, follow bool, w io.Writer) error {
	if follow {
		return errors.New("the docker-sandbox backend cannot follow its network log")
	}
	out, err := d.output(ctx, "network", "log", "--json")
	if err != nil {
		return err
	}
	var doc struct {
		Entries []map[string]any `json:"entries"`
	}
	if err := cliutil.DecodeJSON(out, &doc); err != nil {
		return fmt.Errorf("docker sandbox network log --json: %v", err)
	}
	for _, e := range doc.Entries {
		if e["sandbox"] != name {
			continue
		}
		if asJSON {
			if err := cliutil.WriteJSONLine(w, e); err != nil {
				return err
			}
			continue
		}
		fmt.Fprintf(w, "%v %v %v %v\n", e["timestamp"], e["method"], e["url"], e["action"])
	}
	return nil
}

// EnvPerExec reports that the sandbox's env must be passed to every exec:
// the plugin stores none (§4.2).
func (d *Driver) EnvPerExec() bool { return true }

// Executable is the backend CLI the driver runs.
func (d *Driver) Executable() string { return d.opts.Docker }
