package fakedocker

import (
	"errors"
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
	if a.Version.AtLeast("0.8.0") {
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

// createFlags are the flags of `create` by plugin version
// (docker-sandboxes-cli.md §1.2 table).
func (a *app) createFlags(fs *pflag.FlagSet) *createOpts {
	o := &createOpts{}
	fs.StringVar(&o.name, "name", "", "Name for the sandbox (default: <agent>-<workdir>)")
	fs.StringVarP(&o.template, "template", "t", "", "Container image to use for the sandbox (default: agent-specific image)")
	fs.BoolVarP(&o.quiet, "quiet", "q", false, "Suppress verbose output")
	if a.Version.AtLeast("0.8.0") {
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
	if a.Version.AtLeast("0.8.0") {
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
	if s := a.Getenv("FAKE_DOCKER_CREATE_STATUS"); s != "" {
		status = s
	}
	sb := &fakestate.Sandbox{Name: name, Agent: agent, Template: tmpl, Workspaces: ws, Status: status,
		Pull: o.pull, CreatedAt: a.Now, StartedAt: a.Now, LastUsedAt: a.Now,
		Network: fakestate.Network{Default: "allow", BlockCIDRs: slices.Clone(DefaultBlockCIDRs)}}
	seq := st.Add(sb)
	sb.ID = fakestate.HexID(name, seq)
	return sb, nil
}

// create is `docker sandbox create [OPTIONS] AGENT WORKSPACE [EXTRA...]`.
// There is no env flag in G2 (§4.2), so -e is an unknown shorthand.
func (a *app) create(args []string) error {
	fs := fakecli.Flags("create")
	o := a.createFlags(fs)
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
	if err := a.Store.Update(func(st *fakestate.State) error {
		sb, err = a.newSandbox(st, o, args[0], args[1:])
		return err
	}); err != nil {
		return err
	}
	if !o.quiet {
		// Format: docker-sandboxes-cli.md §2.3 (templates page); the fake
		// has one sandbox per VM, named alike.
		fmt.Fprintf(a.Stdout, "✓ Created sandbox %s in VM %s\n", sb.Name, sb.Name)
	}
	return nil
}

// exec is `docker sandbox exec [OPTIONS] SANDBOX COMMAND [ARG...]` (§1.2).
// A stopped sandbox is started first (UNCONFIRMED for G2; documented for
// sbx). Exit status is the command's; 127/126 when it cannot start.
func (a *app) exec(args []string) error {
	fs := fakecli.Flags("exec")
	f := fakecli.AddExecFlags(fs)
	args, err := a.parse(fs, args)
	if err != nil {
		return err
	}
	if err := a.minArgs(args, 2, "docker sandbox exec [OPTIONS] SANDBOX COMMAND [ARG...]"); err != nil {
		return err
	}
	var sb fakestate.Sandbox
	if err := a.Store.Update(func(st *fakestate.State) error {
		s, err := a.lookup(st, args[0])
		if err != nil {
			return err
		}
		if s.Status != "running" {
			s.Status, s.StartedAt = "running", a.Now
		}
		s.LastUsedAt = a.Now
		sb = *s
		return nil
	}); err != nil {
		return err
	}
	code, err := a.RunIn(&sb, f, args[1:], nil)
	var se *fakecli.StartError
	if errors.As(err, &se) {
		fmt.Fprintln(a.Stderr, err)
	} else if err != nil {
		return err
	}
	return &fakecli.Exit{Code: code}
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
	return fmt.Sprintf("%s/.docker/sandboxes/vm/%s/docker-%d.sock", a.Getenv("HOME"), sb.Name, sb.CreatedAt.UnixMilli())
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
	if err := a.Store.View(func(st *fakestate.State) error {
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
			fmt.Fprintln(a.Stdout, sb.Name)
		}
		return nil
	}
	if *jsonFlag {
		vms := []vmJSON{}
		for _, sb := range sbs {
			vm := vmJSON{Name: sb.Name, Agent: sb.Agent, Status: sb.Status}
			if sb.Status == "running" || a.Getenv("FAKE_DOCKER_LS_STOPPED_WORKSPACES") == "1" {
				for _, w := range sb.Workspaces {
					vm.Workspaces = append(vm.Workspaces, w.String())
				}
			}
			if sb.Status == "running" {
				vm.SocketPath, vm.SandboxCount = a.socketPath(sb), 1
			}
			vms = append(vms, vm)
		}
		key := a.Getenv("FAKE_DOCKER_LS_SHAPE")
		switch key {
		case "":
			key = "vms"
		case "vms", "sandboxes":
		default:
			return fmt.Errorf("fake docker: FAKE_DOCKER_LS_SHAPE %q: want vms or sandboxes", key)
		}
		return a.JSON(map[string]any{key: vms})
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
	return fakecli.Table(a.Stdout, rows)
}

// stopOrRm handles `stop` and `rm SANDBOX [SANDBOX...]`: each name is
// printed (§2.3 for stop; UNCONFIRMED for rm, which G1 printed as IDs).
func (a *app) stopOrRm(args []string, remove bool) error {
	args, err := a.parse(fakecli.Flags(a.Path[0]), args)
	if err != nil {
		return err
	}
	if err := a.minArgs(args, 1, "docker sandbox "+a.Path[0]+" SANDBOX [SANDBOX...]"); err != nil {
		return err
	}
	if err := a.Store.Update(func(st *fakestate.State) error {
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
		fmt.Fprintln(a.Stdout, n)
	}
	return nil
}

func (a *app) stop(args []string) error { return a.stopOrRm(args, false) }
func (a *app) rm(args []string) error   { return a.stopOrRm(args, true) }
