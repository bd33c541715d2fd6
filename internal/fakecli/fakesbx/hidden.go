package fakesbx

import (
	"slices"
	"time"

	"github.com/sbxhq/sbx/internal/fakecli"
	"github.com/sbxhq/sbx/internal/fakecli/fakestate"
)

// fakeAddLog appends a network-log entry for `sbx policy log` (test
// plumbing, not part of sbx): SANDBOX HOST[:PORT] allowed|blocked.
func (a *app) fakeAddLog(args []string) error {
	fs := fakecli.Flags("fake-add-log")
	proxy := fs.String("proxy", "forward", "")
	rule := fs.String("rule", "", "")
	reason := fs.String("reason", "", "")
	count := fs.Int("count", 1, "")
	at := fs.String("time", "", "RFC 3339; default $FAKE_NOW")
	args, err := a.parse(fs, args)
	if err != nil {
		return err
	}
	if len(args) != 3 || !slices.Contains([]string{"allowed", "blocked"}, args[2]) {
		return errf("usage: sbx fake-add-log SANDBOX HOST allowed|blocked")
	}
	t := a.Now
	if *at != "" {
		if t, err = time.Parse(time.RFC3339, *at); err != nil {
			return err
		}
	}
	host := args[1]
	if _, port := splitHostPort(host); port == "" {
		host += ":443"
	}
	if *rule == "" {
		*rule = map[string]string{"allowed": "domain-allowed", "blocked": "domain-blocked"}[args[2]]
	}
	if *reason == "" && args[2] == "blocked" {
		*reason = "No matching allow rule (default deny)" // evidence §1.6: "…default deny…"
	}
	return a.Store.Update(func(st *fakestate.State) error {
		st.Log = append(st.Log, fakestate.LogEntry{Time: t.UTC(), Sandbox: args[0], Type: "network", Action: args[2],
			Host: host, Proxy: *proxy, Rule: *rule, Reason: *reason, Count: *count})
		return nil
	})
}

// fakeHide keeps NAME's name taken but drops it from ls (issue #109).
func (a *app) fakeHide(args []string) error {
	return a.setSandbox(args, 1, func(sb *fakestate.Sandbox) { sb.Hidden = true })
}

// fakeSetStatus sets NAME's status.
func (a *app) fakeSetStatus(args []string) error {
	return a.setSandbox(args, 2, func(sb *fakestate.Sandbox) { sb.Status = args[len(args)-1] })
}

func (a *app) setSandbox(args []string, n int, set func(*fakestate.Sandbox)) error {
	args, err := a.parse(fakecli.Flags(a.Path[0]), args)
	if err != nil {
		return err
	}
	if err := argsCheck(args, n, n); err != nil {
		return err
	}
	return a.Store.Update(func(st *fakestate.State) error {
		sb, err := a.lookup(st, args[0])
		if err != nil {
			return err
		}
		set(sb)
		return nil
	})
}
