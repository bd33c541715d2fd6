// Package sbx drives Docker's standalone Docker Sandboxes CLI, also named
// sbx (microVM sandboxes). What it runs and reads follows the live
// captures in docker-sbx-evidence.md: rules are read by scope, keeping
// only the editable ones sbx added; a rule is removed by its ID; a deny is
// never sent while an allow of the same resource stands; ports keep sbx's
// dual-stack pairs; capabilities that differ between releases (--no-input,
// policy rm --force, the gemini agent) come from the installed version;
// and every output it parses is checked strictly (format.go).
package sbx

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/sbxhq/sbx/driver/buildctx"
	"github.com/sbxhq/sbx/driver/cliutil"
	"github.com/sbxhq/sbx/driver/runner"
	"github.com/sbxhq/sbx/reconcile"
	"github.com/sbxhq/sbx/spec"
)

// MinVersion is the oldest Docker sbx this driver supports. 0.42.0 is the
// release whose behaviour the driver relies on: `--json` on `policy ls` and
// `policy check` (issue #290: "works in v0.42.1"), a port published without
// a protocol being tcp4 and `/tcp` meaning both loopbacks (release notes
// 0.42.0, evidence §3.7), the one not-found sentence, and devin; it also
// has per-sandbox policy (0.32), `ls --json` ids (0.33) and create
// -e/--env-file (0.39). Nothing newer is required: what 0.45 and 0.53
// added is probed (see noInput, forceVersion).
var MinVersion = cliutil.Version{0, 42, 0}

// forceVersion is the first release whose `policy rm network` asks for
// confirmation and so takes -f/--force: "confirmations everywhere" came in
// 0.45.0, a v0.38.0 capture removed rules by ID without a prompt, and the
// v0.47.0 help lists -f (evidence §0 #3). Sending --force to an older
// release would be an unknown flag.
var forceVersion = cliutil.Version{0, 45, 0}

// geminiRetired is the release that retired the built-in gemini agent
// (evidence §4, v0.53.0 release notes).
var geminiRetired = cliutil.Version{0, 53, 0}

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
	cli  *cliutil.CLI
	// noInput caches whether the CLI has the global --no-input flag; nil
	// until asked.
	noInput *bool
}

var _ reconcile.Driver = (*Driver)(nil)

// notFound matches the not-found messages: "no sandbox named 'x'" (v0.39)
// and "sandbox 'x' not found" (0.42+; "error: sandbox 'NAME' not found" in
// the v0.47.0 capture, evidence §2.1).
var notFound = regexp.MustCompile(`no sandbox named '|sandbox '[^']*' not found`)

// New returns a driver that runs opts.Binary.
func New(opts Options) *Driver {
	if opts.Runner == nil {
		opts.Runner = &runner.Runner{}
	}
	if opts.Docker == "" {
		opts.Docker = "docker"
	}
	return &Driver{opts: opts, cli: &cliutil.CLI{Runner: opts.Runner, Argv: []string{opts.Binary}, Name: "sbx", NotFound: notFound}}
}

// Name is the driver's name in sandbox.yaml.
func (d *Driver) Name() string { return "sbx" }

// Caps is the sbx backend's table of what changes in place.
func (d *Driver) Caps() reconcile.Caps { return reconcile.SbxCaps() }

// Executable is the backend CLI the driver runs.
func (d *Driver) Executable() string { return d.opts.Binary }

// Version probes `sbx version` ("v0.53.0 COMMIT"; other forms in
// cliutil.ReadVersion) and rejects versions older than MinVersion. It runs
// without global flags, which older releases may not have.
func (d *Driver) Version(ctx context.Context) (string, error) {
	if d.opts.Binary == "" {
		return "", errors.New("Docker's sbx CLI was not found")
	}
	out, err := d.cli.Output(ctx, "version")
	if err != nil {
		return "", err
	}
	v, err := d.cli.ReadVersion(out)
	if err != nil {
		return "", err
	}
	if v.Less(MinVersion) {
		return "", fmt.Errorf("Docker's sbx %s is too old: sbx needs %s or newer (update it, e.g. brew upgrade docker/tap/sbx)", v, MinVersion)
	}
	return v.String(), nil
}

// UseVersion takes the version sbx already knows (its version cache), so
// version-gated behaviour needs no second probe.
func (d *Driver) UseVersion(v string) {
	if pv, err := cliutil.ParseVersion(v); err == nil {
		d.cli.UseVersion(pv)
	}
}

// Preflight refuses, before anything runs, what this sbx cannot do for a
// sandbox: the gemini agent from the release that retired it (the spec
// keeps gemini, which the docker driver can still run), and a host IP
// without a host port, which sbx's port syntax cannot say. The version is
// the one Version probed or UseVersion was given.
func (d *Driver) Preflight(sp *spec.Spec) error {
	if v, known := d.cli.Known(); known && sp.Agent == "gemini" && !v.Less(geminiRetired) {
		return fmt.Errorf("sandbox %q: Docker's sbx %s no longer has the gemini agent (retired in %s); pick another agent, or use the docker driver, which can still run a gemini template", sp.Name, v, geminiRetired)
	}
	for i, p := range sp.Ports {
		if p.HostIP != "" && p.HostPort == 0 && p.HostIP != "127.0.0.1" && p.HostIP != "::1" {
			return fmt.Errorf("sandbox %q: ports[%d] %s: the sbx backend needs a host port with a host IP (HOST_IP:HOST_PORT:PORT)", sp.Name, i, p)
		}
	}
	return nil
}

