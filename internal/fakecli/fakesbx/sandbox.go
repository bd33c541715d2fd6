package fakesbx

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"time"

	"github.com/sbxhq/sbx/internal/fakecli"
	"github.com/sbxhq/sbx/internal/fakecli/fakestate"
)

// lsEntry is one sandbox of `sbx ls --json`.
// Format: docker-sandboxes-cli.md §2.6: name/agent/status/workspaces
// (0.31.3, issue #201), id (0.33.0), workspace_missing ([3P] v0.38
// fixture), ports entries ([3P]), last_used_at (0.43.0) and created_at
// (0.45.0) as [3P] names them; cpus/memory (0.45.0) names are UNCONFIRMED.
type lsEntry struct {
	Name             string      `json:"name"`
	ID               string      `json:"id,omitempty"`
	Agent            string      `json:"agent"`
	Status           string      `json:"status"`
	Workspaces       []string    `json:"workspaces"`
	WorkspaceMissing *bool       `json:"workspace_missing,omitempty"`
	Ports            []portEntry `json:"ports,omitempty"`
	CPUs             int         `json:"cpus,omitempty"`
	Memory           string      `json:"memory,omitempty"`
	LastUsedAt       string      `json:"last_used_at,omitempty"`
	CreatedAt        string      `json:"created_at,omitempty"`
}

// portEntry is one published port. Format: docker-sandboxes-cli.md §2.6
// ([3P] `"ports": [{"host_ip", "host_port", "sandbox_port", "protocol"}]`).
type portEntry struct {
	HostIP      string `json:"host_ip"`
	HostPort    int    `json:"host_port"`
	SandboxPort int    `json:"sandbox_port"`
	Protocol    string `json:"protocol"`
}

func portEntries(ps []fakestate.Port) []portEntry {
	out := []portEntry{}
	for _, p := range ps {
		out = append(out, portEntry(p))
	}
	return out
}

func (a *app) lsEntry(sb *fakestate.Sandbox) lsEntry {
	e := lsEntry{Name: sb.Name, Agent: sb.Agent, Status: sb.Status, Workspaces: []string{}}
	for _, w := range sb.Workspaces {
		e.Workspaces = append(e.Workspaces, w.String())
	}
	if a.version.AtLeast("0.33.0") {
		e.ID = sb.ID
	}
	if a.version.AtLeast("0.38.0") {
		missing := len(sb.Workspaces) > 0 && !fileExists(sb.Workspaces[0].Path)
		e.WorkspaceMissing = &missing
	}
	if len(sb.Ports) > 0 {
		e.Ports = portEntries(sb.Ports)
	}
	if a.version.AtLeast("0.43.0") {
		e.LastUsedAt = sb.LastUsedAt.Format(time.RFC3339)
	}
	if a.version.AtLeast("0.45.0") {
		e.CreatedAt = sb.CreatedAt.Format(time.RFC3339)
		e.CPUs, e.Memory = sb.CPUs, sb.Memory
	}
	return e
}

