package fakesbx

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/sbxhq/sbx/internal/fakecli"
	"github.com/sbxhq/sbx/internal/fakecli/fakestate"
)

// lsEntry is one sandbox of `sbx ls --json` (evidence §1.1): name, agent,
// status and workspaces (issue #201, v0.31.3), id (0.33.0), ports ([3P]),
// last_used_at (0.43.0) and created_at (0.45.0) as [3P] names them;
// workspace_missing from a [3P] v0.38 fixture. The CPU/memory field names
// of 0.45.0 are UNCONFIRMED, so the fake prints none.
type lsEntry struct {
	Name             string      `json:"name"`
	ID               string      `json:"id,omitempty"`
	Agent            string      `json:"agent"`
	Status           string      `json:"status"`
	Workspaces       []string    `json:"workspaces"`
	WorkspaceMissing *bool       `json:"workspace_missing,omitempty"`
	Ports            []portEntry `json:"ports,omitempty"`
	LastUsedAt       string      `json:"last_used_at,omitempty"`
	CreatedAt        string      `json:"created_at,omitempty"`
}

func (a *app) lsEntry(sb *fakestate.Sandbox) lsEntry {
	e := lsEntry{Name: sb.Name, Agent: sb.Agent, Status: sb.Status, Workspaces: []string{}}
	for _, w := range sb.Workspaces {
		e.Workspaces = append(e.Workspaces, w.String())
	}
	if a.Version.AtLeast("0.33.0") {
		e.ID = sb.ID
	}
	if a.Version.AtLeast("0.38.0") {
		missing := len(sb.Workspaces) > 0 && !fileExists(sb.Workspaces[0].Path)
		e.WorkspaceMissing = &missing
	}
	if len(sb.Ports) > 0 {
		e.Ports = portEntries(sb.Ports)
	}
	if a.Version.AtLeast(vAutoStop) {
		e.LastUsedAt = sb.LastUsedAt.Format(time.RFC3339)
	}
	if a.Version.AtLeast(vConfirm) {
		e.CreatedAt = sb.CreatedAt.Format(time.RFC3339)
	}
	return e
}