// BuildHash is "" for an image template; a template built from a
// Dockerfile is built with docker and loaded with `sbx template load`.
func (d *Driver) BuildHash(sp *spec.Spec) (string, error) {
	if sp.Template.Build == nil {
		return "", nil
	}
	return buildctx.Hash(sp.Template.Build)
}

// noInputFlag reports whether this sbx has the global --no-input flag,
// asking `sbx --help` once. The flag is on the live docs page but missing
// from every vendored reference and from the v0.47.0 root help (evidence
// §0 #2, §2.1); the first release with it is not pinned down. A version
// gate would have to guess that release, and a wrong guess either fails
// every call ("unknown flag: --no-input", as cobra rejects any unknown
// flag) or drops a safeguard; the help of the installed binary says which.
// Only commands that change something get the flag: reads never prompt,
// and they run before this probe would be worth its call.
func (d *Driver) noInputFlag(ctx context.Context) (bool, error) {
	if d.noInput == nil {
		args := []string{"--help"}
		out, err := d.cli.Output(ctx, args...)
		if err != nil {
			return false, err
		}
		has, err := parseHelp(d.cli.Source(ctx, args...), out)
		if err != nil {
			return false, err
		}
		d.noInput = &has
	}
	return *d.noInput, nil
}

// change runs a command that changes something, with --no-input where sbx
// has it, so that a prompt sbx adds in a later release fails with the
// command to run instead of waiting on, or cancelling from, a closed stdin.
func (d *Driver) change(ctx context.Context, args ...string) ([]byte, error) {
	noInput, err := d.noInputFlag(ctx)
	if err != nil {
		return nil, err
	}
	if noInput {
		args = append([]string{"--no-input"}, args...)
	}
	return d.cli.Output(ctx, args...)
}

// Do carries out one step.
func (d *Driver) Do(ctx context.Context, s reconcile.Step, sb *spec.Spec, secrets reconcile.Secrets) error {
	switch s.Kind {
	case reconcile.StepBuild:
		return d.build(ctx, sb)
	case reconcile.StepStop:
		// A stopped sandbox is normal (sbx stops idle ones itself), and
		// stopping it again is harmless.
		_, err := d.change(ctx, "stop", s.Sandbox)
		if errors.Is(err, cliutil.ErrNotFound) {
			return nil
		}
		return err
	case reconcile.StepRemove:
		_, err := d.change(ctx, "rm", "--force", s.Sandbox)
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
		list, err := d.list(ctx, func(n string) bool { return n == s.Sandbox })
		if err != nil {
			return err
		}
		var names []string
		for _, e := range list {
			names = append(names, e.Name)
		}
		return cliutil.Listed(s.Sandbox, names)
	}
	return fmt.Errorf("the sbx driver cannot %s", s.Kind)
}

// create runs `sbx create` with every create-time field. Env values go in a
// 0600 env file, not argv. Network rules are the next step's: one place
// adds rules, one rule per resource.
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
		args = append(args, "--publish", publishSpec(p))
	}
	if len(sb.Env) > 0 {
		f, err := cliutil.EnvFile(sb.Env)
		if err != nil {
			return err
		}
		defer os.Remove(f)
		args = append(args, "--env-file", f)
	}
	paths, err := cliutil.WorkspaceArgs(sb, "sbx")
	if err != nil {
		return err
	}
	args = append(append(args, sb.Agent), paths...)
	_, err = d.change(ctx, args...)
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
// which is separate from the host's (docker image save + `sbx template
// load FILE`, evidence §3.1).
func (d *Driver) build(ctx context.Context, sb *spec.Spec) error {
	b := sb.Template.Build
	img := templateImage(sb)
	args := append([]string{d.opts.Docker}, buildctx.DockerArgs(b, img)...)
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
	_, err = d.change(ctx, "template", "load", tar)
	return err
}

// Exec runs argv in the sandbox (`sbx exec`, which starts a stopped sandbox
// first) and returns its exit status.
func (d *Driver) Exec(ctx context.Context, name string, argv []string, o cliutil.ExecOptions) (int, error) {
	return d.cli.Exec(ctx, name, argv, o)
}

// NetLog prints the sandbox's network log (`sbx policy log NAME`). The JSON
// document is checked against the shape sbx knows (evidence §1.6) and
// passed through.
func (d *Driver) NetLog(ctx context.Context, name string, asJSON, follow bool, w io.Writer) error {
	if follow {
		return errors.New("the sbx backend cannot follow its network log")
	}
	args := []string{"policy", "log", name}
	if asJSON {
		args = append(args, "--json")
	}
	out, err := d.cli.Output(ctx, args...)
	if err != nil {
		return err
	}
	if asJSON {
		if _, err := parseLog(d.cli.Source(ctx, args...), out); err != nil {
			return err
		}
	}
	_, err = w.Write(out)
	return err
}
