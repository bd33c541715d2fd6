package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/sbxhq/sbx/internal/atomicfile"
	"github.com/sbxhq/sbx/internal/untrusted"
	"github.com/sbxhq/sbx/reconcile"
	"github.com/sbxhq/sbx/session"
	"github.com/sbxhq/sbx/spec"
)

// exitInterrupted is the exit code of a verb stopped by Ctrl-C or SIGTERM,
// as a shell reports a process killed by SIGINT.
const exitInterrupted = 130

// target is what the converging verbs share: which files, which driver.
type target struct {
	files       []string
	driver      string
	noLocal     bool
	adopt       bool
	lockTimeout time.Duration
}

func (t *target) register(fs *pflag.FlagSet) {
	fs.StringArrayVarP(&t.files, "file", "f", nil, "sandbox file or layer (repeatable; default: the nearest sandbox.yaml)")
	fs.StringVar(&t.driver, "driver", "", "override the files' driver: "+strings.Join(session.DriverNames(), ", "))
	fs.BoolVar(&t.noLocal, "no-local", false, "do not merge sandbox.local.yaml")
}

// argv is the target's flags as a command line: what the user gave.
func (t *target) argv() []string {
	var args []string
	for _, f := range t.files {
		args = append(args, "--file", f)
	}
	if t.driver != "" {
		args = append(args, "--driver", t.driver)
	}
	if t.noLocal {
		args = append(args, "--no-local")
	}
	return args
}

func (t *target) registerAdopt(fs *pflag.FlagSet) {
	fs.BoolVar(&t.adopt, "adopt", false, "manage a same-named sandbox sbx did not create")
}

func (t *target) registerLock(fs *pflag.FlagSet) {
	fs.DurationVar(&t.lockTimeout, "lock-timeout", time.Minute, "how long to wait for another sbx working on the same sandbox")
}

