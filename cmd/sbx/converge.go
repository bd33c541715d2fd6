package main

import (
	"bufio"
	"bytes"
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
// sandboxes' locks, then observes them and fingerprints what the files
// want. It reads no secret and runs no host command: no plan needs them.
func (a *app) open(ctx context.Context, t *target, lock string) (*session, error) {
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
	if err := s.desire(); err != nil {
		s.release()
		return nil, err
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

// desire fingerprints what the files want with this machine's key, and
// attaches what the user last approved for each sandbox (on this machine;
// else the record the backend keeps with the sandbox).
func (s *session) desire() error {
	key, err := s.store.Key()
	if err != nil {
		return err
	}
	s.desired = nil
	for _, sp := range s.specs {
		hash, err := s.backend.BuildHash(sp)
		if err != nil {
			return err
		}
		d, err := reconcile.NewDesired(sp, key, hash)
		if err != nil {
			return err
		}
		if d.Approved, err = s.approved(sp.Name); err != nil {
			return err
		}
		s.desired = append(s.desired, d)
	}
	return nil
}

// approved is what the user last approved for a sandbox: the last record
// applied on this machine, else the record kept with the sandbox.
func (s *session) approved(name string) (*reconcile.Record, error) {
	r, err := s.store.Approved(name)
	if r != nil || err != nil {
		return r, err
	}
	return s.records[name], nil
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
				s, err := a.open(ctx, t, "")
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

// savePlan writes the plan for 'sbx apply FILE', replacing FILE (a link
// there is replaced, not followed).
func savePlan(path string, p *reconcile.Changes) error {
	var b bytes.Buffer
	if err := p.Save(&b); err != nil {
		return err
	}
	return replaceFile(path, b.Bytes(), 0o600)
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
that plan without asking again (the plan was the review), and refuses it if
the files or the live sandbox changed since it was made. On a terminal apply
asks for "yes"; elsewhere it refuses without -y. A plan that widens what a
sandbox may do beyond what you last approved (more egress, host paths, host
secrets or commands, a weaker runtime, higher limits, another template) is
listed as such; -y applies it only with --approve-widening. After the last
step apply observes again and fails if anything is still pending.`,
		setup: func(fs *pflag.FlagSet) runFunc {
			t := &target{}
			t.register(fs)
			t.registerAdopt(fs)
			t.registerLock(fs)
			ap := &approval{}
			ap.register(fs)
			return func(ctx context.Context, a *app, args []string) int {
				if len(args) > 1 {
					return a.errorf("apply takes at most one argument, a saved plan")
				}
				s, err := a.open(ctx, t, "sbx apply")
				if err != nil {
					return a.fail(err)
				}
				defer s.release()
				var p *reconcile.Changes
				if len(args) == 1 {
					if p, err = a.savedPlan(s, args[0]); err != nil {
						return a.errorf("%v", err)
					}
					ap.reviewed = true
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
				if code, ok := a.approve(p, ap, "apply"); !ok {
					return code
				}
				adopt := t.adopt || p.Adopts()
				return a.execute(ctx, s, p, func() *reconcile.Changes { return s.plan(adopt) })
			}
		},
	}
}

// approval is how a verb that converges is approved: -y, and
// --approve-widening for a plan that widens what a sandbox may do.
type approval struct {
	yes, widening bool
	// reviewed is set for a saved plan: it was shown when it was made.
	reviewed bool
}

func (ap *approval) register(fs *pflag.FlagSet) {
	fs.BoolVarP(&ap.yes, "auto-approve", "y", false, "apply without asking")
	fs.BoolVar(&ap.widening, "approve-widening", false, "with -y, also apply changes that widen what a sandbox may do (listed in the plan)")
}

// approve decides whether a plan may run. A saved plan was the review. On
// a terminal the user answers "yes" to the plan shown, widenings listed.
// Off a terminal -y approves it, but a plan that widens a sandbox beyond
// what was last approved also needs --approve-widening: the change may
// come from a file the agent inside wrote.
func (a *app) approve(p *reconcile.Changes, ap *approval, what string) (int, bool) {
	switch {
	case ap.reviewed:
		return exitOK, true
	case ap.yes && p.Widens() && !ap.widening:
		fmt.Fprintf(a.stderr, "sbx: %s refused: the plan widens what the sandbox may do (listed above under \"This plan widens\"); review it and run %s on a terminal, or pass --approve-widening with -y\n", what, what)
		return exitError, false
	}
	return a.confirm(ap.yes, what)
}

// savedPlan loads a plan saved by 'sbx plan --out' and checks that it is
// exactly what sbx would plan now: made from the same files and the same
// live state, and not edited since (the file may sit where the sandbox can
// write it).
func (a *app) savedPlan(s *session, path string) (*reconcile.Changes, error) {
	p, err := loadPlan(path)
	if err != nil {
		return nil, err
	}
	if err := p.Rebind(s.desired, s.live, s.records); err != nil {
		return nil, err
	}
	if err := p.Matches(s.plan(p.Adopts())); err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	return p, nil
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
	a.unsetSecrets(s)
	return exitOK
}

// unsetSecrets says which secrets this shell cannot give the sandbox:
// apply needs none, but sbx shell and sbx loop pass them to each exec.
func (a *app) unsetSecrets(s *session) {
	for _, sp := range s.specs {
		for _, n := range sortedNames(sp.Secrets) {
			if env := sp.Secrets[n].Env; env != "" {
				if v, ok := a.lookupEnv(env); !ok || v == "" {
					fmt.Fprintf(a.stderr, "sbx: note: secret %s of sandbox %q: %s is not set in this shell; export it before 'sbx shell' or 'sbx loop' (or remove the secret from %s if the agent signs in another way)\n", n, sp.Name, env, sp.Files[0])
				}
			}
		}
	}
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
				s, err := a.open(ctx, t, "sbx destroy")
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
				s, err := a.open(ctx, t, "")
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

// secretValues reads a sandbox's secrets on the host, for an exec: from
// the environment, or from a host command the user approved ('sbx apply'
// lists every new or changed command as a widening and asks). A command
// that was not approved never runs. Values are registered for redaction.
func (a *app) secretValues(ctx context.Context, s *session, sp *spec.Spec) (reconcile.Secrets, error) {
	d := s.desiredOf(sp.Name)
	out := reconcile.Secrets{}
	var problems []string
	for _, n := range sortedNames(sp.Secrets) {
		sec := sp.Secrets[n]
		switch {
		case sec.Env != "":
			v, ok := a.lookupEnv(sec.Env)
			if !ok || v == "" {
				problems = append(problems, fmt.Sprintf("secret %s: environment variable %s is not set in this shell; export it, or remove the secret from %s if the agent signs in another way", n, sec.Env, sp.Files[0]))
				continue
			}
			out[n] = v
		case len(sec.Command) > 0:
			if !reconcile.CommandApproved(d, n) {
				problems = append(problems, fmt.Sprintf("secret %s: its host command (%s) is not approved on this machine; run 'sbx apply' to review and approve it", n, reconcile.SecretSource(sec)))
				continue
			}
			v, err := a.runSecretCommand(ctx, sec.Command)
			if err != nil {
				problems = append(problems, fmt.Sprintf("secret %s: %v", n, err))
				continue
			}
			out[n] = v
		}
		a.runner().Redact(out[n])
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("sandbox %q: %s", sp.Name, strings.Join(problems, "; "))
	}
	return out, nil
}

// desiredOf is the desired state of one of the session's sandboxes.
func (s *session) desiredOf(name string) reconcile.Desired {
	for _, d := range s.desired {
		if d.Spec.Name == name {
			return d
		}
	}
	return reconcile.Desired{}
}

func sortedNames[V any](m map[string]V) []string {
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
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
