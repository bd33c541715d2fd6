package fakedocker

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/spf13/pflag"

	"github.com/sbxhq/sbx/internal/fakecli"
	"github.com/sbxhq/sbx/internal/fakecli/fakestate"
)

// agents returns the agent subcommands of `create` (docker-sandboxes-cli.md
// §1.2): v0.7.1's list, or the later one (the version that changed it is
// UNCONFIRMED; 0.8.0 here), with their template variants (§5.2).
func (a *app) agents() map[string]string {
	m := map[string]string{"cagent": "docker-agent", "claude": "claude-code", "codex": "codex", "gemini": "gemini", "kiro": "kiro"}
	if a.version.AtLeast("0.8.0") {
		for k, v := range map[string]string{"copilot": "copilot", "opencode": "opencode", "shell": "shell", "docker-agent": "docker-agent"} {
			m[k] = v
		}
	}
	return m
}

// DefaultBlockCIDRs is the G2 default policy's blocked ranges
// (docker-sandboxes-cli.md §3.5).
var DefaultBlockCIDRs = []string{"10.0.0.0/8", "127.0.0.0/8", "169.254.0.0/16", "172.16.0.0/12",
	"192.168.0.0/16", "::1/128", "fc00::/7", "fe80::/10"}

type createOpts struct {
	name, template, pull string
	quiet, loadLocal     bool
}

// createFlags are the flags of `create` and `run` by plugin version
// (docker-sandboxes-cli.md §1.2 table).
func (a *app) createFlags(fs *pflag.FlagSet, withQuiet bool) *createOpts {
	o := &createOpts{}
	fs.StringVar(&o.name, "name", "", "Name for the sandbox (default: <agent>-<workdir>)")
	fs.StringVarP(&o.template, "template", "t", "", "Container image to use for the sandbox (default: agent-specific image)")
	if withQuiet {
		fs.BoolVarP(&o.quiet, "quiet", "q", false, "Suppress verbose output")
	}
	if a.version.AtLeast("0.8.0") {
		fs.StringVar(&o.pull, "pull-template", "missing", "Template image pull policy: always, missing, never")
	} else {
		fs.BoolVar(&o.loadLocal, "load-local-template", false, "Load a locally built template image into the sandbox")
	}
	fs.Bool("patch-settings", false, "")
	_ = fs.MarkHidden("patch-settings")
	return o
}

// checkName applies §1.2's --name rule: v0.7.1 letters, numbers, hyphens,
// underscores; later also periods and plus signs. Wording UNCONFIRMED.
func (a *app) checkName(name string) error {
	re := regexp.MustCompile(`^[A-Za-z0-9_-]+$`)
	allowed := "letters, numbers, hyphens, and underscores"
	if a.version.AtLeast("0.8.0") {
		re = regexp.MustCompile(`^[A-Za-z0-9_.+-]+$`)
		allowed = "letters, numbers, hyphens, underscores, periods, plus signs and minus signs"
	}
	if !re.MatchString(name) {
		return errf("invalid sandbox name %q: only %s are allowed", name, allowed)
	}
	return nil
}

func validName(s string) string {
	var b strings.Builder
	for _, r := range s {
		if r < 128 && (r == '-' || r == '_' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			b.WriteRune(r)
		} else {
			b.WriteRune('-')
		}
	}
	return b.String()
}

// workspaces parses WORKSPACE [EXTRA...] with ":ro" suffixes (§1.2 create).
func workspaces(paths []string) ([]fakestate.Workspace, error) {
	var out []fakestate.Workspace
	for _, p := range paths {
		ro := false
		if q, ok := strings.CutSuffix(p, ":ro"); ok {
			p, ro = q, true
		}
		abs, err := filepath.Abs(p)
		if err != nil {
			return nil, err
		}
		if _, err := os.Stat(abs); err != nil {
			return nil, errf("workspace %q does not exist", abs) // UNCONFIRMED
		}
		out = append(out, fakestate.Workspace{Path: abs, ReadOnly: ro})
	}
	return out, nil
}

