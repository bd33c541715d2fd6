// Package sbx drives Docker's standalone Docker Sandboxes CLI, also named
// sbx (microVM sandboxes). What it runs and reads follows the live
// captures in docker-sbx-evidence.md: rules are read by scope, keeping
// only the editable ones sbx added; a rule is removed by its ID; a deny is
// never sent while an allow of the same resource stands; ports keep sbx's
// dual-stack pairs; capabilities that differ between releases (--no-input,
// policy rm --force, the gemini agent) come from the installed version;
// secrets that name their hosts go to Docker's own credential proxy, in
// the sandbox's scope of its secret store, never in argv (secrets.go);
// and every output it parses is checked strictly (format.go).
package sbx

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/sbxhq/sbx/checkpoint"
	"github.com/sbxhq/sbx/driver"
	"github.com/sbxhq/sbx/driver/buildctx"
	"github.com/sbxhq/sbx/driver/cliutil"
	"github.com/sbxhq/sbx/driver/runner"
	"github.com/sbxhq/sbx/netlog"
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

// OwnVersion matches what `sbx version` of this project prints ("sbx
// v1.2.0 (go1.26.0 linux/amd64)", cmd/sbx/version.go; a test there keeps
// them together): the program found as Docker's sbx is another copy of
// this one.
var OwnVersion = regexp.MustCompile(`^sbx \S+ \(go[0-9][^ )]* [a-z0-9]+/[a-z0-9]+\)\n?$`)

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
	// noInput is whether the CLI has the global --no-input flag, from
	// Identify or Use.
	noInput bool
}

var (
	_ driver.Backend   = (*Driver)(nil)
	_ driver.Execer    = (*Driver)(nil)
	_ driver.NetLogger = (*Driver)(nil)
	_ driver.Prober    = (*Driver)(nil)
)

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

// Caps is the sbx backend's table of what changes in place, for the
// version Identify found (or Use was given).
func (d *Driver) Caps() reconcile.Caps {
	v, _ := d.cli.Known()
	return Capabilities(v)
}

// Executable is the backend CLI the driver runs.
func (d *Driver) Executable() string { return d.opts.Binary }

// factNoInput is the Identity fact that says the CLI has --no-input.
const factNoInput = "no-input"

// Identify probes `sbx version` ("v0.53.0 COMMIT"; other forms in
// cliutil.ReadVersion), rejecting versions older than MinVersion, and
// `sbx --help`, for whether the CLI has the global --no-input flag. Both
// run without global flags, which older releases may not have.
//
// Whether --no-input exists is asked, not inferred: the flag is on the live
// docs page but missing from every vendored reference and from the v0.47.0
// root help (evidence §0 #2, §2.1); the first release with it is not pinned
// down. A version gate would have to guess that release, and a wrong guess
// either fails every call ("unknown flag: --no-input", as cobra rejects any
// unknown flag) or drops a safeguard; the help of the installed binary says
// which.
func (d *Driver) Identify(ctx context.Context) (driver.Identity, error) {
	if d.opts.Binary == "" {
		return driver.Identity{}, errors.New("Docker's sbx CLI was not found")
	}
	out, err := d.cli.Output(ctx, "version")
	if err != nil {
		return driver.Identity{}, err
	}
	if OwnVersion.Match(out) {
		return driver.Identity{}, fmt.Errorf("%s is a copy of this sbx (github.com/sbxhq/sbx), not Docker's sbx CLI: put Docker's before it on PATH or set SBX_DOCKER_SBX to Docker's", d.opts.Binary)
	}
	v, err := d.cli.ReadVersion(out)
	if err != nil {
		return driver.Identity{}, err
	}
	if v.Less(MinVersion) {
		return driver.Identity{}, fmt.Errorf("Docker's sbx %s is too old: sbx needs %s or newer (update it, e.g. brew upgrade docker/tap/sbx)", v, MinVersion)
	}
	args := []string{"--help"}
	out, err = d.cli.Output(ctx, args...)
	if err != nil {
		return driver.Identity{}, err
	}
	has, err := parseHelp(d.cli.Source(ctx, args...), out)
	if err != nil {
		return driver.Identity{}, err
	}
	d.noInput = has
	return driver.Identity{Version: v.String(), Facts: map[string]string{factNoInput: strconv.FormatBool(has)}}, nil
}

// Use takes an identity probed earlier (sbx's cache), so version-gated
// behaviour needs no second probe.
func (d *Driver) Use(id driver.Identity) {
	if v, err := cliutil.ParseVersion(id.Version); err == nil {
		d.cli.UseVersion(v)
	}
	d.noInput = id.Facts[factNoInput] == "true"
}

// BuildHash is "" for an image template; a template built from a
// Dockerfile is built with docker and loaded with `sbx template load`.
func (d *Driver) BuildHash(sp *spec.Spec) (string, error) {
	if sp.Template.Build == nil {
		return "", nil
	}
	return buildctx.Hash(sp.Template.Build)
}

// call is one sbx command of a plan. A command that changes something gets
// --no-input where sbx has it, so that a prompt sbx adds in a later release
// fails with the command to run instead of waiting on, or cancelling from,
// a closed stdin; reads never prompt.
func (d *Driver) call(change bool, args ...string) reconcile.Call {
	if change {
		args = d.changeArgs(args...)
	}
	return d.cli.Call(args...)
}

