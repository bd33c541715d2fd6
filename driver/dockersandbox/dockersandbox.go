// Package dockersandbox drives the Docker Desktop `docker sandbox` plugin
// (docker-sandboxes-cli.md §1.2, "G2"). It is a legacy driver: Docker has
// removed the plugin from Docker Desktop ("The docker sandbox plugin was
// removed entirely from Docker Desktop", maintainer, docker/docs PR #25555,
// 2026-07-14; docker-sbx-evidence.md §2.2), so `driver: auto` never picks
// it; it stays for those who still have the plugin. The plugin has no
// create-time env and cannot remove a network rule, so env reaches the
// agent per exec and a removed rule replaces the sandbox (reconcile's
// DockerSandboxCaps).
package dockersandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/sbxhq/sbx/driver"
	"github.com/sbxhq/sbx/driver/cliutil"
	"github.com/sbxhq/sbx/driver/runner"
	"github.com/sbxhq/sbx/netlog"
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
	cli *cliutil.CLI
}

var (
	_ driver.Backend    = (*Driver)(nil)
	_ driver.Execer     = (*Driver)(nil)
	_ driver.EnvPerExec = (*Driver)(nil)
	_ driver.NetLogger  = (*Driver)(nil)
	_ driver.Prober     = (*Driver)(nil)
)

// notFound matches the plugin's not-found message (unverified, evidence
// §2.2).
var notFound = regexp.MustCompile(`sandbox "[^"]*" not found`)

// New returns a driver that runs opts.Docker sandbox ….
func New(opts Options) *Driver {
	if opts.Runner == nil {
		opts.Runner = &runner.Runner{}
	}
	if opts.Docker == "" {
		opts.Docker = "docker"
	}
	return &Driver{cli: &cliutil.CLI{Runner: opts.Runner, Argv: []string{opts.Docker, "sandbox"}, Name: "docker sandbox", NotFound: notFound}}
}

// Name is the driver's name in sandbox.yaml.
func (d *Driver) Name() string { return "docker-sandbox" }

// Caps is the plugin's table of what changes in place.
func (d *Driver) Caps() reconcile.Caps { return Capabilities() }

// Executable is the backend CLI the driver runs.
func (d *Driver) Executable() string { return d.cli.Argv[0] }

// Identify probes `docker sandbox version`, which prints
// "github.com/docker/sandboxes/cli-plugin v0.7.1 COMMIT" (§2.3).
func (d *Driver) Identify(ctx context.Context) (driver.Identity, error) {
	out, err := d.cli.Output(ctx, "version")
	if err != nil {
		return driver.Identity{}, err
	}
	v, err := d.cli.ReadVersion(out)
	if err != nil {
		return driver.Identity{}, err
	}
	switch {
	case v.Less(MinVersion):
		return driver.Identity{}, fmt.Errorf("the docker sandbox plugin %s is too old: sbx needs %s or newer (Docker Desktop 4.58+)", v, MinVersion)
	case !v.Less(DeprecatedVersion):
		return driver.Identity{}, fmt.Errorf("the docker sandbox plugin %s is deprecated and no longer runs sandboxes; use Docker's standalone sbx (driver: sbx)", v)
	}
	return driver.Identity{Version: v.String()}, nil
}

// Use takes an identity probed earlier (sbx's cache).
func (d *Driver) Use(id driver.Identity) {
	if pv, err := cliutil.ParseVersion(id.Version); err == nil {
		d.cli.UseVersion(pv)
	}
}

// BuildHash is always "": the plugin cannot use a built template (its
// capability table says so, and the plan refuses template.build).
func (d *Driver) BuildHash(sp *spec.Spec) (string, error) { return "", nil }

// vm is one entry of `docker sandbox ls --json`.
type vm struct {
	Name, Agent, Status string
	Workspaces          []string
	// Reported is false for an entry without workspaces (a stopped VM).
	Reported bool
}

// parseList reads `docker sandbox ls --json` (docker-sbx-evidence.md §1.9,
// docs @00ba4d32): {"vms": [{name, agent, status, socket_path,
// sandbox_count, workspaces}]}, "sandboxes" as the key in [3P] parsers; a
// stopped VM has no workspaces. Every entry needs a name; the ones want
// selects also agent and status.
func parseList(src cliutil.Source, out []byte, want func(string) bool) ([]vm, error) {
	doc, root := cliutil.Decode(src, out)
	o := root.Object()
	key := "vms"
	if !o.Has("vms") && o.Has("sandboxes") {
		key = "sandboxes"
	}
	var vms []vm
	for _, e := range o.Field(key).Array(func(i int) string { return fmt.Sprintf("vm %d", i+1) }) {
		eo := e.Object()
		v := vm{Name: eo.Field("name").String()}
		if !want(v.Name) {
			continue
		}
		v.Agent, v.Status = eo.Field("agent").String(), eo.Field("status").String()
		if w, ok := eo.Opt("workspaces"); ok {
			v.Workspaces, v.Reported = w.Strings(), true
		}
		vms = append(vms, v)
	}
	return vms, doc.Err()
}

