package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/sbxhq/sbx/reconcile"
	"github.com/sbxhq/sbx/spec"
)

// target is what the converging verbs share: which files, which driver.
type target struct {
	files       []string
	driver      string
	noLocal     bool
	adopt       bool
	lockTimeout time.Duration
}

func (t *target) register(fs *pflag.FlagSet) {
	fs.StringArrayVarP(&t.files, "file", "f", nil, "sandbox file or layer (repeatable; default ./sandbox.yaml)")
	fs.StringVar(&t.driver, "driver", "", "override the files' driver: sbx, docker-sandbox or docker")
	fs.BoolVar(&t.noLocal, "no-local", false, "do not merge sandbox.local.yaml")
}

func (t *target) registerAdopt(fs *pflag.FlagSet) {
	fs.BoolVar(&t.adopt, "adopt", false, "manage a same-named sandbox sbx did not create")
}

func (t *target) registerLock(fs *pflag.FlagSet) {
	fs.DurationVar(&t.lockTimeout, "lock-timeout", time.Minute, "how long to wait for another sbx working on the same sandbox")
}

// preflighter is a backend that rejects, before anything runs, what it
// cannot do for a sandbox.
type preflighter interface {
	Preflight(sp *spec.Spec) error
}

// session is one observation of the declared sandboxes on their backend.
type session struct {
	specs   []*spec.Spec
	backend backend
	version string
	store   *reconcile.Store
	desired []reconcile.Desired
	live    map[string]*reconcile.Live
	records map[string]*reconcile.Record
	secrets map[string]reconcile.Secrets
	locks   []*reconcile.Lock
}

func (s *session) names() []string {
	var names []string
	for _, sp := range s.specs {
		names = append(names, sp.Name)
	}
	return names
}

func (s *session) release() {
	for _, l := range s.locks {
		l.Release()
	}
}

// open loads the files, picks the backend and, when lock is set, takes the
// sandboxes' locks, then observes them. needSecrets resolves the secret
// values (plan and apply fingerprint them; destroy and status do not).
func (a *app) open(ctx context.Context, t *target, lock string, needSecrets bool) (*session, error) {
	res, err := a.load(t.files, spec.Options{NoLocal: t.noLocal})
	if err != nil {
		return nil, err
	}
	specs := res.Specs
	seen := map[string]string{}
	for _, sp := range specs {
		if t.driver != "" {
			sp.Driver = t.driver
		}
		if prev, dup := seen[sp.Name]; dup {
			return nil, fmt.Errorf("sandbox %q is declared by both %s and %s", sp.Name, prev, sp.Files[0])
		}
		seen[sp.Name] = sp.Files[0]
	}
	b, err := a.backendFor(ctx, specs)
	if err != nil {
		return nil, err
	}
	if pf, ok := b.backend.(preflighter); ok {
		for _, sp := range specs {
			if err := pf.Preflight(sp); err != nil {
				return nil, err
			}
		}
	}
	s := &session{specs: specs, backend: b.backend, version: b.version}
	dir, err := reconcile.DefaultStateDir(a.getenv)
	if err != nil {
		return nil, err
	}
	if s.store, err = reconcile.OpenStore(dir); err != nil {
		return nil, err
	}
	if lock != "" {
		names := s.names()
		sort.Strings(names)
		for _, n := range names {
			l, err := reconcile.AcquireLock(ctx, dir, n, reconcile.LockOptions{Command: lock})
			if err != nil {
				// Held by another sbx: say so, then wait for it.
				holder, _, _ := strings.Cut(err.Error(), "; gave up")
				fmt.Fprintf(a.stderr, "sbx: %s; waiting up to %s\n", holder, t.lockTimeout)
				l, err = reconcile.AcquireLock(ctx, dir, n, reconcile.LockOptions{Timeout: t.lockTimeout, Command: lock})
			}
			if err != nil {
				s.release()
				return nil, err
			}
			s.locks = append(s.locks, l)
		}
	}
	if err := s.observe(ctx); err != nil {
		s.release()
		return nil, err
	}
	if needSecrets {
		if err := a.resolveSecrets(ctx, s); err != nil {
			s.release()
			return nil, err
		}
	}
	return s, nil
}

// observe reads the live sandboxes and their last-applied records. The
// store is the record of truth; a record the backend keeps with the sandbox
// (docker labels) stands in when this machine has none.
func (s *session) observe(ctx context.Context) error {
	names := s.names()
	live, err := s.backend.Observe(ctx, names)
	if err != nil {
		return err
	}
	records, err := s.store.Records(s.backend.Name(), names)
	if err != nil {
		return err
	}
	for n, l := range live {
		if records[n] == nil && l != nil && l.Record != nil {
			records[n] = l.Record
		}
	}
	s.live, s.records = live, records
	return nil
}

