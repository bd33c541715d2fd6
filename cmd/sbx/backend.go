package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"

	"github.com/sbxhq/sbx/driver"
	"github.com/sbxhq/sbx/driver/runner"
	"github.com/sbxhq/sbx/internal/untrusted"
	"github.com/sbxhq/sbx/session"
	"github.com/sbxhq/sbx/state"
)

// runner returns the invocation's command runner, in the environment sbx
// was given, tracing to $SBX_TRACE when set.
func (a *app) runner() *runner.Runner {
	if a.run != nil {
		return a.run
	}
	a.run = &runner.Runner{Env: a.env}
	if path := a.getenv("SBX_TRACE"); path != "" {
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
		if err != nil {
			fmt.Fprintf(a.stderr, "sbx: SBX_TRACE: %v (not tracing)\n", err)
		} else {
			a.closers = append(a.closers, f)
			a.run.Trace = f
		}
	}
	return a.run
}

// driverEnv is what the drivers are made with.
func (a *app) driverEnv() driver.Env {
	self, _ := os.Executable()
	return driver.Env{Runner: a.runner(), Self: self}
}

// lookupEnv reads sbx's environment as os.LookupEnv does.
func (a *app) lookupEnv(name string) (string, bool) {
	return (&runner.Runner{Env: a.env}).LookupEnv(name)
}

// getenv reads sbx's environment as os.Getenv does.
func (a *app) getenv(name string) string {
	v, _ := a.lookupEnv(name)
	return v
}

// stateDir is sbx's state directory.
func (a *app) stateDir() (state.Dir, error) {
	return state.Default(a.getenv)
}

// open starts a session on the sandboxes t names; with lock it takes
// their locks, saying when it waits for another sbx.
func (a *app) open(ctx context.Context, t *target, lock string) (*session.Session, error) {
	dir, err := a.stateDir()
	if err != nil {
		return nil, err
	}
	return session.Open(ctx, session.Options{
		Files: t.files, Driver: t.driver, NoLocal: t.noLocal,
		Lock: lock, LockTimeout: t.lockTimeout,
		OnLockWait: func(e *state.LockedError) {
			fmt.Fprintf(a.stderr, "sbx: sandbox %q is locked by %s; waiting up to %s\n", e.Sandbox, e.Holder, t.lockTimeout)
		},
		Env: a.driverEnv(), StateDir: dir, HostValue: a.hostValues.add,
	})
}

// writeJSON prints v as indented JSON, with what encoding/json leaves
// raw that a terminal could act on escaped (records quote the agent's
// output and the hosts it asked for).
func (a *app) writeJSON(v any) int {
	enc := json.NewEncoder(untrusted.JSONWriter{W: a.stdout})
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return a.errorf("%v", err)
	}
	return exitOK
}