func (a *app) ls(args []string) error {
	fs := newFlags("ls")
	jsonFlag := fs.Bool("json", false, "Output in JSON format")
	formatFlag := fs.String("format", "", "Output format: table, json or yaml")
	quiet := fs.BoolP("quiet", "q", false, "Only display sandbox names")
	args, err := a.parse(fs, args)
	if err != nil {
		return err
	}
	if err := argsCheck(args, 0, 0); err != nil {
		return err
	}
	f, err := format(*jsonFlag, *formatFlag)
	if err != nil {
		return err
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
	switch {
	case *quiet:
		for _, sb := range sbs {
			fmt.Fprintln(a.stdout, sb.Name)
		}
		return nil
	case f == "json":
		entries := []lsEntry{}
		for _, sb := range sbs {
			entries = append(entries, a.lsEntry(sb))
		}
		// Format: docker-sandboxes-cli.md §2.6 — {"sandboxes": [...]}
		// (observed), a legacy bare array (UNCONFIRMED), or the G2 "vms" key.
		switch shape := a.getenv("FAKE_SBX_LS_SHAPE"); shape {
		case "", "sandboxes":
			return a.json(map[string]any{"sandboxes": entries})
		case "array":
			return a.json(entries)
		case "vms":
			return a.json(map[string]any{"vms": entries})
		default:
			return fmt.Errorf("fake sbx: FAKE_SBX_LS_SHAPE %q: want sandboxes, array or vms", shape)
		}
	}
	// Format: docker-sandboxes-cli.md §2.5. The two examples disagree on
	// column widths; three spaces between columns matches the first except
	// the SANDBOX column. The workspace is the primary one, $HOME shown as ~.
	rows := [][]string{{"SANDBOX", "AGENT", "STATUS", "PORTS", "WORKSPACE"}}
	for _, sb := range sbs {
		ws := ""
		if len(sb.Workspaces) > 0 {
			ws = a.tilde(sb.Workspaces[0].Path)
		}
		rows = append(rows, []string{sb.Name, sb.Agent, sb.Status, portsText(sb.Ports), ws})
	}
	return fakecli.Table(a.stdout, rows)
}

// portsText renders ports as in the PORTS column of docker-sandboxes-cli.md
// §2.5 (`127.0.0.1:8080->3000/tcp4`), comma-separated (separator
// UNCONFIRMED).
func portsText(ps []fakestate.Port) string {
	var parts []string
	for _, p := range ps {
		parts = append(parts, portText(p))
	}
	return strings.Join(parts, ",")
}

func portText(p fakestate.Port) string {
	return fmt.Sprintf("%s:%d->%d/%s", p.HostIP, p.HostPort, p.SandboxPort, p.Protocol)
}

func (a *app) tilde(p string) string {
	home := a.getenv("HOME")
	if home != "" && home != "/" {
		if p == home {
			return "~"
		}
		if rest, ok := strings.CutPrefix(p, strings.TrimRight(home, "/")+"/"); ok {
			return "~/" + rest
		}
	}
	return p
}

// inspectJSON is `sbx inspect --json`. Its schema is not documented
// (docker-sandboxes-cli.md §2.7, §9): "state" (not "status"), "workspace"
// and "secrets" follow [3P]; the rest is invented to carry the fields of the
// human summary. Env is deliberately absent (§3.3: no documented read-back).
type inspectJSON struct {
	Name        string      `json:"name"`
	ID          string      `json:"id"`
	Agent       string      `json:"agent"`
	Kits        []string    `json:"kits"`
	State       string      `json:"state"`
	Image       string      `json:"image"`
	ImageDigest string      `json:"image_digest"`
	Workspace   string      `json:"workspace"`
	Workspaces  []string    `json:"workspaces"`
	Secrets     []string    `json:"secrets"`
	Ports       []portEntry `json:"ports"`
	Sessions    int         `json:"sessions"`
	CPUs        int         `json:"cpus,omitempty"`
	Memory      string      `json:"memory,omitempty"`
	CreatedAt   string      `json:"created_at"`
}

func digest(image string) string {
	h := sha256.Sum256([]byte(image))
	return "sha256:" + hex.EncodeToString(h[:])
}

func (a *app) inspect(args []string) error {
	fs := newFlags("inspect")
	jsonFlag := fs.Bool("json", false, "Output in JSON format")
	formatFlag := fs.String("format", "", "Output format: table, json or yaml")
	args, err := a.parse(fs, args)
	if err != nil {
		return err
	}
	if err := argsCheck(args, 1, 1); err != nil {
		return err
	}
	f, err := format(*jsonFlag, *formatFlag)
	if err != nil {
		return err
	}
	var sb *fakestate.Sandbox
	var secrets []string
	var sandboxRules int
	if err := a.store.View(func(st *fakestate.State) error {
		if sb, err = a.lookup(st, args[0]); err != nil {
			return err
		}
		for _, s := range st.Secrets {
			if s.Scope == "" || s.Scope == sb.Name {
				secrets = append(secrets, s.Name)
			}
		}
		sandboxRules = len(sb.Network.Rules)
		return nil
	}); err != nil {
		return err
	}
	ws := []string{}
	for _, w := range sb.Workspaces {
		ws = append(ws, w.String())
	}
	if f == "json" {
		j := inspectJSON{Name: sb.Name, ID: sb.ID, Agent: sb.Agent, Kits: sb.Kits, State: sb.Status,
			Image: sb.Template, ImageDigest: digest(sb.Template), Workspaces: ws, Secrets: secrets,
			Ports: portEntries(sb.Ports), CPUs: sb.CPUs, Memory: sb.Memory, CreatedAt: sb.CreatedAt.Format(time.RFC3339)}
		if j.Kits == nil {
			j.Kits = []string{}
		}
		if j.Secrets == nil {
			j.Secrets = []string{}
		}
		if len(sb.Workspaces) > 0 {
			j.Workspace = sb.Workspaces[0].Path
		}
		return a.json(j)
	}
	// Format: docker-sandboxes-cli.md §2.7 (v0.39.0, issue #517, verbatim,
	// including the two extra spaces after "Agent:"). Lines for extra
	// workspaces and sandbox rules are UNCONFIRMED.
	state := sb.Status
	if sb.Status == "running" {
		state = fmt.Sprintf("running (%s)", short(a.now.Sub(sb.StartedAt)))
	}
	kits := "none"
	if len(sb.Kits) > 0 {
		kits = strings.Join(sb.Kits, ", ")
	}
	workspace := "none"
	if len(sb.Workspaces) > 0 {
		workspace = sb.Workspaces[0].String()
	}
	policy := "global (local policy)"
	if sandboxRules > 0 {
		policy = fmt.Sprintf("global + sandbox (%d rules) (local policy)", sandboxRules)
	}
	sec := "none"
	if len(secrets) > 0 {
		var parts []string
		for _, s := range secrets {
			parts = append(parts, s+" (uploaded)")
		}
		sec = strings.Join(parts, ", ")
	}
	ports := "none published"
	if len(sb.Ports) > 0 {
		ports = portsText(sb.Ports)
	}
	w := a.stdout
	fmt.Fprintf(w, "  Name:           %s\n", sb.Name)
	fmt.Fprintf(w, "  Agent:            %s\n", sb.Agent)
	fmt.Fprintf(w, "  Kits:           %s\n", kits)
	fmt.Fprintf(w, "  State:          %s\n", state)
	fmt.Fprintf(w, "  Image:          %s\n", sb.Template)
	fmt.Fprintf(w, "  Image digest:   %s\n", digest(sb.Template))
	fmt.Fprintf(w, "  Auth mode:      none\n")
	fmt.Fprintf(w, "  Workspace:      %s\n", workspace)
	if len(ws) > 1 {
		fmt.Fprintf(w, "  Mounts:         %s\n", strings.Join(ws[1:], ", "))
	}
	fmt.Fprintf(w, "  Network Policy: %s\n", policy)
	fmt.Fprintf(w, "  Mount Policy:   allowed\n")
	fmt.Fprintf(w, "  Proxy:          172.17.0.2:3128\n")
	fmt.Fprintf(w, "  Secrets:        %s\n", sec)
	fmt.Fprintf(w, "  MCP gateway:    configured\n")
	fmt.Fprintf(w, "  Ports:          %s\n", ports)
	fmt.Fprintf(w, "  Sessions:       0\n")
	fmt.Fprintf(w, "\n  Daemon:         v%s   uptime 1d\n", a.version)
	return nil
}

// short renders a duration like "15s", "3m", "2h", "1d".
func short(d time.Duration) string {
	switch {
	case d < 0:
		return "0s"
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 24*time.Hour:
		return fmt.Sprintf("%dh", int(d.Hours()))
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}

func (a *app) stop(args []string) error {
	fs := newFlags("stop")
	args, err := a.parse(fs, args)
	if err != nil {
		return err
	}
	if err := argsCheck(args, 1, -1); err != nil {
		return err
	}
	// docker-sandboxes-cli.md §1.3: no own flags; output UNCONFIRMED (none).
	return a.store.Update(func(st *fakestate.State) error {
		for _, n := range args {
			sb, err := a.lookup(st, n)
			if err != nil {
				return err
			}
			sb.Status = "stopped"
		}
		return nil
	})
}

func (a *app) rm(args []string) error {
	fs := newFlags("rm")
	all := fs.Bool("all", false, "Remove all sandboxes")
	force := fs.BoolP("force", "f", false, "Skip confirmation prompts and delete even if in use")
	jsonFlag := fs.Bool("json", false, "Output in JSON format")
	formatFlag := fs.String("format", "", "Output format: table, json or yaml")
	args, err := a.parse(fs, args)
	if err != nil {
		return err
	}
	f, err := format(*jsonFlag, *formatFlag)
	if err != nil {
		return err
	}
	if !*all {
		if err := argsCheck(args, 1, -1); err != nil {
			return err
		}
	} else if len(args) > 0 {
		return &cliError{msg: "--all cannot be combined with sandbox names", code: 1}
	}
	var removed []string
	err = a.store.Update(func(st *fakestate.State) error {
		names := args
		if *all {
			names = nil
			for _, sb := range st.Sandboxes {
				names = append(names, sb.Name)
			}
		}
		for _, n := range names {
			if _, err := a.lookup(st, n); err != nil {
				return err
			}
		}
		if len(names) == 0 {
			return nil
		}
		// 0.29.0: removal requires confirmation (§1.3, §7).
		instead := "sbx rm --force " + strings.Join(names, " ")
		if *all {
			instead = "sbx rm --all --force"
		}
		if err := a.confirm(*force, fmt.Sprintf("Remove sandbox(es) %s?", strings.Join(names, ", ")), instead); err != nil {
			return err
		}
		for _, n := range names {
			st.Remove(n) // also its scoped secrets (0.42.0); its rules and ports live on it
			removed = append(removed, n)
		}
		return nil
	})
	if err != nil {
		return err
	}
	if f == "json" {
		if removed == nil {
			removed = []string{}
		}
		return a.json(map[string]any{"removed": removed}) // schema UNCONFIRMED
	}
	return nil
}

func (a *app) reset(args []string) error {
	fs := newFlags("reset")
	force := fs.BoolP("force", "f", false, "Skip confirmation")
	preserve := fs.Bool("preserve-secrets", false, "Keep stored secrets")
	args, err := a.parse(fs, args)
	if err != nil {
		return err
	}
	if err := argsCheck(args, 0, 0); err != nil {
		return err
	}
	// docker-sandboxes-cli.md §1.3 sbx reset: deletes all sandbox state,
	// policies and (unless --preserve-secrets) secrets.
	return a.store.Update(func(st *fakestate.State) error {
		if err := a.confirm(*force, "Reset Docker Sandboxes? This deletes all sandboxes, policies and secrets.", "sbx reset --force"); err != nil {
			return err
		}
		secrets := st.Secrets
		fresh := fakestate.New()
		fresh.Calls, fresh.Seq, fresh.NextPort = st.Calls, st.Seq, st.NextPort
		if *preserve {
			var keep []fakestate.Secret
			for _, s := range secrets {
				if s.Scope == "" {
					keep = append(keep, s)
				}
			}
			fresh.Secrets = keep
		}
		*st = *fresh
		return nil
	})
}