func (a *app) ls(args []string) error {
	fs := fakecli.Flags("ls")
	jsonFlag := fs.Bool("json", false, "Output in JSON format")
	quiet := fs.BoolP("quiet", "q", false, "Only display sandbox names")
	args, err := a.parse(fs, args)
	if err != nil {
		return err
	}
	if err := argsCheck(args, 0, 0); err != nil {
		return err
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
	switch {
	case *quiet:
		for _, sb := range sbs {
			fmt.Fprintln(a.Stdout, sb.Name)
		}
		return nil
	case *jsonFlag:
		entries := []lsEntry{}
		for _, sb := range sbs {
			entries = append(entries, a.lsEntry(sb))
		}
		return a.JSON(map[string]any{"sandboxes": entries})
	}
	// Format: docker-sandboxes-cli.md §2.5; the workspace is the primary
	// one, $HOME shown as ~; ports as in the v0.47.0 capture
	// (`127.0.0.1:18081->8080/tcp4`), comma-separated (UNCONFIRMED).
	rows := [][]string{{"SANDBOX", "AGENT", "STATUS", "PORTS", "WORKSPACE"}}
	for _, sb := range sbs {
		ws := ""
		if len(sb.Workspaces) > 0 {
			ws = a.tilde(sb.Workspaces[0].Path)
		}
		var ports []string
		for _, p := range sb.Ports {
			ports = append(ports, fmt.Sprintf("%s:%d->%d/%s", p.HostIP, p.HostPort, p.SandboxPort, p.Protocol))
		}
		rows = append(rows, []string{sb.Name, sb.Agent, sb.Status, strings.Join(ports, ","), ws})
	}
	return fakecli.Table(a.Stdout, rows)
}

func (a *app) tilde(p string) string {
	home := strings.TrimRight(a.Getenv("HOME"), "/")
	if home == "" {
		return p
	}
	if p == home {
		return "~"
	}
	if rest, ok := strings.CutPrefix(p, home+"/"); ok {
		return "~/" + rest
	}
	return p
}

// inspectJSON is `sbx inspect NAME --json`, evidence §1.7 ([3P-measured
// v0.38.0], sbx-go-sdk sandbox/summary.go): ports are strings, secrets are
// {name, source}, state (not status). The mount and CPU/memory keys of
// 0.43/0.45 are unknown, so the fake prints none.
type inspectJSON struct {
	Name          string          `json:"name"`
	Agent         string          `json:"agent"`
	Kits          []string        `json:"kits"`
	State         string          `json:"state"`
	Uptime        string          `json:"uptime,omitempty"`
	Workspace     string          `json:"workspace"`
	Image         string          `json:"image"`
	ImageDigest   string          `json:"image_digest"`
	Network       string          `json:"network"`
	NetworkPolicy networkPolicy   `json:"network_policy"`
	Proxy         string          `json:"proxy"`
	Secrets       []inspectSecret `json:"secrets"`
	MCPGateway    bool            `json:"mcp_gateway"`
	Ports         []string        `json:"ports"`
	Sessions      int             `json:"sessions"`
	DaemonVersion string          `json:"daemon_version"`
	DaemonUptime  string          `json:"daemon_uptime"`
}

type networkPolicy struct {
	Scope string `json:"scope"`
}

type inspectSecret struct {
	Name   string `json:"name"`
	Source string `json:"source"`
}

func (a *app) inspect(args []string) error {
	fs := fakecli.Flags("inspect")
	jsonFlag := fs.Bool("json", false, "Output in JSON format")
	args, err := a.parse(fs, args)
	if err != nil {
		return err
	}
	if err := argsCheck(args, 1, 1); err != nil {
		return err
	}
	var j inspectJSON
	if err := a.Store.View(func(st *fakestate.State) error {
		sb, err := a.lookup(st, args[0])
		if err != nil {
			return err
		}
		h := sha256.Sum256([]byte(sb.Template))
		j = inspectJSON{Name: sb.Name, Agent: sb.Agent, Kits: append([]string{}, sb.Kits...), State: sb.Status,
			Image: sb.Template, ImageDigest: "sha256:" + hex.EncodeToString(h[:]), Network: "sandbox",
			NetworkPolicy: networkPolicy{Scope: "global"}, Proxy: "172.17.0.2:3128", Secrets: []inspectSecret{},
			MCPGateway: true, Ports: []string{}, DaemonVersion: "v" + a.Version.String(), DaemonUptime: "1d"}
		if sb.Status == "running" {
			j.Uptime = short(a.Now.Sub(sb.StartedAt))
		}
		if len(sb.Workspaces) > 0 {
			j.Workspace = sb.Workspaces[0].Path
		}
		if len(sb.Network.Rules) > 0 {
			j.NetworkPolicy.Scope = sb.Name
		}
		for _, s := range st.Secrets {
			if s.Scope == "" || s.Scope == sb.Name {
				j.Secrets = append(j.Secrets, inspectSecret{Name: s.Name, Source: "uploaded"})
			}
		}
		for _, p := range sb.Ports {
			j.Ports = append(j.Ports, fmt.Sprintf("%s:%d->%d/%s", p.HostIP, p.HostPort, p.SandboxPort, p.Protocol))
		}
		return nil
	}); err != nil {
		return err
	}
	if *jsonFlag {
		return a.JSON(j)
	}
	// Format: docker-sandboxes-cli.md §2.7 (v0.39.0, issue #517), the
	// lines the fake has values for.
	w := a.Stdout
	fmt.Fprintf(w, "  Name:           %s\n", j.Name)
	fmt.Fprintf(w, "  Agent:            %s\n", j.Agent)
	fmt.Fprintf(w, "  State:          %s\n", j.State)
	fmt.Fprintf(w, "  Image:          %s\n", j.Image)
	fmt.Fprintf(w, "  Workspace:      %s\n", j.Workspace)
	fmt.Fprintf(w, "  Ports:          %s\n", strings.Join(j.Ports, ", "))
	fmt.Fprintf(w, "\n  Daemon:         %s   uptime 1d\n", j.DaemonVersion)
	return nil
}

// short renders a duration like "15s", "3m", "2h", "1d".
func short(d time.Duration) string {
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", max(0, int(d.Seconds())))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 24*time.Hour:
		return fmt.Sprintf("%dh", int(d.Hours()))
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}

// stop is `sbx stop SANDBOX...`; its line is the v0.47.0 capture's
// (evidence §3.1). It also ends detached mode.
func (a *app) stop(args []string) error {
	args, err := a.parse(fakecli.Flags("stop"), args)
	if err != nil {
		return err
	}
	if err := argsCheck(args, 1, -1); err != nil {
		return err
	}
	if err := a.Store.Update(func(st *fakestate.State) error {
		for _, n := range args {
			sb, err := a.lookup(st, n)
			if err != nil {
				return err
			}
			sb.Status, sb.Detached = "stopped", false
		}
		return nil
	}); err != nil {
		return err
	}
	for _, n := range args {
		fmt.Fprintf(a.Stdout, "Sandbox '%s' stopped; state preserved. Restart with: sbx run --name %s\n", n, n)
	}
	return nil
}

// rm is `sbx rm [SANDBOX...] [--all] [-f]`: removal asks first (0.29.0).
// The removal line is the one `sbx prune` printed in the v0.47.0 capture
// (UNCONFIRMED for rm).
func (a *app) rm(args []string) error {
	fs := fakecli.Flags("rm")
	all := fs.Bool("all", false, "Remove all sandboxes")
	force := fs.BoolP("force", "f", false, "Skip confirmation prompts and delete even if in use")
	args, err := a.parse(fs, args)
	if err != nil {
		return err
	}
	if !*all {
		if err := argsCheck(args, 1, -1); err != nil {
			return err
		}
	} else if len(args) > 0 {
		return errf("--all cannot be combined with sandbox names")
	}
	var removed []string
	if err := a.Store.Update(func(st *fakestate.State) error {
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
		ok, err := a.confirm(*force, fmt.Sprintf("Remove sandbox(es) %s?", strings.Join(names, ", ")), "sbx rm --force "+strings.Join(names, " "))
		if err != nil {
			return err
		}
		if !ok {
			return errf("cancelled")
		}
		for _, n := range names {
			st.Remove(n) // its rules and ports live on it; its scoped secrets go too (0.42.0)
			removed = append(removed, n)
		}
		return nil
	}); err != nil {
		return err
	}
	for _, n := range removed {
		fmt.Fprintf(a.Stdout, "Sandbox '%s' removed\n", n)
	}
	return nil
}

// exec is `sbx exec [flags] SANDBOX COMMAND [ARG...]` (docker-sandboxes-cli.md
// §1.3): starts a stopped sandbox first, runs in the primary workspace
// unless -w, -d is rejected (0.45.0; wording from the v0.47.0 help), a
// missing binary exits 127 (0.21.0), otherwise the command's own status.
func (a *app) exec(args []string) error {
	fs := fakecli.Flags("exec")
	f := fakecli.AddExecFlags(fs)
	args, err := a.parse(fs, args)
	if err != nil {
		return err
	}
	if *f.Detach && a.Version.AtLeast(vConfirm) {
		return errf("detached exec (-d/--detach) is not supported")
	}
	if err := argsCheck(args, 2, -1); err != nil {
		return err
	}
	var sb fakestate.Sandbox
	if err := a.Store.Update(func(st *fakestate.State) error {
		s, err := a.lookup(st, args[0])
		if err != nil {
			return err
		}
		a.start(s)
		sb = *s
		return nil
	}); err != nil {
		return err
	}
	extra := map[string]string{}
	if a.Version.AtLeast("0.39.0") {
		extra["SANDBOX_NAME"], extra["SANDBOX_ID"] = sb.Name, sb.ID
	}
	code, runErr := a.RunIn(&sb, f, args[1:], extra)
	// The session ended: the sandbox settles (auto-stop).
	if err := a.Store.Update(func(st *fakestate.State) error {
		if s := st.Find(sb.Name); s != nil {
			a.settle(s)
		}
		return nil
	}); err != nil {
		return err
	}
	var se *fakecli.StartError
	switch {
	case errors.As(runErr, &se):
		printError(a.Call, a.Stderr, errf("%v", runErr))
	case runErr != nil:
		return runErr
	}
	return &fakecli.Exit{Code: code}
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