func (d *Driver) list(ctx context.Context, want func(string) bool) ([]vm, error) {
	args := []string{"ls", "--json"}
	out, err := d.cli.Output(ctx, args...)
	if err != nil {
		return nil, err
	}
	return parseList(d.cli.Source(ctx, args...), out, want)
}

// Observe lists the sandboxes once. The plugin's network policy cannot be
// read back (its file format is undocumented), so no per-sandbox call is
// made.
func (d *Driver) Observe(ctx context.Context, names []string) (map[string]*reconcile.Live, error) {
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	vms, err := d.list(ctx, func(n string) bool { return want[n] })
	if err != nil {
		return nil, err
	}
	live := map[string]*reconcile.Live{}
	for _, v := range vms {
		l := &reconcile.Live{Name: v.Name, Exists: true, Status: v.Status, Stopped: v.Status == "stopped", Agent: v.Agent}
		if !v.Reported || len(v.Workspaces) == 0 {
			// Every sandbox has a workspace: an entry without any (a
			// stopped VM) did not report them.
			l.Unreported = []reconcile.Field{reconcile.FieldWorkspace, reconcile.FieldMounts}
		}
		l.Workspace, l.Mounts = cliutil.Workspaces(v.Workspaces)
		live[v.Name] = l
	}
	return live, nil
}

// noStart says why the plugin cannot start a sandbox: its command tree is
// create, exec, ls, network, reset, rm, run, save, stop and version
// (docker-sandboxes-cli.md §1.2, data/cli/sandbox @bd033fc0), with no
// start; `run SANDBOX` attaches the agent, and its -d is hidden "for
// testing". Its exec runs in a stopped sandbox as the plugin does (the
// fake starts it first; UNCONFIRMED for the plugin).
const noStart = "the docker sandbox plugin has no start command (its commands are create, exec, ls, network, reset, rm, run, save, stop and version: docker-sandboxes-cli.md §1.2); 'sbx shell' and 'sbx loop' run in the sandbox as its exec does, and 'docker sandbox run NAME' starts it with the agent attached"

// Calls turns a step into the plugin's commands (§1.2).
func (d *Driver) Calls(s reconcile.Step, sb *spec.Spec, live *reconcile.Live) ([]reconcile.Call, error) {
	switch s.Kind {
	case reconcile.StepStop:
		return []reconcile.Call{cliutil.IgnoreNotFound(d.cli.Call("stop", s.Sandbox))}, nil
	case reconcile.StepStart:
		return nil, errors.New(noStart)
	case reconcile.StepRemove:
		return []reconcile.Call{cliutil.IgnoreNotFound(d.cli.Call("rm", s.Sandbox))}, nil
	case reconcile.StepCreate:
		args := []string{"create", "--name", sb.Name}
		if sb.Template.Image != "" {
			args = append(args, "--template", sb.Template.Image)
		}
		paths, err := cliutil.WorkspaceArgs(sb, "docker-sandbox")
		if err != nil {
			return nil, err
		}
		return []reconcile.Call{d.cli.Call(append(append(args, sb.Agent), paths...)...)}, nil
	case reconcile.StepSetNetwork:
		return d.networkCalls(s)
	case reconcile.StepVerify:
		return []reconcile.Call{d.cli.VerifyCall(s.Sandbox, func(ctx context.Context) ([]string, error) {
			vms, err := d.list(ctx, func(n string) bool { return n == s.Sandbox })
			var names []string
			for _, v := range vms {
				names = append(names, v.Name)
			}
			return names, err
		}, "ls", "--json")}, nil
	}
	return nil, fmt.Errorf("the docker-sandbox driver cannot %s", s.Kind)
}

// networkCalls add rules with `docker sandbox network proxy` (§1.2). The
// plugin has no flag to remove a host rule (the planner replaces the
// sandbox instead); --allow-cidr removes a blocked range.
func (d *Driver) networkCalls(s reconcile.Step) ([]reconcile.Call, error) {
	n := s.Network
	if n == nil {
		return nil, nil
	}
	if len(n.AllowRemove)+len(n.DenyRemove) > 0 {
		return nil, errors.New("the docker-sandbox backend cannot remove a network rule")
	}
	args := []string{"network", "proxy", s.Sandbox}
	if n.Policy != "" {
		args = append(args, "--policy", n.Policy)
	}
	for _, l := range []struct {
		flag  string
		items []string
	}{{"--allow-host", n.AllowAdd}, {"--block-host", n.DenyAdd}, {"--block-cidr", n.BlockCIDRsAdd}, {"--allow-cidr", n.BlockCIDRsRemove}} {
		items := append([]string(nil), l.items...)
		sort.Strings(items)
		for _, x := range items {
			args = append(args, l.flag, x)
		}
	}
	if len(args) == 3 {
		return nil, nil
	}
	return []reconcile.Call{d.cli.Call(args...)}, nil
}