// resolveSecrets reads every secret's value on the host and fingerprints
// the desired state with this machine's key.
func (a *app) resolveSecrets(ctx context.Context, s *session) error {
	key, err := s.store.Key()
	if err != nil {
		return err
	}
	s.secrets = map[string]reconcile.Secrets{}
	s.desired = nil
	for _, sp := range s.specs {
		vals, err := a.secretValues(ctx, sp)
		if err != nil {
			return err
		}
		s.secrets[sp.Name] = vals
		hash, err := s.backend.BuildHash(sp)
		if err != nil {
			return err
		}
		d, err := reconcile.NewDesired(sp, key, vals, hash)
		if err != nil {
			return err
		}
		s.desired = append(s.desired, d)
	}
	return nil
}

// plan decides what apply would do.
func (s *session) plan(adopt bool) *reconcile.Changes {
	return reconcile.Plan(s.desired, s.live, s.records, s.backend.Caps(), reconcile.Options{Adopt: adopt, DriverVersion: s.version})
}

func planVerb() *verb {
	return &verb{
		name:    "plan",
		summary: "show what apply would change, field by field, and why",
		usage:   "[flags]",
		help: `Reads the sandbox files, observes the live sandboxes (one listing, at most
one policy read per sandbox; nothing is changed) and prints the actions apply
would take, each field with the reason for it. Changes made outside sbx are
listed under "Changed outside sbx".

Exit status: 0 with no errors (and, with --detailed-exitcode, no changes),
1 on error, 2 with --detailed-exitcode when changes are pending.`,
		setup: func(fs *pflag.FlagSet) runFunc {
			t := &target{}
			t.register(fs)
			t.registerAdopt(fs)
			asJSON := fs.Bool("json", false, "print the plan as a versioned JSON document (docs/plan-json.md)")
			out := fs.String("out", "", "save the plan to FILE for 'sbx apply FILE'")
			detailed := fs.Bool("detailed-exitcode", false, "exit 2 when changes are pending")
			return func(ctx context.Context, a *app, args []string) int {
				if len(args) > 0 {
					return a.errorf("plan takes no arguments; name files with -f")
				}
				s, err := a.open(ctx, t, "", true)
				if err != nil {
					return a.fail(err)
				}
				p := s.plan(t.adopt)
				if err := p.Err(); err != nil {
					return a.errorf("%v", err)
				}
				if *asJSON {
					err = reconcile.WriteJSON(a.stdout, p)
				} else {
					err = a.render(p, s)
				}
				if err != nil {
					return a.errorf("%v", err)
				}
				if *out != "" {
					if err := savePlan(*out, p); err != nil {
						return a.errorf("%v", err)
					}
					if !*asJSON {
						fmt.Fprintf(a.stdout, "\nSaved the plan to %s. Apply exactly it with: sbx apply %s\n", *out, *out)
					}
				}
				if *detailed && !p.Empty() {
					return exitChanges
				}
				return exitOK
			}
		},
	}
}