// newSandbox builds and stores a sandbox.
func (a *app) newSandbox(st *fakestate.State, o *createOpts, agent string, paths []string) (*fakestate.Sandbox, error) {
	variant, ok := a.agents()[agent]
	if !ok {
		var names []string
		for k := range a.agents() {
			names = append(names, k)
		}
		slices.Sort(names)
		return nil, errf("unknown agent %q; available agents: %s", agent, strings.Join(names, ", ")) // UNCONFIRMED
	}
	ws, err := workspaces(paths)
	if err != nil {
		return nil, err
	}
	name := o.name
	if name == "" {
		name = validName(agent + "-" + filepath.Base(ws[0].Path))
	} else if err := a.checkName(name); err != nil {
		return nil, err
	}
	if st.Find(name) != nil {
		return nil, errf("sandbox with name %q already exists", name) // UNCONFIRMED
	}
	tmpl := o.template
	if tmpl == "" {
		tmpl = "docker/sandbox-templates:" + variant
	}
	status := "running"
	if s := a.getenv("FAKE_DOCKER_CREATE_STATUS"); s != "" {
		status = s
	}
	sb := &fakestate.Sandbox{Name: name, Agent: agent, Template: tmpl, Workspaces: ws, Status: status,
		Pull: o.pull, CreatedAt: a.now, StartedAt: a.now, LastUsedAt: a.now,
		Network: fakestate.Network{Default: "allow", BlockCIDRs: slices.Clone(DefaultBlockCIDRs)}}
	seq := st.Add(sb)
	sb.ID = fakestate.HexID(name, seq)
	return sb, nil
}

// create is `docker sandbox create [OPTIONS] AGENT WORKSPACE [EXTRA...]`.
// There is no env flag in G2 (§4.2), so -e is an unknown shorthand.
func (a *app) create(args []string) error {
	fs := fakecli.Flags("create")
	o := a.createFlags(fs, true)
	args, err := a.parse(fs, args)
	if err != nil {
		return err
	}
	if err := a.minArgs(args, 2, "docker sandbox create [OPTIONS] AGENT WORKSPACE"); err != nil {
		return err
	}
	if o.pull != "" && !slices.Contains([]string{"always", "missing", "never"}, o.pull) {
		return errf("invalid --pull-template %q: must be always, missing or never", o.pull)
	}
	var sb *fakestate.Sandbox
	if err := a.store.Update(func(st *fakestate.State) error {
		sb, err = a.newSandbox(st, o, args[0], args[1:])
		return err
	}); err != nil {
		return err
	}
	if !o.quiet {
		// Format: docker-sandboxes-cli.md §2.3 (templates page); the fake
		// has one sandbox per VM, named alike.
		fmt.Fprintf(a.stdout, "✓ Created sandbox %s in VM %s\n", sb.Name, sb.Name)
	}
	return nil
}

