package fakesbx

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/pflag"

	"github.com/sbxhq/sbx/internal/fakecli"
	"github.com/sbxhq/sbx/internal/fakecli/fakestate"
)

// agents are the built-in agents and their template variants
// (docker-sandboxes-cli.md §5.2, §5.3): devin since 0.42.0, gemini retired
// in 0.53.0 (evidence §0 #9).
var agents = map[string]string{
	"claude": "claude-code", "codex": "codex", "copilot": "copilot", "cursor": "cursor-agent",
	"devin": "devin", "docker-agent": "docker-agent", "droid": "droid", "gemini": "gemini",
	"kiro": "kiro", "opencode": "opencode", "shell": "shell",
}

func (a *app) knownAgent(name string) bool {
	switch {
	case agents[name] == "":
		return false
	case name == "devin":
		return a.Version.AtLeast(vJSON)
	case name == "gemini":
		return !a.Version.AtLeast(vGeminiRetired)
	}
	return true
}

// isKit reports whether an agent positional is a kit reference (directory,
// ZIP, git or OCI, 0.42.0) rather than an agent name.
func isKit(s string) bool { return strings.ContainsAny(s, "/.:") }

// kitResources is what the kit of a built-in template allows for each new
// sandbox: a non-editable scoped rule named "kit:SANDBOX" (evidence §1.2,
// [3P-measured v0.38.0] for shell: openrouter.ai). The fake gives every
// built-in agent the same one (UNCONFIRMED for the others).
var kitResources = []string{"openrouter.ai"}

// createOpts are the flags `sbx create` and `sbx run` share
// (docker-sandboxes-cli.md §1.3, the v0.47.0 help), gated by the version
// that introduced them.
type createOpts struct {
	name, template, memory, pull string
	cpus                         int
	env, envFiles, publish, deny []string
	kits                         []string
	quiet                        bool
}

func (a *app) createFlags(fs *pflag.FlagSet) *createOpts {
	o := &createOpts{}
	fs.StringVar(&o.name, "name", "", "Name for the sandbox")
	fs.StringVarP(&o.template, "template", "t", "", "Container image to use for the sandbox")
	fs.StringVarP(&o.memory, "memory", "m", "", "Memory limit in binary units (e.g., 512m, 8g)")
	fs.IntVar(&o.cpus, "cpus", 0, "Number of CPUs to allocate to the sandbox (0 = auto)")
	fs.StringVar(&o.pull, "pull", "", "Image pull policy (always|missing|never)")
	fs.StringArrayVar(&o.kits, "kit", nil, "Additional kit reference")
	fs.StringArrayVarP(&o.publish, "publish", "p", nil, "Publish a sandbox port to the host")
	fs.StringArrayVar(&o.deny, "deny-network", nil, "Add a per-sandbox network deny rule at creation time")
	fs.StringArrayVarP(&o.env, "env", "e", nil, "Set an environment variable in the sandbox")
	fs.StringArrayVar(&o.envFiles, "env-file", nil, "Read environment variables from a file")
	fs.Bool("clone", false, "Run the agent on a private in-container clone of the host Git repository")
	fs.String("skills", "", "Shared skills store mode (off, readonly, readwrite)")
	fs.BoolVarP(&o.quiet, "quiet", "q", false, "Suppress verbose output")
	fs.BoolVar(&o.quiet, "no-progress", false, "Suppress progress output")
	return o
}

func (a *app) checkCreate(o *createOpts) error {
	if o.pull != "" && !slices.Contains([]string{"always", "missing", "never"}, o.pull) {
		return errf("invalid --pull value %q: must be always, missing or never", o.pull)
	}
	if o.cpus < 0 {
		return errf("--cpus must be 0 (auto) or a positive number")
	}
	if o.memory != "" {
		n, err := parseMemory(o.memory)
		if err != nil {
			return errf("invalid --memory %q: %v", o.memory, err)
		}
		if n < 512<<20 {
			return errf("invalid --memory %q: minimum is 512 MiB", o.memory)
		}
	}
	if o.name != "" {
		return a.checkName(o.name)
	}
	return nil
}

var nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9.-]*$`)

// checkName applies the name rule (docker-sandboxes-cli.md §5.1); the
// error wording is UNCONFIRMED.
func (a *app) checkName(name string) error {
	bad := func(why string) error { return errf("invalid sandbox name %q: %s", name, why) }
	switch {
	case len(name) < 2:
		return bad("must be at least two characters")
	case !nameRE.MatchString(name):
		return bad("must start with a letter or number and contain only letters, numbers, hyphens and periods")
	case name == "default":
		return bad("'default' is reserved")
	case a.Version.AtLeast(vAutoStop) && (len(name) > 63 || strings.HasSuffix(name, "-") || strings.HasSuffix(name, ".")):
		return bad("must be at most 63 characters and not end in a hyphen or period")
	}
	return nil
}

// parseMemory parses binary units: 512m, 8g, 1024k, bytes.
func parseMemory(s string) (int64, error) {
	s = strings.ToLower(strings.TrimSpace(s))
	mult := int64(1)
	if s != "" {
		if i := strings.IndexByte("kmgt", s[len(s)-1]); i >= 0 {
			mult = 1 << (10 * (i + 1))
			s = s[:len(s)-1]
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("expected a size such as 512m or 8g")
	}
	return n * mult, nil
}

// workspaces turns PATH[:ro] positionals into absolute host paths, which
// must exist.
func workspaces(paths []string) ([]fakestate.Workspace, error) {
	var out []fakestate.Workspace
	for _, p := range paths {
		p, ro := strings.CutSuffix(p, ":ro")
		abs, err := filepath.Abs(p)
		if err != nil {
			return nil, err
		}
		if !fileExists(abs) {
			return nil, errf("workspace path %q does not exist", abs) // UNCONFIRMED wording
		}
		out = append(out, fakestate.Workspace{Path: abs, ReadOnly: ro})
	}
	return out, nil
}

// newSandbox builds (but does not store) the sandbox create/run would make.
func (a *app) newSandbox(o *createOpts, agent string, paths []string) (*fakestate.Sandbox, error) {
	if !a.knownAgent(agent) && !isKit(agent) {
		if a.Version.AtLeast(vJSON) {
			// The 0.42.0 sentence pattern for agents too; gemini's
			// retirement message is UNCONFIRMED.
			return nil, errf("agent '%s' not found", agent)
		}
		return nil, errf("unknown agent %q", agent)
	}
	ws, err := workspaces(paths)
	if err != nil {
		return nil, err
	}
	name := o.name
	if name == "" {
		dir, _ := os.Getwd()
		if len(ws) > 0 {
			dir = ws[0].Path
		}
		name = filepath.Base(agent) + "-" + filepath.Base(dir)
	}
	var env fakecli.Env
	for _, f := range o.envFiles {
		if err := env.AddFile(f, a.Getenv); err != nil {
			return nil, errf("%v", err)
		}
	}
	for _, e := range o.env {
		if err := env.AddSpec(e, a.Getenv); err != nil {
			return nil, errf("%v", err)
		}
	}
	template := o.template
	if template == "" {
		// "use the -docker template variants by default" (§5.2).
		template = "docker/sandbox-templates:" + agents[agent] + "-docker"
		if agents[agent] == "" {
			template = agent
		}
	}
	return &fakestate.Sandbox{
		Name: name, Agent: agent, Template: template, Workspaces: ws, Env: env.Map(),
		CPUs: o.cpus, Memory: o.memory, Kits: o.kits, Pull: o.pull,
		CreatedAt: a.Now, StartedAt: a.Now, LastUsedAt: a.Now, Status: "running",
	}, nil
}

// addSandbox stores sb after the checks the daemon makes: an initialised
// policy, a free name, a template that exists when it may not be pulled,
// publishable ports. It attaches the kit's rule and --deny-network rules.
func (a *app) addSandbox(st *fakestate.State, sb *fakestate.Sandbox, o *createOpts) error {
	if !st.Policy.Initialized {
		// The first-run prompt (docker-sandboxes-cli.md §2.10) is not
		// modelled: the fake needs `policy init` first. Wording
		// UNCONFIRMED.
		return errf("the global network policy is not initialized; run: sbx policy init allow-all|balanced|deny-all")
	}
	if st.Find(sb.Name) != nil {
		return errf("sandbox already exists with this name") // issue #109
	}
	if o.pull == "never" && o.template != "" && findTemplate(st, o.template) < 0 && !strings.HasPrefix(o.template, "docker/sandbox-templates:") {
		// [3P-measured v0.47.0] "error: template 'hura-base:x' not found".
		return errf("template '%s' not found", o.template)
	}
	seq := st.Add(sb)
	sb.ID = fakestate.UUID(sb.Name, seq)
	for _, p := range o.publish {
		ports, err := a.publish(st, p)
		if err != nil {
			return err
		}
		sb.Ports = append(sb.Ports, ports...)
	}
	if agents[sb.Agent] != "" && a.Version.AtLeast("0.38.0") {
		sb.Network.Rules = append(sb.Network.Rules, fakestate.Rule{ID: st.NewID("rule"), Name: "kit:" + sb.Name,
			Decision: "allow", Resources: kitResources, Via: "provisioned", Fixed: true})
	}
	for _, h := range o.deny {
		// "adds the same kind of per-sandbox deny" as policy deny
		// --sandbox (evidence §1.2).
		sb.Network.Rules = append(sb.Network.Rules, fakestate.Rule{ID: st.NewID("rule"), Decision: "deny",
			Resources: splitList(h), Via: "added", Protocol: "tcp,udp"})
	}
	return nil
}

// create is `sbx create AGENT [PATH...]`. Since 0.43.0 a created sandbox
// stops itself when idle, so it rests stopped (evidence §3.2). Its output
// is the v0.47.0 capture's (evidence §3.1; image layers left out), a
// single line before.
func (a *app) create(args []string) error {
	fs := fakecli.Flags("create")
	o := a.createFlags(fs)
	args, err := a.parse(fs, args)
	if err != nil {
		return err
	}
	min := 2 // a workspace path is optional since 0.42.0
	if a.Version.AtLeast(vJSON) {
		min = 1
	}
	if err := argsCheck(args, min, -1); err != nil {
		return err
	}
	if err := a.checkCreate(o); err != nil {
		return err
	}
	sb, err := a.newSandbox(o, args[0], args[1:])
	if err != nil {
		return err
	}
	if err := a.Store.Update(func(st *fakestate.State) error {
		if err := a.addSandbox(st, sb, o); err != nil {
			return err
		}
		a.settle(sb)
		return nil
	}); err != nil {
		return err
	}
	switch {
	case o.quiet:
	case a.Version.AtLeast(vCaptured):
		ws := "none · no workspace bind mount"
		if len(sb.Workspaces) > 0 {
			mode := "rw"
			if sb.Workspaces[0].ReadOnly {
				mode = "ro"
			}
			ws = fmt.Sprintf("%s (%s)", sb.Workspaces[0].Path, mode)
		}
		cpu, mem := "auto", "auto"
		if o.cpus > 0 {
			cpu = strconv.Itoa(o.cpus)
		}
		if o.memory != "" {
			mem = o.memory
		}
		check := "Pulling image"
		if o.pull == "never" {
			check = "Checking image"
		}
		fmt.Fprintf(a.Stdout, "\nsandbox    %s\nagent      %s\nworkspace  %s\nimage      %s\ncpu        %s\nmemory     %s\n\n%s\n✓ Image ready\n✓ Created sandbox %s\n\nTo connect to this sandbox, run:\n  sbx run --name %s\n",
			sb.Name, sb.Agent, ws, sb.Template, cpu, mem, check, sb.Name, sb.Name)
	default:
		fmt.Fprintf(a.Stdout, "✓ Created sandbox %s\n", sb.Name)
	}
	return nil
}

// run is `sbx run [flags] [AGENT] [PATH...] [-- AGENT_ARGS...]`: creates the
// sandbox when it does not exist and attaches (the fake runs no agent).
// -d/--detached prints the ID and keeps the sandbox running after sessions
// end ("detached excluded" from auto-stop, 0.23.0; for an existing sandbox
// only since 0.47.0, evidence §3.2); otherwise it settles as auto-stop
// leaves it.
func (a *app) run(args []string) error {
	fs := fakecli.Flags("run")
	o := a.createFlags(fs)
	detach := fs.BoolP("detached", "d", false, "Start the sandbox and print its ID without opening an agent session")
	rm := new(bool)
	if a.Version.AtLeast(vCaptured) {
		fs.BoolVar(rm, "rm", false, "Remove the sandbox after the agent session exits")
	}
	args, err := a.parse(fs, args)
	if err != nil {
		return err
	}
	if i := fs.ArgsLenAtDash(); i >= 0 {
		args = args[:i]
	}
	if err := a.checkCreate(o); err != nil {
		return err
	}
	if *rm && *detach {
		return errf("--rm cannot be combined with --detached")
	}
	var id string
	err = a.Store.Update(func(st *fakestate.State) error {
		var agent string
		var paths []string
		if len(args) > 0 {
			agent, paths = args[0], args[1:]
		}
		var sb *fakestate.Sandbox
		if o.name != "" {
			sb = st.Find(o.name)
		}
		existed := sb != nil
		if sb == nil {
			if agent == "" {
				if o.name != "" {
					return a.notFound(o.name)
				}
				return argsCheck(args, 1, -1)
			}
			if len(paths) == 0 {
				paths = []string{"."} // "Omit the path to mount the current directory."
			}
			nsb, err := a.newSandbox(o, agent, paths)
			if err != nil {
				return err
			}
			if err := a.addSandbox(st, nsb, o); err != nil {
				return err
			}
			sb = nsb
		} else if agent != "" && sb.Agent != agent {
			return errf("sandbox '%s' runs agent '%s', not '%s'", sb.Name, sb.Agent, agent) // UNCONFIRMED wording
		}
		a.start(sb)
		id = sb.ID
		switch {
		case *rm:
			st.Remove(sb.Name)
		case *detach && (!existed || a.Version.AtLeast(vCaptured)):
			// A sandbox this run creates detached keeps running (0.23.0,
			// "detached excluded" from auto-stop); an existing one only
			// from 0.47.0 ("run -d on an existing sandbox keeps it
			// running", evidence §3.2). Before, it starts and stops
			// itself again when idle, as after any session.
			sb.Detached = true
		default:
			a.settle(sb)
		}
		return nil
	})
	if err != nil {
		return err
	}
	if *detach {
		fmt.Fprintln(a.Stdout, id)
	}
	return nil
}