func savePlan(path string, p *reconcile.Changes) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if err := p.Save(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// render prints a plan for people, or the no-changes line.
func (a *app) render(p *reconcile.Changes, s *session) error {
	if p.Empty() {
		for _, n := range s.names() {
			fmt.Fprintf(a.stdout, "No changes. Sandbox %q matches its sandbox.yaml (driver: %s).\n", n, p.Driver)
		}
		return nil
	}
	return reconcile.Render(a.stdout, p, a.color(a.stdout))
}

func applyVerb() *verb {
	return &verb{
		name:    "apply",
		summary: "make the live sandboxes match the files",
		usage:   "[flags] [PLANFILE]",
		help: `Plans as 'sbx plan' does, shows the plan, asks for confirmation, and runs
the steps in order. With PLANFILE (from 'sbx plan --out'), applies exactly
that plan, and refuses if the live sandbox changed since it was made. On a
terminal apply asks for "yes"; elsewhere it refuses without -y. After the
last step it observes again and fails if anything is still pending.`,
		setup: func(fs *pflag.FlagSet) runFunc {
			t := &target{}
			t.register(fs)
			t.registerAdopt(fs)
			t.registerLock(fs)
			yes := fs.BoolP("auto-approve", "y", false, "apply without asking")
			return func(ctx context.Context, a *app, args []string) int {
				if len(args) > 1 {
					return a.errorf("apply takes at most one argument, a saved plan")
				}
				s, err := a.open(ctx, t, "sbx apply", true)
				if err != nil {
					return a.fail(err)
				}
				defer s.release()
				var p *reconcile.Changes
				if len(args) == 1 {
					if p, err = loadPlan(args[0]); err != nil {
						return a.errorf("%v", err)
					}
					if err := p.Rebind(s.desired, s.live, s.records); err != nil {
						return a.errorf("%v", err)
					}
				} else {
					p = s.plan(t.adopt)
				}
				if err := p.Err(); err != nil {
					return a.errorf("%v", err)
				}
				if err := a.render(p, s); err != nil {
					return a.errorf("%v", err)
				}
				if p.Empty() {
					return exitOK
				}
				if code, ok := a.confirm(*yes, "apply"); !ok {
					return code
				}
				return a.execute(ctx, s, p, func() *reconcile.Changes { return s.plan(t.adopt) })
			}
		},
	}
}

func loadPlan(path string) (*reconcile.Changes, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	p, err := reconcile.LoadPlan(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	return p, nil
}

// execute runs a plan, then observes again and checks that nothing is left.
func (a *app) execute(ctx context.Context, s *session, p *reconcile.Changes, replan func() *reconcile.Changes) int {
	err := reconcile.Apply(ctx, s.backend, p, reconcile.ApplyOptions{
		Records: s.store,
		Secrets: s.secrets,
		Progress: func(i, n int, st reconcile.Step) {
			fmt.Fprintf(a.stdout, "[%d/%d] %s\n", i, n, st)
		},
	})
	if err != nil {
		return a.errorf("%v\nNothing after the failed step was done; fix the cause and run the same command again to finish.", err)
	}
	if err := s.observe(ctx); err != nil {
		return a.errorf("after apply: %v", err)
	}
	if err := reconcile.Converged(replan()); err != nil {
		return a.errorf("%v", err)
	}
	c, u, r, d := p.Count()
	if p.Kind == "destroy" {
		fmt.Fprintf(a.stdout, "\nDestroy complete: %d destroyed.\n", d)
		return exitOK
	}
	fmt.Fprintf(a.stdout, "\nApply complete: %d created, %d updated, %d replaced, %d destroyed.\n", c, u, r, d)
	return exitOK
}

// confirm asks for "yes" on a terminal; off a terminal only -y approves.
func (a *app) confirm(yes bool, what string) (int, bool) {
	if yes {
		return exitOK, true
	}
	if !isTerminal(a.stdin) {
		fmt.Fprintf(a.stderr, "sbx: %s needs approval: run it on a terminal to answer, or pass -y (--auto-approve)\n", what)
		return exitError, false
	}
	fmt.Fprintf(a.stdout, "\nDo you want to %s these changes? Only 'yes' will be accepted: ", what)
	line, _ := bufio.NewReader(a.stdin).ReadString('\n')
	if strings.TrimSpace(line) != "yes" {
		fmt.Fprintf(a.stderr, "sbx: %s cancelled; nothing was changed\n", what)
		return exitError, false
	}
	return exitOK, true
}

func destroyVerb() *verb {
	return &verb{
		name:    "destroy",
		summary: "remove the declared sandboxes",
		usage:   "[flags]",
		help: `Removes the sandboxes the files declare and forgets their records. Workspace
files on the host are kept. A same-named sandbox sbx did not create is left
alone unless --adopt is given.`,
		setup: func(fs *pflag.FlagSet) runFunc {
			t := &target{}
			t.register(fs)
			t.registerAdopt(fs)
			t.registerLock(fs)
			yes := fs.BoolP("auto-approve", "y", false, "destroy without asking")
			return func(ctx context.Context, a *app, args []string) int {
				if len(args) > 0 {
					return a.errorf("destroy takes no arguments; name files with -f")
				}
				s, err := a.open(ctx, t, "sbx destroy", false)
				if err != nil {
					return a.fail(err)
				}
				defer s.release()
				replan := func() *reconcile.Changes {
					return reconcile.PlanDestroy(s.names(), s.live, s.records, s.backend.Caps(), reconcile.Options{Adopt: t.adopt, DriverVersion: s.version})
				}
				p := replan()
				if err := p.Err(); err != nil {
					return a.errorf("%v", err)
				}
				if p.Empty() {
					fmt.Fprintln(a.stdout, "Nothing to destroy.")
					return exitOK
				}
				if err := reconcile.Render(a.stdout, p, a.color(a.stdout)); err != nil {
					return a.errorf("%v", err)
				}
				if code, ok := a.confirm(*yes, "destroy"); !ok {
					return code
				}
				return a.execute(ctx, s, p, replan)
			}
		},
	}
}

func statusVerb() *verb {
	return &verb{
		name:    "status",
		summary: "show each declared sandbox: live or not, in sync or drifted",
		usage:   "[flags]",
		setup: func(fs *pflag.FlagSet) runFunc {
			t := &target{}
			t.register(fs)
			asJSON := fs.Bool("json", false, "print as JSON")
			return func(ctx context.Context, a *app, args []string) int {
				if len(args) > 0 {
					return a.errorf("status takes no arguments; name files with -f")
				}
				s, err := a.open(ctx, t, "", true)
				if err != nil {
					return a.fail(err)
				}
				return a.status(s, *asJSON)
			}
		},
	}
}

// sandboxStatus is one row of `sbx status`.
type sandboxStatus struct {
	Name    string           `json:"name"`
	Driver  string           `json:"driver"`
	File    string           `json:"file"`
	Exists  bool             `json:"exists"`
	Status  string           `json:"status,omitempty"`
	State   string           `json:"state"` // in-sync, changes-pending, drifted, absent, unmanaged
	Pending int              `json:"pending_changes"`
	Drift   []reconcile.Diff `json:"drift"`
}

func (a *app) status(s *session, asJSON bool) int {
	p := s.plan(false)
	byName := map[string]*reconcile.SandboxChange{}
	for _, c := range p.Sandboxes {
		byName[c.Sandbox] = c
	}
	var rows []sandboxStatus
	for _, sp := range s.specs {
		r := sandboxStatus{Name: sp.Name, Driver: s.backend.Name(), File: sp.Files[0], Drift: []reconcile.Diff{}}
		l := s.live[sp.Name]
		if l != nil && l.Exists {
			r.Exists, r.Status = true, l.Status
		}
		c := byName[sp.Name]
		switch {
		case !r.Exists:
			r.State = "absent"
		case c == nil:
			r.State = "unmanaged"
		case len(c.Drift) > 0:
			r.State, r.Drift = "drifted", c.Drift
		case c.Action != reconcile.ActionNoOp:
			r.State = "changes-pending"
		default:
			r.State = "in-sync"
		}
		if c != nil {
			r.Pending = len(c.Changes)
		}
		rows = append(rows, r)
	}
	if asJSON {
		return a.writeJSON(map[string]any{"sandboxes": rows, "errors": nonNil(p.Errors)})
	}
	for _, r := range rows {
		live := "not created"
		if r.Exists {
			live = r.Status
		}
		fmt.Fprintf(a.stdout, "%s  (%s, %s)\n  declared in %s\n  live: %s\n", r.Name, r.Driver, strings.ReplaceAll(r.State, "-", " "), r.File, live)
		if r.Pending > 0 {
			fmt.Fprintf(a.stdout, "  %d change(s) pending; run 'sbx plan' to see them\n", r.Pending)
		}
		for _, d := range r.Drift {
			fmt.Fprintf(a.stdout, "  changed outside sbx: %s\n", d)
		}
	}
	for _, e := range p.Errors {
		fmt.Fprintf(a.stdout, "error: %s\n", e)
	}
	return exitOK
}

func nonNil(ss []string) []string {
	if ss == nil {
		return []string{}
	}
	return ss
}

// secretValues reads a sandbox's secrets on the host: from the environment
// or from a command's trimmed output. Values are registered for redaction.
func (a *app) secretValues(ctx context.Context, sp *spec.Spec) (reconcile.Secrets, error) {
	out := reconcile.Secrets{}
	names := make([]string, 0, len(sp.Secrets))
	for n := range sp.Secrets {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		sec := sp.Secrets[n]
		switch {
		case sec.Env != "":
			v, ok := a.lookupEnv(sec.Env)
			if !ok || v == "" {
				return nil, fmt.Errorf("sandbox %q: secret %s: environment variable %s is not set", sp.Name, n, sec.Env)
			}
			out[n] = v
		case len(sec.Command) > 0:
			v, err := a.runSecretCommand(ctx, sec.Command)
			if err != nil {
				return nil, fmt.Errorf("sandbox %q: secret %s: %v", sp.Name, n, err)
			}
			out[n] = v
		}
		a.runner().Redact(out[n])
	}
	return out, nil
}

// fail prints an error; problems in the files print one per line.
func (a *app) fail(err error) int {
	var ds spec.Diagnostics
	if errors.As(err, &ds) {
		for _, d := range ds {
			fmt.Fprintln(a.stderr, d)
		}
		return exitError
	}
	return a.errorf("%v", err)
}

// isTerminal reports whether a stream (stdin or stdout) is a terminal.
func isTerminal(stream any) bool {
	f, ok := stream.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// color reports whether output to w may be coloured: a terminal, and no
// NO_COLOR in the environment.
func (a *app) color(w io.Writer) bool {
	_, noColor := a.lookupEnv("NO_COLOR")
	return !noColor && isTerminal(w)
}