// run is `docker sandbox run SANDBOX [-- ARGS] | AGENT [WORKSPACE]
// [EXTRA...] [-- ARGS]`: "Create the sandbox if it does not exist"; the
// same workspace (or --name) reuses it (§5.1). The hidden -d prints the ID.
func (a *app) run(args []string) error {
	fs := fakecli.Flags("run")
	o := a.createFlags(fs, false)
	detach := fs.BoolP("detached", "d", false, "Return sandbox ID without running agent")
	_ = fs.MarkHidden("detached")
	args, err := a.parse(fs, args)
	if err != nil {
		return err
	}
	if i := fs.ArgsLenAtDash(); i >= 0 {
		args = args[:i]
	}
	if err := a.minArgs(args, 1, "docker sandbox run SANDBOX [-- AGENT_ARGS...] | AGENT [WORKSPACE] [EXTRA_WORKSPACE...] [-- AGENT_ARGS...]"); err != nil {
		return err
	}
	var id string
	err = a.store.Update(func(st *fakestate.State) error {
		sb := st.Find(args[0])
		if sb == nil && o.name != "" {
			sb = st.Find(o.name)
		}
		if sb == nil {
			if _, ok := a.agents()[args[0]]; !ok {
				return notFound(args[0])
			}
			paths := args[1:]
			if len(paths) == 0 {
				if !a.version.AtLeast("0.8.0") {
					return a.minArgs(args, 2, "docker sandbox run AGENT WORKSPACE")
				}
				paths = []string{"."}
			}
			ws, err := workspaces(paths[:1])
			if err != nil {
				return err
			}
			for _, x := range st.Sandboxes {
				if x.Agent == args[0] && len(x.Workspaces) > 0 && x.Workspaces[0].Path == ws[0].Path && o.name == "" {
					sb = x
				}
			}
			if sb == nil {
				if sb, err = a.newSandbox(st, o, args[0], paths); err != nil {
					return err
				}
			}
		}
		if sb.Status != "running" {
			sb.StartedAt = a.now
		}
		sb.Status, sb.LastUsedAt = "running", a.now
		id = sb.ID
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

var passEnv = []string{"PATH", "HOME", "TMPDIR", "LANG", "TERM", "USER"}

// exec is `docker sandbox exec [OPTIONS] SANDBOX COMMAND [ARG...]` (§1.2).
// A stopped sandbox is started first (UNCONFIRMED for G2; documented for
// sbx). Exit status is the command's; 127/126 when it cannot start.
func (a *app) exec(args []string) error {
	fs := fakecli.Flags("exec")
	fs.SetInterspersed(false)
	detach := fs.BoolP("detach", "d", false, "Detached mode: run command in the background")
	fs.String("detach-keys", "", "Override the key sequence for detaching a container")
	env := fs.StringArrayP("env", "e", nil, "Set environment variables")
	envFiles := fs.StringArray("env-file", nil, "Read in a file of environment variables")
	interactive := fs.BoolP("interactive", "i", false, "Keep STDIN open even if not attached")
	fs.Bool("privileged", false, "Give extended privileges to the command")
	fs.BoolP("tty", "t", false, "Allocate a pseudo-TTY")
	fs.StringP("user", "u", "", "Username or UID (format: <name|uid>[:<group|gid>])")
	workdir := fs.StringP("workdir", "w", "", "Working directory inside the container")
	args, err := a.parse(fs, args)
	if err != nil {
		return err
	}
	if err := a.minArgs(args, 2, "docker sandbox exec [OPTIONS] SANDBOX COMMAND [ARG...]"); err != nil {
		return err
	}
	var sb fakestate.Sandbox
	if err := a.store.Update(func(st *fakestate.State) error {
		s, err := a.lookup(st, args[0])
		if err != nil {
			return err
		}
		if s.Status != "running" {
			s.Status, s.StartedAt = "running", a.now
		}
		s.LastUsedAt = a.now
		sb = *s
		return nil
	}); err != nil {
		return err
	}
	var e fakecli.Env
	for _, k := range passEnv {
		if v := a.getenv(k); v != "" {
			e.Set(k, v)
		}
	}
	for _, f := range *envFiles {
		if err := e.AddFile(f, a.getenv); err != nil {
			return errf("%v", err)
		}
	}
	for _, s := range *env {
		if err := e.AddSpec(s, a.getenv); err != nil {
			return errf("%v", err)
		}
	}
	dir := *workdir
	if dir == "" && len(sb.Workspaces) > 0 {
		dir = sb.Workspaces[0].Path
	}
	cmd := fakecli.Cmd{Argv: args[1:], Env: e.List(), Dir: dir, Stdout: a.stdout, Stderr: a.stderr, Detach: *detach}
	if *interactive {
		cmd.Stdin = a.stdin
	}
	code, err := cmd.Run()
	if err != nil {
		fmt.Fprintln(a.stderr, err)
	}
	return &exitCode{code: code}
}

// vmJSON is one VM of `docker sandbox ls --json`.
// Format: docker-sandboxes-cli.md §2.3: a stopped VM has no socket_path,
// sandbox_count 0 and (as in the example) no workspaces; entries carry a
// ":ro" suffix when read-only ([3P]).
type vmJSON struct {
	Name         string   `json:"name"`
	Agent        string   `json:"agent"`
	Status       string   `json:"status"`
	SocketPath   string   `json:"socket_path,omitempty"`
	SandboxCount int      `json:"sandbox_count"`
	Workspaces   []string `json:"workspaces,omitempty"`
}

func (a *app) socketPath(sb *fakestate.Sandbox) string {
	return fmt.Sprintf("%s/.docker/sandboxes/vm/%s/docker-%d.sock", a.getenv("HOME"), sb.Name, sb.CreatedAt.UnixMilli())
}

func (a *app) ls(args []string) error {
	fs := fakecli.Flags("ls")
	jsonFlag := fs.Bool("json", false, "Output in JSON format")
	quiet := fs.BoolP("quiet", "q", false, "Only display VM names")
	noTrunc := fs.Bool("no-trunc", false, "Don't truncate output")
	args, err := a.parse(fs, args)
	if err != nil {
		return err
	}
	if len(args) > 0 {
		return errf("\"docker sandbox ls\" accepts no arguments.\nSee 'docker sandbox ls --help'.\n\nUsage:  docker sandbox ls [OPTIONS]")
	}
	var sbs []*fakestate.Sandbox
	if err := a.store.View(func(st *fakestate.State) error {
		for _, sb := range st.Sandboxes {
			if !sb.Hidden {
				sbs = append(sbs, sb)
			}
		}
		return nil
	}); err != nil {
		return err
	}
	if *quiet {
		for _, sb := range sbs {
			fmt.Fprintln(a.stdout, sb.Name)
		}
		return nil
	}
	if *jsonFlag {
		vms := []vmJSON{}
		for _, sb := range sbs {
			vm := vmJSON{Name: sb.Name, Agent: sb.Agent, Status: sb.Status}
			if sb.Status == "running" || a.getenv("FAKE_DOCKER_LS_STOPPED_WORKSPACES") == "1" {
				for _, w := range sb.Workspaces {
					vm.Workspaces = append(vm.Workspaces, w.String())
				}
			}
			if sb.Status == "running" {
				vm.SocketPath, vm.SandboxCount = a.socketPath(sb), 1
			}
			vms = append(vms, vm)
		}
		key := a.getenv("FAKE_DOCKER_LS_SHAPE")
		switch key {
		case "":
			key = "vms"
		case "vms", "sandboxes":
		default:
			return fmt.Errorf("fake docker: FAKE_DOCKER_LS_SHAPE %q: want vms or sandboxes", key)
		}
		return a.json(map[string]any{key: vms})
	}
	// Format: docker-sandboxes-cli.md §2.3 table: stopped VMs leave SOCKET
	// PATH, SANDBOXES and AGENTS empty; the VM ID is truncated to the
	// example's nine characters unless --no-trunc.
	rows := [][]string{{"VM ID", "NAME", "STATUS", "WORKSPACE", "SOCKET PATH", "SANDBOXES", "AGENTS"}}
	for _, sb := range sbs {
		id := sb.ID
		if !*noTrunc && len(id) > 9 {
			id = id[:9]
		}
		ws := ""
		if len(sb.Workspaces) > 0 {
			ws = sb.Workspaces[0].Path
		}
		row := []string{id, sb.Name, sb.Status, ws, "", "", ""}
		if sb.Status == "running" {
			row[4], row[5], row[6] = a.socketPath(sb), "1", sb.Agent
		}
		rows = append(rows, row)
	}
	return fakecli.Table(a.stdout, rows)
}

// stopOrRm handles `stop` and `rm SANDBOX [SANDBOX...]`: each name is
// printed (§2.3 for stop; UNCONFIRMED for rm, which G1 printed as IDs).
func (a *app) stopOrRm(args []string, remove bool) error {
	args, err := a.parse(fakecli.Flags(a.path[0]), args)
	if err != nil {
		return err
	}
	if err := a.minArgs(args, 1, "docker sandbox "+a.path[0]+" SANDBOX [SANDBOX...]"); err != nil {
		return err
	}
	if err := a.store.Update(func(st *fakestate.State) error {
		for _, n := range args {
			sb, err := a.lookup(st, n)
			if err != nil {
				return err
			}
			if remove {
				st.Remove(n)
			} else {
				sb.Status = "stopped"
			}
		}
		return nil
	}); err != nil {
		return err
	}
	for _, n := range args {
		fmt.Fprintln(a.stdout, n)
	}
	return nil
}

func (a *app) stop(args []string) error { return a.stopOrRm(args, false) }
func (a *app) rm(args []string) error   { return a.stopOrRm(args, true) }

// save is `docker sandbox save SANDBOX TAG [-o FILE]`; the fake only
// records it. Output UNCONFIRMED (none).
func (a *app) save(args []string) error {
	fs := fakecli.Flags("save")
	out := fs.StringP("output", "o", "", "Save image to specified tar file instead of loading into host Docker")
	args, err := a.parse(fs, args)
	if err != nil {
		return err
	}
	if err := a.exactArgs(args, 2, "docker sandbox save [OPTIONS] SANDBOX TAG"); err != nil {
		return err
	}
	return a.store.Update(func(st *fakestate.State) error {
		if _, err := a.lookup(st, args[0]); err != nil {
			return err
		}
		st.Saves = append(st.Saves, fakestate.Save{Sandbox: args[0], Tag: args[1], Output: *out})
		return nil
	})
}

// reset is `docker sandbox reset [-f]`; output §2.3.
func (a *app) reset(args []string) error {
	fs := fakecli.Flags("reset")
	force := fs.BoolP("force", "f", false, "Skip confirmation")
	args, err := a.parse(fs, args)
	if err != nil {
		return err
	}
	if len(args) > 0 {
		return errf("\"docker sandbox reset\" accepts no arguments.")
	}
	if err := a.confirm(*force, "This stops all VMs and deletes all sandbox state. Continue?"); err != nil {
		return err
	}
	if err := a.store.Update(func(st *fakestate.State) error {
		fresh := fakestate.New()
		fresh.Calls, fresh.Seq = st.Calls, st.Seq
		*st = *fresh
		return nil
	}); err != nil {
		return err
	}
	fmt.Fprintln(a.stdout, "All VMs reset successfully")
	return nil
}
