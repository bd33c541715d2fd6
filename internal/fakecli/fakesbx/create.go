package fakesbx

import (
	"bufio"
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

// agents are the built-in agents (docker-sandboxes-cli.md §1.3 create, §5.3)
// and their template variants (§5.2). gemini is retired in 0.53.0.
var agents = map[string]string{
	"claude": "claude-code", "codex": "codex", "copilot": "copilot", "cursor": "cursor-agent",
	"devin": "devin", "docker-agent": "docker-agent", "droid": "droid", "gemini": "gemini",
	"kiro": "kiro", "opencode": "opencode", "shell": "shell",
}

func (a *app) knownAgent(name string) bool {
	if _, ok := agents[name]; !ok {
		return false
	}
	return name != "gemini" || !a.version.AtLeast("0.53.0")
}

// isKit reports whether an agent positional is a kit reference (directory,
// ZIP, git or OCI, 0.42.0) rather than an agent name.
func isKit(s string) bool { return strings.ContainsAny(s, "/.:") }

// createOpts are the flags `sbx create` and `sbx run` share
// (docker-sandboxes-cli.md §1.3, newest create table), gated by the version
// that introduced them (§7).
type createOpts struct {
	name, template, memory, pull, skills string
	cpus                                 int
	env, envFiles, publish, denyNetwork  []string
	kits, kitArgs, kitArgsFiles, mcp     []string
	clone, noProgress                    bool
	branch                               string
	cloudOnly                            map[string]*string
	volumes, allowNetwork                []string
}

func (a *app) createFlags(fs *pflag.FlagSet) *createOpts {
	o := &createOpts{cloudOnly: map[string]*string{}}
	fs.StringVar(&o.name, "name", "", "Name for the sandbox")
	fs.StringVarP(&o.template, "template", "t", "", "Container image to use for the sandbox")
	fs.StringVarP(&o.memory, "memory", "m", "", "Memory limit in binary units (e.g., 512m, 8g)")
	if a.version.AtLeast("0.25.0") {
		fs.IntVar(&o.cpus, "cpus", 0, "Number of CPUs to allocate to the sandbox (0 = auto)")
	}
	if a.version.AtLeast("0.39.0") {
		fs.StringArrayVarP(&o.env, "env", "e", nil, "Set an environment variable in the sandbox")
		fs.StringArrayVar(&o.envFiles, "env-file", nil, "Read environment variables from a file")
	}
	if a.version.AtLeast("0.37.0") {
		fs.StringArrayVarP(&o.publish, "publish", "p", nil, "Publish a sandbox port to the host")
	}
	if a.version.AtLeast("0.38.0") {
		fs.StringArrayVar(&o.denyNetwork, "deny-network", nil, "Add a per-sandbox network deny rule at creation time")
		fs.StringArrayVar(&o.mcp, "static-mcp", nil, "MCP server names that form the sandbox's fixed (static) MCP set")
	}
	if a.version.AtLeast("0.31.0") {
		fs.BoolVar(&o.clone, "clone", false, "Run the agent on a private in-container clone of the host Git repository")
	}
	fs.StringVar(&o.branch, "branch", "", "Create a Git worktree on the given branch")
	fs.StringVar(&o.pull, "pull", "", "Image pull policy (always|missing|never)")
	fs.StringVar(&o.skills, "skills", "", "Shared skills store mode (off, readonly, readwrite)")
	fs.StringArrayVar(&o.kits, "kit", nil, "Additional kit reference")
	fs.StringArrayVar(&o.kitArgs, "kit-arg", nil, "Kit argument")
	fs.StringArrayVar(&o.kitArgsFiles, "kit-args-file", nil, "Kit arguments file")
	fs.BoolVar(&o.noProgress, "no-progress", false, "Suppress progress output")
	fs.StringArrayVar(&o.allowNetwork, "allow-network", nil, "Network pattern to allow for cloud sandbox egress (cloud only)")
	fs.StringArrayVarP(&o.volumes, "volume", "v", nil, "Volume (cloud only)")
	for _, f := range []string{"image-ref", "on-timeout", "ttl"} {
		o.cloudOnly[f] = fs.String(f, "", "(cloud only)")
	}
	return o
}

// check validates what does not need the state.
func (a *app) checkCreate(fs *pflag.FlagSet, o *createOpts) error {
	if fs.Changed("branch") && a.version.AtLeast("0.31.0") {
		// Verbatim, docker-sandboxes-cli.md §1.3 (0.31.0).
		return &cliError{msg: "--branch is no longer supported; use --clone instead", code: 1}
	}
	for _, f := range []string{"allow-network", "volume", "image-ref", "on-timeout", "ttl"} {
		if fs.Changed(f) {
			// UNCONFIRMED wording; the flag is documented as cloud only.
			return &cliError{msg: fmt.Sprintf("--%s is only supported with --cloud", f), code: 1}
		}
	}
	if o.pull != "" && !slices.Contains([]string{"always", "missing", "never"}, o.pull) {
		return &cliError{msg: fmt.Sprintf("invalid --pull value %q: must be always, missing or never", o.pull), code: 1}
	}
	if o.skills != "" && !slices.Contains([]string{"off", "readonly", "readwrite"}, o.skills) {
		return &cliError{msg: fmt.Sprintf("invalid --skills value %q: must be off, readonly or readwrite", o.skills), code: 1}
	}
	if o.cpus < 0 {
		return &cliError{msg: "--cpus must be 0 (auto) or a positive number", code: 1}
	}
	if o.memory != "" {
		n, err := parseMemory(o.memory)
		if err != nil {
			return &cliError{msg: fmt.Sprintf("invalid --memory %q: %v", o.memory, err), code: 1}
		}
		if n < 512<<20 {
			return &cliError{msg: fmt.Sprintf("invalid --memory %q: minimum is 512 MiB", o.memory), code: 1}
		}
	}
	if o.name != "" {
		if err := a.checkName(o.name); err != nil {
			return err
		}
	}
	return nil
}

var nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9.-]*$`)

// checkName applies the current name rule (docker-sandboxes-cli.md §1.3
// --name, §5.1); the error wording is UNCONFIRMED.
func (a *app) checkName(name string) error {
	bad := func(why string) error {
		return &cliError{msg: fmt.Sprintf("invalid sandbox name %q: %s", name, why), code: 1}
	}
	switch {
	case len(name) < 2:
		return bad("must be at least two characters")
	case !nameRE.MatchString(name):
		return bad("must start with a letter or number and contain only letters, numbers, hyphens and periods")
	case name == "default":
		return bad("'default' is reserved")
	case a.version.AtLeast("0.43.0") && len(name) > 63:
		return bad("must be at most 63 characters")
	case a.version.AtLeast("0.43.0") && (strings.HasSuffix(name, "-") || strings.HasSuffix(name, ".")):
		return bad("must not end in a hyphen or period")
	}
	return nil
}

// parseMemory parses binary units: 512m, 8g, 1024k, bytes.
func parseMemory(s string) (int64, error) {
	s = strings.ToLower(strings.TrimSpace(s))
	mult := int64(1)
	if s != "" {
		switch s[len(s)-1] {
		case 'k':
			mult = 1 << 10
		case 'm':
			mult = 1 << 20
		case 'g':
			mult = 1 << 30
		case 't':
			mult = 1 << 40
		}
		if mult != 1 || s[len(s)-1] == 'b' {
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
		ro := false
		if q, ok := strings.CutSuffix(p, ":ro"); ok {
			p, ro = q, true
		} else if q, ok := strings.CutSuffix(p, ":rw"); ok {
			p = q
		}
		abs, err := filepath.Abs(p)
		if err != nil {
			return nil, err
		}
		if !fileExists(abs) {
			// UNCONFIRMED wording.
			return nil, &cliError{msg: fmt.Sprintf("workspace path %q does not exist", abs), code: 1}
		}
		out = append(out, fakestate.Workspace{Path: abs, ReadOnly: ro})
	}
	return out, nil
}

// newSandbox builds (but does not store) the sandbox create/run would make.
func (a *app) newSandbox(o *createOpts, agent string, paths []string, defaultCwd bool) (*fakestate.Sandbox, error) {
	if !a.knownAgent(agent) && !isKit(agent) {
		if a.version.AtLeast("0.42.0") {
			return nil, &cliError{msg: fmt.Sprintf("agent '%s' not found", agent), code: 1}
		}
		return nil, &cliError{msg: fmt.Sprintf("unknown agent %q", agent), code: 1}
	}
	if len(paths) == 0 && defaultCwd {
		paths = []string{"."}
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
		name = validName(filepath.Base(agent) + "-" + filepath.Base(dir))
	}
	var env fakecli.Env
	for _, f := range o.envFiles {
		if err := env.AddFile(f, a.getenv); err != nil {
			return nil, &cliError{msg: err.Error(), code: 1}
		}
	}
	for _, e := range o.env {
		if err := env.AddSpec(e, a.getenv); err != nil {
			return nil, &cliError{msg: err.Error(), code: 1}
		}
	}
	template := o.template
	if template == "" {
		if v, ok := agents[agent]; ok {
			template = "docker/sandbox-templates:" + v + "-docker"
		} else {
			template = agent
		}
	}
	sb := &fakestate.Sandbox{
		Name: name, Agent: agent, Template: template, Workspaces: ws, Env: env.Map(),
		CPUs: o.cpus, Memory: o.memory, Kits: o.kits, Clone: o.clone, Pull: o.pull,
		CreatedAt: a.now, StartedAt: a.now, LastUsedAt: a.now, Status: "running",
	}
	for _, h := range o.denyNetwork {
		for _, r := range splitList(h) {
			addRule(&sb.Network.Rules, "sandbox:"+name, fakestate.Rule{Policy: "local", Decision: "deny", Resource: r})
		}
	}
	return sb, nil
}

// validName makes a default name fit the name rule.
func validName(s string) string {
	var b strings.Builder
	for _, r := range s {
		if r < 128 && (r == '-' || r == '.' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			b.WriteRune(r)
		} else {
			b.WriteRune('-')
		}
	}
	return strings.TrimRight(b.String(), "-.")
}

// store adds sb to st after the checks a daemon makes: an initialised
// policy, a free name, publishable ports.
func (a *app) addSandbox(st *fakestate.State, sb *fakestate.Sandbox, publish []string) error {
	if err := a.ensurePolicy(st); err != nil {
		return err
	}
	if st.Find(sb.Name) != nil {
		// docker-sandboxes-cli.md §2.11 (issue #109).
		return &cliError{msg: "sandbox already exists with this name", code: 1}
	}
	for _, p := range publish {
		port, err := a.parsePublish(st, p)
		if err != nil {
			return err
		}
		sb.Ports = append(sb.Ports, port)
	}
	if s := a.getenv("FAKE_SBX_CREATE_STATUS"); s != "" {
		sb.Status = s
	}
	seq := st.Add(sb)
	sb.ID = fakestate.UUID(sb.Name, seq)
	return nil
}

// ensurePolicy runs the first-run policy prompt (docker-sandboxes-cli.md
// §2.10) when the global policy is not initialised; with --no-input it fails
// naming `sbx policy init` (§10).
func (a *app) ensurePolicy(st *fakestate.State) error {
	if st.Policy.Initialized {
		return nil
	}
	if a.noInput {
		// UNCONFIRMED wording.
		return &cliError{msg: "the global network policy is not initialized; run: sbx policy init allow-all|balanced|deny-all", code: 1}
	}
	fmt.Fprint(a.stdout, "Initialize the global network policy for your sandboxes:\n"+
		"     1. Open         — All network traffic allowed, no restrictions.\n"+
		"  ❯  2. Balanced     — Default deny, with common dev sites allowed.\n"+
		"     3. Locked Down  — All network traffic blocked unless you allow it.\n")
	line, err := bufio.NewReader(a.stdin).ReadString('\n')
	if err != nil && line == "" {
		return &cliError{msg: "cancelled", code: 1}
	}
	preset := map[string]string{"1": "allow-all", "2": "balanced", "": "balanced", "3": "deny-all"}[strings.TrimSpace(line)]
	if preset == "" {
		return &cliError{msg: "cancelled", code: 1}
	}
	initPolicy(st, preset)
	return nil
}

func (a *app) create(args []string) error {
	fs := newFlags("create")
	o := a.createFlags(fs)
	args, err := a.parse(fs, args)
	if err != nil {
		return err
	}
	if err := argsCheck(args, 1, -1); err != nil {
		return err
	}
	if err := a.checkCreate(fs, o); err != nil {
		return err
	}
	// §1.3: "Omit the path to create a sandbox without a workspace bind
	// mount" (0.42+); earlier versions need one.
	if !a.version.AtLeast("0.42.0") {
		if err := argsCheck(args, 2, -1); err != nil {
			return err
		}
	}
	sb, err := a.newSandbox(o, args[0], args[1:], false)
	if err != nil {
		return err
	}
	if err := a.store.Update(func(st *fakestate.State) error { return a.addSandbox(st, sb, o.publish) }); err != nil {
		return err
	}
	if !o.noProgress {
		// UNCONFIRMED for sbx; shaped like the G2 create line (§2.3).
		fmt.Fprintf(a.stdout, "✓ Created sandbox %s\n", sb.Name)
	}
	return nil
}

func (a *app) run(args []string) error {
	fs := newFlags("run")
	o := a.createFlags(fs)
	detach := fs.BoolP("detach", "d", false, "Start the sandbox and print its ID without opening an agent session")
	rm := false
	if a.version.AtLeast("0.47.0") {
		fs.BoolVar(&rm, "rm", false, "Remove the sandbox after the agent session exits")
	}
	args, err := a.parse(fs, args)
	if err != nil {
		return err
	}
	if i := fs.ArgsLenAtDash(); i >= 0 {
		args = args[:i] // AGENT_ARGS go to the agent, which the fake does not run
	}
	if err := a.checkCreate(fs, o); err != nil {
		return err
	}
	if rm && *detach {
		return &cliError{msg: "--rm cannot be used with --detach", code: 1}
	}
	var id string
	err = a.store.Update(func(st *fakestate.State) error {
		name := o.name
		var agent string
		var paths []string
		if len(args) > 0 {
			agent, paths = args[0], args[1:]
		}
		if name == "" && agent != "" && !a.knownAgent(agent) && st.Find(agent) != nil {
			// Deprecated positional re-attach (0.33.0); wording UNCONFIRMED.
			fmt.Fprintf(a.stderr, "WARNING: 'sbx run %s' is deprecated; use 'sbx run --name %s'\n", agent, agent)
			name, agent = agent, ""
		}
		var sb *fakestate.Sandbox
		if name != "" {
			sb = st.Find(name)
		}
		if sb == nil {
			if agent == "" {
				if name != "" {
					return a.notFound(name)
				}
				return argsCheck(args, 1, -1)
			}
			nsb, err := a.newSandbox(o, agent, paths, true)
			if err != nil {
				return err
			}
			if existing := st.Find(nsb.Name); existing != nil && o.name == "" {
				sb = existing // same workspace = same sandbox (§5.1)
			} else {
				if err := a.addSandbox(st, nsb, o.publish); err != nil {
					return err
				}
				sb = nsb
			}
		}
		if agent != "" && sb.Agent != agent {
			// §5.1 (0.33.0): errors when the agent doesn't match; wording UNCONFIRMED.
			return &cliError{msg: fmt.Sprintf("sandbox '%s' runs agent '%s', not '%s'", sb.Name, sb.Agent, agent), code: 1}
		}
		if sb.Status != "running" {
			sb.StartedAt = a.now
		}
		sb.Status = "running"
		sb.LastUsedAt = a.now
		id = sb.ID
		if rm {
			st.Remove(sb.Name)
		}
		return nil
	})
	if err != nil {
		return err
	}
	if *detach {
		fmt.Fprintln(a.stdout, id)
	}
	return nil
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