// Exec runs argv in the sandbox (`docker sandbox exec`, §1.2).
func (d *Driver) Exec(ctx context.Context, name string, argv []string, o driver.ExecOptions) (int, error) {
	return d.cli.Exec(ctx, name, argv, o)
}

// parseLog reads `docker sandbox network log --json`
// (docker-sbx-evidence.md §1.11, docs): {"entries": [{timestamp, sandbox,
// type, method, url, action: "allowed"|"denied"}]}. Every entry needs its
// sandbox; the ones want selects also timestamp, method, url and action,
// and an action other than the two documented is an error.
func parseLog(src cliutil.Source, out []byte, want func(string) bool) ([]logEntry, error) {
	doc, root := cliutil.Decode(src, out)
	var entries []logEntry
	for i, e := range root.Object().Field("entries").Array(func(i int) string { return fmt.Sprintf("entry %d", i+1) }) {
		o := e.Object()
		sandbox := o.Field("sandbox").String()
		if !want(sandbox) {
			continue
		}
		n := netlog.Entry{Time: o.Field("timestamp").String(), Method: o.Field("method").String()}
		n.Host, n.Port = urlHostPort(o.Field("url").String())
		switch a := o.Field("action").String(); a {
		case "allowed":
			n.Decision = "allow"
		case "denied":
			n.Decision = "deny"
		default:
			if doc.Err() == nil {
				return nil, fmt.Errorf("%s: entry %d: field \"action\": unknown value %q (known: allowed, denied)", src, i+1, a)
			}
		}
		entries = append(entries, logEntry{Sandbox: sandbox, Entry: n})
	}
	return entries, doc.Err()
}

// logEntry is one entry of the plugin's log: whose, and what.
type logEntry struct {
	Sandbox string
	Entry   netlog.Entry
}

// urlHostPort splits a logged request's URL ("https://api.github.com/x",
// or "host:443" for a CONNECT) into host and port, the port from the
// scheme where the URL has none.
func urlHostPort(raw string) (string, int) {
	if !strings.Contains(raw, "://") {
		raw = "//" + raw
	}
	u, err := url.Parse(raw)
	if err != nil || u.Hostname() == "" {
		return raw, 0
	}
	port, err := strconv.Atoi(u.Port())
	if err != nil {
		port = map[string]int{"http": 80, "https": 443}[u.Scheme]
	}
	return u.Hostname(), port
}

// NetLog reads the plugin's network log, which covers every sandbox,
// filtered to this one.
func (d *Driver) NetLog(ctx context.Context, name string, follow bool, emit func(netlog.Entry) error) error {
	if follow {
		return errors.New("the docker-sandbox backend cannot follow its network log")
	}
	args := []string{"network", "log", "--json"}
	out, err := d.cli.Output(ctx, args...)
	if err != nil {
		return err
	}
	entries, err := parseLog(d.cli.Source(ctx, args...), out, func(s string) bool { return s == name })
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

// Probe runs the plugin's read-only commands whose output the driver
// parses and writes the redacted report of `sbx doctor --probe`
// (cliutil.Probe).
func (d *Driver) Probe(ctx context.Context, w io.Writer) error {
	p := cliutil.NewProbe(d.cli)
	p.Run(ctx, func(out []byte, exit int) error {
		if exit != 0 {
			return fmt.Errorf("exit status %d", exit)
		}
		_, err := d.cli.ReadVersion(out)
		return err
	}, "version")
	all := func(string) bool { return true }
	p.Run(ctx, func(out []byte, exit int) error {
		if exit != 0 {
			return fmt.Errorf("exit status %d", exit)
		}
		vms, err := parseList(d.cli.Source(ctx, "ls", "--json"), out, all)
		for _, v := range vms {
			p.Redact(cliutil.Sandbox, v.Name)
			ws, mounts := cliutil.Workspaces(v.Workspaces)
			p.Redact(cliutil.Path, ws.Path)
			for _, m := range mounts {
				p.Redact(cliutil.Path, m.Source)
			}
		}
		return err
	}, "ls", "--json")
	p.Run(ctx, func(out []byte, exit int) error {
		if exit != 0 {
			return fmt.Errorf("exit status %d", exit)
		}
		entries, err := parseLog(d.cli.Source(ctx, "network", "log", "--json"), out, all)
		for _, e := range entries {
			p.Redact(cliutil.Sandbox, e.Sandbox)
			p.Redact(cliutil.Host, e.Entry.Host)
		}
		return err
	}, "network", "log", "--json")
	if err := p.Write(w, d.Name()); err != nil {
		return err
	}
	return p.Err()
}

// EnvPerExec reports that the sandbox's env must be passed to every exec:
// the plugin stores none (§4.2).
func (d *Driver) EnvPerExec() bool { return true }