func planVerb() *verb {
	return &verb{
		name:    "plan",
		summary: "show what apply would change, field by field, and why",
		usage:   "[flags]",
		help: `Reads the sandbox files, observes the live sandboxes (one listing, at most
one policy read per sandbox; nothing is changed) and prints the actions apply
would take, each field with the reason for it and each step with the backend
calls it makes. Changes made outside sbx are listed under "Changed outside
sbx"; what a change would let a sandbox do beyond what you last approved is
listed under "This plan widens".

With --base REV, compares the files at git revision REV with those at --head
(default: the working tree) instead, asking no backend: what a change to the
files does, for review (docs/ci.md). The personal sandbox.local.yaml is not
merged, no host path the files name is looked at, and no command they name
runs.

Exit status: 0 with no errors (and, with --detailed-exitcode, no changes),
1 on error, 2 with --detailed-exitcode when changes are pending.`,
		setup: func(fs *pflag.FlagSet) runFunc {
			t := &target{}
			t.register(fs)
			t.registerAdopt(fs)
			asJSON := fs.Bool("json", false, "print the plan as a versioned JSON document (docs/plan-json.md)")
			out := fs.String("out", "", "save the plan to FILE for 'sbx apply FILE'")
			detailed := fs.Bool("detailed-exitcode", false, "exit 2 when changes are pending")
			base := fs.String("base", "", "compare the files at git revision REV with --head's, not with the live sandbox: no backend (docs/ci.md)")
			head := fs.String("head", "", "with --base, the git revision the change ends at (default: the working tree)")
			return func(ctx context.Context, a *app, args []string) int {
				if len(args) > 0 {
					return a.errorf("plan takes no arguments; name files with -f")
				}
				batchGC()
				if *base != "" || *head != "" {
					return a.planChange(ctx, t, *base, *head, *asJSON, *out, *detailed)
				}
				s, err := a.open(ctx, t, "")
				if err != nil {
					return a.fail(err)
				}
				p, err := s.Plan(t.adopt)
				if err != nil {
					return a.fail(err)
				}
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
	return atomicfile.ReplaceBytes(path, b.Bytes(), 0o600)
}

// render prints a plan for people, or the no-changes line.
func (a *app) render(p *reconcile.Changes, s *session.Session) error {
	if p.Empty() {
		// One write, not one per sandbox (500 system calls for 500).
		var b strings.Builder
		for _, n := range s.Names() {
			fmt.Fprintf(&b, "No changes. Sandbox %q matches its sandbox.yaml (driver: %s).\n", n, p.Driver)
		}
		_, err := io.WriteString(a.stdout, b.String())
		return err
	}
	return reconcile.RenderWidth(a.stdout, p, a.color(a.stdout), a.termWidth(a.stdout))
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
				batchGC()
				s, err := a.open(ctx, t, "sbx apply")
				if err != nil {
					return a.fail(err)
				}
				defer s.Release()
				var p *reconcile.Changes
				if len(args) == 1 {
					if p, err = s.SavedPlan(args[0]); err != nil {
						return a.fail(err)
					}
					ap.Reviewed = true
				} else if p, err = s.Plan(t.adopt); err != nil {
					return a.fail(err)
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
				return a.execute(ctx, s, p, t.adopt || p.Adopts())
			}
		},
	}
}

// approval is how a verb that converges is approved: -y, and
// --approve-widening for a plan that widens what a sandbox may do.
type approval struct{ session.Approval }

func (ap *approval) register(fs *pflag.FlagSet) {
	fs.BoolVarP(&ap.Yes, "auto-approve", "y", false, "apply without asking")
	fs.BoolVar(&ap.Yes, "yes", false, "the same as -y")
	fs.BoolVar(&ap.Widening, "approve-widening", false, "with -y, also apply changes that widen what a sandbox may do (listed in the plan)")
}

// approve decides whether a plan may run (session.Approve): on a terminal
// the user answers "yes" to the plan shown, widenings listed.
func (a *app) approve(p *reconcile.Changes, ap *approval, what string) (int, bool) {
	err := session.Approve(p, ap.Approval)
	var ae *session.ApprovalError
	switch {
	case err == nil:
		return exitOK, true
	case errors.As(err, &ae) && ae.Widens:
		fmt.Fprintf(a.stderr, "sbx: %s refused: %v\n", what, err)
		return exitError, false
	}
	if err := a.confirm(what); err != nil {
		return a.errorf("%v", err), false
	}
	return exitOK, true
}

// execute runs a prepared plan and reports how it ended.
func (a *app) execute(ctx context.Context, s *session.Session, p *reconcile.Changes, adopt bool) int {
	if err := a.applyPlan(ctx, s, p, adopt); err != nil {
		return a.fail(err)
	}
	return exitOK
}

// applyPlan runs a prepared plan, showing its steps, then how it ended
// when it succeeded; the caller reports an error (fail).
func (a *app) applyPlan(ctx context.Context, s *session.Session, p *reconcile.Changes, adopt bool) error {
	pr := &stepPrinter{w: a.stdout, tty: isTerminal(a.stdout)}
	err := s.Apply(ctx, p, adopt, pr.options())
	pr.finish()
	if err != nil {
		return err
	}
	c, u, r, d := p.Count()
	if p.Kind == "destroy" {
		fmt.Fprintf(a.stdout, "\nDestroy complete: %d destroyed.\n", d)
		return nil
	}
	fmt.Fprintf(a.stdout, "\nApply complete: %d created, %d updated, %d replaced, %d destroyed.\n", c, u, r, d)
	for _, n := range s.UnsetSecrets() {
		fmt.Fprintf(a.stderr, "sbx: note: %s\n", n)
	}
	return nil
}

// confirm asks for "yes" on a terminal; off a terminal only -y approves.
// The error says why the plan does not run.
func (a *app) confirm(what string) error {
	if !isTerminal(a.stdin) {
		return fmt.Errorf("%s needs approval: run it on a terminal to answer, or pass -y (--auto-approve)", what)
	}
	fmt.Fprintf(a.stdout, "\nDo you want to %s these changes? Only 'yes' will be accepted: ", what)
	line, _ := bufio.NewReader(a.stdin).ReadString('\n')
	if strings.TrimSpace(line) != "yes" {
		return fmt.Errorf("%s cancelled; nothing was changed", what)
	}
	return nil
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
			ap := &approval{}
			fs.BoolVarP(&ap.Yes, "auto-approve", "y", false, "destroy without asking")
			fs.BoolVar(&ap.Yes, "yes", false, "the same as -y")
			return func(ctx context.Context, a *app, args []string) int {
				if len(args) > 0 {
					return a.errorf("destroy takes no arguments; name files with -f")
				}
				batchGC()
				s, err := a.open(ctx, t, "sbx destroy")
				if err != nil {
					return a.fail(err)
				}
				defer s.Release()
				p, err := s.PlanDestroy(t.adopt)
				if err != nil {
					return a.fail(err)
				}
				if err := p.Err(); err != nil {
					return a.errorf("%v", err)
				}
				if p.Empty() {
					fmt.Fprintln(a.stdout, "Nothing to destroy.")
					return exitOK
				}
				if err := reconcile.RenderWidth(a.stdout, p, a.color(a.stdout), a.termWidth(a.stdout)); err != nil {
					return a.errorf("%v", err)
				}
				if code, ok := a.approve(p, ap, "destroy"); !ok {
					return code
				}
				code := a.execute(ctx, s, p, t.adopt)
				if code == exitOK {
					for _, n := range s.ForgetDestroyed() {
						fmt.Fprintf(a.stderr, "sbx: note: %s\n", n)
					}
				}
				return code
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
				batchGC()
				s, err := a.open(ctx, t, "")
				if err != nil {
					return a.fail(err)
				}
				return a.status(s, *asJSON)
			}
		},
	}
}

