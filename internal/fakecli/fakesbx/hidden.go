package fakesbx

import (
	"fmt"
	"slices"
	"time"

	"github.com/sbxhq/sbx/internal/fakecli/fakestate"
)

// fakeAddLog appends a network-log entry for `sbx policy log` (test
// plumbing, not part of sbx): SANDBOX HOST allowed|blocked.
func (a *app) fakeAddLog(args []string) error {
	fs := newFlags("fake-add-log")
	typ := fs.String("type", "network", "")
	proxy := fs.String("proxy", "forward", "")
	rule := fs.String("rule", "", "")
	reason := fs.String("reason", "", "")
	count := fs.Int("count", 1, "")
	at := fs.String("time", "", "RFC 3339; default $FAKE_NOW")
	args, err := a.parse(fs, args)
	if err != nil {
		return err
	}
	if err := argsCheck(args, 3, 3); err != nil {
		return err
	}
	if !slices.Contains([]string{"allowed", "blocked"}, args[2]) {
		return fmt.Errorf("fake-add-log: action must be allowed or blocked")
	}
	t := a.now
	if *at != "" {
		if t, err = time.Parse(time.RFC3339, *at); err != nil {
			return err
		}
	}
	if *rule == "" {
		*rule = map[string]string{"allowed": "domain-allowed", "blocked": "domain-blocked"}[args[2]]
	}
	if *reason == "" && args[2] == "blocked" {
		*reason = "default-deny"
	}
	return a.store.Update(func(st *fakestate.State) error {
		st.Log = append(st.Log, fakestate.LogEntry{Time: t.UTC(), Sandbox: args[0], Type: *typ, Action: args[2],
			Host: args[1], Proxy: *proxy, Rule: *rule, Reason: *reason, Count: *count})
		return nil
	})
}

// fakeHide keeps NAME's name taken but drops it from ls (issue #109).
func (a *app) fakeHide(args []string) error {
	args, err := a.parse(newFlags("fake-hide"), args)
	if err != nil {
		return err
	}
	if err := argsCheck(args, 1, 1); err != nil {
		return err
	}
	return a.store.Update(func(st *fakestate.State) error {
		sb, err := a.lookup(st, args[0])
		if err != nil {
			return err
		}
		sb.Hidden = true
		return nil
	})
}

// fakeSetStatus sets NAME's status, e.g. to model an idle auto-stop.
func (a *app) fakeSetStatus(args []string) error {
	args, err := a.parse(newFlags("fake-set-status"), args)
	if err != nil {
		return err
	}
	if err := argsCheck(args, 2, 2); err != nil {
		return err
	}
	return a.store.Update(func(st *fakestate.State) error {
		sb, err := a.lookup(st, args[0])
		if err != nil {
			return err
		}
		sb.Status = args[1]
		return nil
	})
}