// Calls turns a step into sbx commands.
func (d *Driver) Calls(s reconcile.Step, sb *spec.Spec, live *reconcile.Live) ([]reconcile.Call, error) {
	switch s.Kind {
	case reconcile.StepBuild:
		return d.buildCalls(sb), nil
	case reconcile.StepStop:
		// A stopped sandbox is normal (sbx stops idle ones itself), and
		// stopping it again is harmless.
		return []reconcile.Call{cliutil.IgnoreNotFound(d.call(true, "stop", s.Sandbox))}, nil
	case reconcile.StepStart:
		return d.startCalls(s.Sandbox)
	case reconcile.StepRemove:
		return []reconcile.Call{cliutil.IgnoreNotFound(d.call(true, "rm", "--force", s.Sandbox))}, nil
	case reconcile.StepCreate:
		return d.createCalls(sb)
	case reconcile.StepSetPorts:
		return d.portCalls(s, live)
	case reconcile.StepSetNetwork:
		return d.networkCalls(s, live)
	case reconcile.StepVerify:
		return []reconcile.Call{d.cli.VerifyCall(s.Sandbox, func(ctx context.Context) ([]string, error) {
			list, err := d.list(ctx, func(n string) bool { return n == s.Sandbox })
			var names []string
			for _, e := range list {
				names = append(names, e.Name)
			}
			return names, err
		}, "ls", "--json")}, nil
	}
	return nil, fmt.Errorf("the sbx driver cannot %s", s.Kind)
}

// createCalls is `sbx create` with every create-time field. Env values go
// in a 0600 env file, not argv, written when the call runs. Network rules
// are the next step's: one place adds rules, one rule per resource.
func (d *Driver) createCalls(sb *spec.Spec) ([]reconcile.Call, error) {
	args := []string{"create", "--name", sb.Name}
	if img := templateImage(sb); img != "" {
		args = append(args, "--template", img)
		if sb.Template.Build != nil || sb.Template.Checkpoint != "" {
			// Built and loaded, or saved: in sbx's own image store,
			// never a registry's (`create --pull never -t TAG`,
			// evidence §3.1).
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
	envAt := -1
	if len(sb.Env) > 0 {
		envAt = len(args) + 1
		args = append(args, "--env-file", "ENVFILE")
	}
	paths, err := cliutil.WorkspaceArgs(sb, "sbx")
	if err != nil {
		return nil, err
	}
	args = append(append(args, sb.Agent), paths...)
	c := d.call(true, args...)
	if envAt >= 0 {
		c.Desc = strings.Replace(c.Desc, "ENVFILE", "<env file, 0600>", 1)
		c.Run = func(ctx context.Context) error {
			f, err := cliutil.EnvFile(sb.Env)
			if err != nil {
				return err
			}
			defer os.Remove(f)
			a := append([]string(nil), args...)
			a[envAt] = f
			return d.call(true, a...).Run(ctx)
		}
	}
	return []reconcile.Call{c}, nil
}

// templateImage is the image to create from: the template's image, or the
// tag sbx gives a built one.
func templateImage(sb *spec.Spec) string {
	if sb.Template.Checkpoint != "" {
		return checkpoint.Ref(sb.Template.Checkpoint)
	}
	if sb.Template.Image != "" {
		return sb.Template.Image
	}
	if sb.Template.Build != nil {
		return "sbx-template-" + strings.ToLower(sb.Name) + ":latest"
	}
	return ""
}

// buildCalls build a template with docker and load it into sbx's image
// store, which is separate from the host's (docker image save + `sbx
// template load FILE`, evidence §3.1).
func (d *Driver) buildCalls(sb *spec.Spec) []reconcile.Call {
	img := templateImage(sb)
	build := append([]string{d.opts.Docker}, buildctx.DockerArgs(sb.Template.Build, img)...)
	save := []string{d.opts.Docker, "image", "save", img, "-o", "TAR"}
	load := d.call(true, "template", "load", "TAR")
	return []reconcile.Call{
		cliutil.StreamedCall(d.opts.Runner, build),
		{Desc: runner.Quote(save) + " && " + load.Desc + "  # through a temporary file", Run: func(ctx context.Context) error {
			dir, err := os.MkdirTemp("", "sbx-template-")
			if err != nil {
				return err
			}
			defer os.RemoveAll(dir)
			tar := filepath.Join(dir, "template.tar")
			if _, err := d.opts.Runner.Output(ctx, d.opts.Docker, "image", "save", img, "-o", tar); err != nil {
				return err
			}
			return d.call(true, "template", "load", tar).Run(ctx)
		}},
	}
}

// Exec runs argv in the sandbox (`sbx exec`, which starts a stopped sandbox
// first) and returns its exit status.
func (d *Driver) Exec(ctx context.Context, name string, argv []string, o driver.ExecOptions) (int, error) {
	return d.cli.Exec(ctx, name, argv, o)
}

// NetLog reads the sandbox's network log (`sbx policy log NAME --json`,
// evidence §1.6): one aggregate entry per host, denied ones first.
func (d *Driver) NetLog(ctx context.Context, name string, follow bool, emit func(netlog.Entry) error) error {
	if follow {
		return errors.New("the sbx backend cannot follow its network log")
	}
	args := []string{"policy", "log", name, "--json"}
	out, err := d.cli.Output(ctx, args...)
	if err != nil {
		return err
	}
	entries, err := parseLog(d.cli.Source(ctx, args...), out)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if err := emit(e.Entry); err != nil {
			return err
		}
	}
	return nil
}