func (a *app) status(s *session.Session, asJSON bool) int {
	if asJSON {
		return a.writeJSON(s.Report())
	}
	rows, errs := s.Status()
	for _, r := range rows {
		live := "not created"
		if r.Exists {
			live = r.Status
		}
		fmt.Fprintf(a.stdout, "%s  (%s, %s)\n  declared in %s\n  live: %s\n", r.Name, r.Driver, strings.ReplaceAll(r.State, "-", " "), r.File, live)
		for _, p := range r.Published {
			fmt.Fprintf(a.stdout, "  published: %s\n", p)
		}
		if r.Pending > 0 {
			fmt.Fprintf(a.stdout, "  %d change(s) pending; run 'sbx plan' to see them\n", r.Pending)
		}
		for _, d := range r.Drift {
			fmt.Fprintf(a.stdout, "  changed outside sbx: %s\n", untrusted.Line(d.String()))
		}
	}
	for _, e := range errs {
		fmt.Fprintf(a.stdout, "error: %s\n", untrusted.Visible(e))
	}
	return exitOK
}

// diagnostic prints a problem in the files on stderr. A file a sandbox
// could write chose the paths and values it quotes: it is one line, with
// nothing a terminal acts on (untrusted.Line).
func (a *app) diagnostic(d spec.Diagnostic) {
	fmt.Fprintln(a.stderr, untrusted.Line(d.String()))
}

// fail prints an error and returns the exit code it means.
func (a *app) fail(err error) int {
	code, _ := a.failure(err)
	return code
}

// failure prints an error: problems in the files one per line, a failed
// step of an apply with what was done. It returns the exit code the error
// means and, in a line, why (what a run records as why it ended).
func (a *app) failure(err error) (int, string) {
	var ds spec.Diagnostics
	var se *reconcile.StepError
	switch {
	case errors.As(err, &ds) && len(ds) > 0:
		for _, d := range ds {
			a.diagnostic(d)
		}
		return exitError, untrusted.Line(ds[0].String())
	case errors.As(err, &se) && se.Interrupted:
		why := fmt.Sprintf("%v; what ran before it is done, nothing after it was started; run the same command to finish", se)
		fmt.Fprintf(a.stderr, "sbx: %s\n", why)
		return exitInterrupted, why
	case errors.As(err, &se):
		a.errorf("%v", se)
		cause := "the cause"
		if errors.Is(se, reconcile.ErrNameInUse) {
			// Another object holds the sandbox's name: sandbox.yaml is
			// not what is wrong.
			cause = "what holds the sandbox's name (the backend's object named above)"
		} else if k := se.Step.Kind.Key(); k != "" {
			cause += " (" + k + " in sandbox.yaml, or the backend)"
		}
		fmt.Fprintf(a.stderr, "sbx: nothing after the failed step was done; fix %s and run the same command again to finish\n", cause)
		return exitError, se.Error()
	case errors.Is(err, context.Canceled):
		const why = "interrupted; nothing was changed"
		fmt.Fprintln(a.stderr, "sbx: "+why)
		return exitInterrupted, why
	}
	why := untrusted.Visible(err.Error())
	a.errorf("%s", why)
	return exitError, why
}

// color reports whether output to w may be coloured: a terminal, and no
// NO_COLOR in the environment.
func (a *app) color(w io.Writer) bool {
	_, noColor := a.lookupEnv("NO_COLOR")
	return !noColor && isTerminal(w)
}
