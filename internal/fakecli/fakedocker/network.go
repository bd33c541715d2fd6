package fakedocker

import (
	"fmt"
	"net"
	"slices"
	"time"

	"github.com/sbxhq/sbx/internal/fakecli"
	"github.com/sbxhq/sbx/internal/fakecli/fakestate"
)

// networkProxy is `docker sandbox network proxy SANDBOX [OPTIONS]`
// (docker-sandboxes-cli.md §1.2, §3.5). Flags only add, except --allow-cidr,
// which removes a CIDR from the block and bypass lists: there is no way to
// remove an allow-host or block-host entry. "The sandbox must be running".
// Output UNCONFIRMED (none).
func (a *app) networkProxy(args []string) error {
	fs := fakecli.Flags("network proxy")
	policy := fs.String("policy", "", "Set the default policy (allow|deny)")
	allowHost := fs.StringArray("allow-host", nil, "Permit access to a domain or IP")
	blockHost := fs.StringArray("block-host", nil, "Block access to a domain or IP")
	bypassHost := fs.StringArray("bypass-host", nil, "Bypass MITM proxy for a domain or IP")
	allowCIDR := fs.StringArray("allow-cidr", nil, "Remove an IP range in CIDR notation from the block or bypass lists")
	blockCIDR := fs.StringArray("block-cidr", nil, "Block access to an IP range in CIDR notation")
	bypassCIDR := fs.StringArray("bypass-cidr", nil, "Bypass MITM proxy for an IP range in CIDR notation")
	args, err := a.parse(fs, args)
	if err != nil {
		return err
	}
	if err := a.exactArgs(args, 1, "docker sandbox network proxy <sandbox> [OPTIONS]"); err != nil {
		return err
	}
	if *policy != "" && *policy != "allow" && *policy != "deny" {
		return &fakecli.Error{Msg: fmt.Sprintf("invalid argument %q for \"--policy\" flag: must be allow or deny\nSee 'docker sandbox network proxy --help'.", *policy), Code: 125}
	}
	for _, list := range [][]string{*allowCIDR, *blockCIDR, *bypassCIDR} {
		for _, c := range list {
			if _, _, err := net.ParseCIDR(c); err != nil {
				return errf("invalid CIDR %q", c)
			}
		}
	}
	return a.Store.Update(func(st *fakestate.State) error {
		sb, err := a.lookup(st, args[0])
		if err != nil {
			return err
		}
		if sb.Status != "running" {
			return errf("sandbox %q is not running: start it before changing its network policy", sb.Name) // UNCONFIRMED wording
		}
		n := &sb.Network
		if *policy != "" {
			n.Default = *policy
		}
		add := func(decision string, hosts []string) {
			for _, h := range hosts {
				if !slices.ContainsFunc(n.Rules, func(x fakestate.Rule) bool { return x.Decision == decision && x.Resources[0] == h }) {
					n.Rules = append(n.Rules, fakestate.Rule{ID: st.NewID("rule"), Decision: decision, Resources: []string{h}})
				}
			}
		}
		add("allow", *allowHost)
		add("deny", *blockHost)
		appendNew := func(list *[]string, items []string) {
			for _, x := range items {
				if !slices.Contains(*list, x) {
					*list = append(*list, x)
				}
			}
		}
		appendNew(&n.BypassHosts, *bypassHost)
		appendNew(&n.BlockCIDRs, *blockCIDR)
		appendNew(&n.BypassCIDRs, *bypassCIDR)
		for _, c := range *allowCIDR {
			n.BlockCIDRs = slices.DeleteFunc(n.BlockCIDRs, func(x string) bool { return x == c })
			n.BypassCIDRs = slices.DeleteFunc(n.BypassCIDRs, func(x string) bool { return x == c })
		}
		return nil
	})
}

// logEntry is one entry of `network log --json`.
// Format: docker-sandboxes-cli.md §2.4.
type logEntry struct {
	Timestamp string `json:"timestamp"`
	Sandbox   string `json:"sandbox"`
	Type      string `json:"type"`
	Method    string `json:"method"`
	URL       string `json:"url"`
	Action    string `json:"action"`
}

// networkLog is `docker sandbox network log [--json] [--limit N] [-q]`.
// --limit keeps the newest N (UNCONFIRMED which end); -q prints the same
// lines, the text form having no header to drop.
func (a *app) networkLog(args []string) error {
	fs := fakecli.Flags("network log")
	jsonFlag := fs.Bool("json", false, "Output in JSON format")
	limit := fs.Int("limit", 0, "Maximum number of log entries to show")
	fs.BoolP("quiet", "q", false, "Only display log entries")
	args, err := a.parse(fs, args)
	if err != nil {
		return err
	}
	if len(args) > 0 {
		return errf("\"docker sandbox network log\" accepts no arguments.")
	}
	var entries []fakestate.LogEntry
	if err := a.Store.View(func(st *fakestate.State) error {
		for _, e := range st.Log {
			if e.URL != "" {
				entries = append(entries, e)
			}
		}
		return nil
	}); err != nil {
		return err
	}
	if *limit > 0 && len(entries) > *limit {
		entries = entries[len(entries)-*limit:]
	}
	if *jsonFlag {
		out := []logEntry{}
		for _, e := range entries {
			out = append(out, logEntry{Timestamp: e.Time.Format(time.RFC3339), Sandbox: e.Sandbox, Type: e.Type,
				Method: e.Method, URL: e.URL, Action: e.Action})
		}
		return a.JSON(map[string]any{"entries": out})
	}
	// Format: docker-sandboxes-cli.md §2.4 text lines.
	for _, e := range entries {
		fmt.Fprintf(a.Stdout, "%s sandbox=%s %s %s %s %s\n", e.Time.Format(time.RFC3339), e.Sandbox, e.Type, e.Method, e.URL, e.Action)
	}
	return nil
}

// fakeAddLog appends a G2 network-log entry (test plumbing): SANDBOX METHOD
// URL allowed|denied.
func (a *app) fakeAddLog(args []string) error {
	fs := fakecli.Flags("fake-add-log")
	at := fs.String("time", "", "RFC 3339; default $FAKE_NOW")
	args, err := a.parse(fs, args)
	if err != nil {
		return err
	}
	if len(args) != 4 || (args[3] != "allowed" && args[3] != "denied") {
		return errf("usage: docker sandbox fake-add-log SANDBOX METHOD URL allowed|denied [--time RFC3339]")
	}
	t := a.Now
	if *at != "" {
		if t, err = time.Parse(time.RFC3339, *at); err != nil {
			return err
		}
	}
	return a.Store.Update(func(st *fakestate.State) error {
		st.Log = append(st.Log, fakestate.LogEntry{Time: t.UTC(), Sandbox: args[0], Type: "request",
			Method: args[1], URL: args[2], Action: args[3]})
		return nil
	})
}

// fakeSetStatus sets a sandbox's status (test plumbing).
func (a *app) fakeSetStatus(args []string) error {
	args, err := a.parse(fakecli.Flags("fake-set-status"), args)
	if err != nil {
		return err
	}
	if len(args) != 2 {
		return errf("usage: docker sandbox fake-set-status NAME running|stopped")
	}
	return a.Store.Update(func(st *fakestate.State) error {
		sb, err := a.lookup(st, args[0])
		if err != nil {
			return err
		}
		sb.Status = args[1]
		return nil
	})
}
