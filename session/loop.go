package session

import (
	"context"
	"errors"
	"fmt"
	"github.com/sbxhq/sbx/checkpoint"
	"io"
	"io/fs"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/sbxhq/sbx/driver"
	"github.com/sbxhq/sbx/internal/tarball"
	"github.com/sbxhq/sbx/loop"
	"github.com/sbxhq/sbx/netlog"
	"github.com/sbxhq/sbx/reconcile"
	"github.com/sbxhq/sbx/spec"
	"github.com/sbxhq/sbx/state"
)

// NoLoopError is a sandbox whose file has no loop section: there is no
// loop to run in it.
type NoLoopError struct{ Sandbox, File string }

func (e *NoLoopError) Error() string {
	return fmt.Sprintf("sandbox %q has no loop section in %s", e.Sandbox, e.File)
}

// WorkspacesError is a multi-agent run whose files name different
// workspaces: its agents take turns in one.
type WorkspacesError struct {
	File, Workspace           string // the first file's
	OtherFile, OtherWorkspace string
}

func (e *WorkspacesError) Error() string {
	return fmt.Sprintf("a multi-agent run has one workspace: %s works in %s, %s in %s", e.File, e.Workspace, e.OtherFile, e.OtherWorkspace)
}

// CheckLoop checks what a run needs of its files: a loop section in each
// (*NoLoopError), and one workspace for a multi-agent run
// (*WorkspacesError).
func CheckLoop(specs []*spec.Spec) error {
	for _, sp := range specs {
		if sp.Loop == nil {
			return &NoLoopError{Sandbox: sp.Name, File: sp.Files[0]}
		}
		if sp.Workspace.Path != specs[0].Workspace.Path {
			return &WorkspacesError{File: specs[0].Files[0], Workspace: specs[0].Workspace.Path, OtherFile: sp.Files[0], OtherWorkspace: sp.Workspace.Path}
		}
	}
	return nil
}

// BeginLoop begins a run of the loop on the sandboxes specs declare, in
// turn order (loop.Begin: a *loop.BusyError when one has a live run).
// maxIterations, when above 0, overrides the first file's
// loop.maxIterations.
func BeginLoop(stateDir state.Dir, specs []*spec.Spec, maxIterations int, detached bool) (*loop.Run, error) {
	if err := CheckLoop(specs); err != nil {
		return nil, err
	}
	if maxIterations <= 0 {
		maxIterations = specs[0].Loop.MaxIterations
	}
	var sbs []loop.RunSandbox
	for _, sp := range specs {
		sbs = append(sbs, loop.RunSandbox{Name: sp.Name, Agent: sp.Agent, File: sp.Files[0]})
	}
	return loop.Begin(stateDir, loop.BeginOptions{Sandboxes: sbs, MaxIterations: maxIterations, Detached: detached})
}

// LoopUI is how a run talks to the user while it converges its
// sandboxes: cmd/sbx prints and asks.
type LoopUI interface {
	// ShowPlan prints a plan the run is about to approve and apply.
	ShowPlan(p *reconcile.Changes) error
	// Confirm asks the user to approve p, which Approve left to them
	// (a terminal may ask; elsewhere it refuses): nil when approved.
	Confirm(p *reconcile.Changes) error
	// Apply applies p (Session.Apply), showing its steps and how it
	// ended.
	Apply(ctx context.Context, s *Session, p *reconcile.Changes, adopt bool) error
	// Warn reports a failure that does not decide how the run ends (the
	// ephemeral sandbox not destroyed, a warm sandbox not given back).
	Warn(err error)
}

// LoopOptions say how RunLoop converges a run's sandboxes and runs the
// loop in them.
type LoopOptions struct {
	// MaxIterations, when above 0, overrides loop.maxIterations.
	MaxIterations int
	// Ephemeral creates the run's sandboxes for it and destroys them at
	// its end, whatever happened (--ephemeral; the first file's
	// loop.ephemeral asks the same).
	Ephemeral bool
	Adopt     bool
	Approval  Approval
	// Detach, when set, hands the run to a detached process once its
	// sandboxes are converged (sbx loop --detach); the process it starts
	// carries the run on with Resumed set.
	Detach func(ctx context.Context) error
	// Resumed says this is the detached process: it asks nobody for
	// approval (only what Approval approves applies) and does not create
	// the ephemeral sandboxes the first process created.
	Resumed bool
	UI      LoopUI
	// Stdout and Stderr are the terminal: the agent's output, the loop's
	// lines, the checkpoints' (io.Discard in a detached process, whose
	// run log gets the loop's lines).
	Stdout, Stderr io.Writer
	// Messages gets sbx's own lines about the run's sandboxes
	// ("destroying the ephemeral sandbox"), as sbx prints them.
	Messages io.Writer
}

// FilesChangedError is a run whose files declared other sandboxes when
// it began than when it converged: the run's sandboxes are the ones it
// converges.
type FilesChangedError struct{ Began, Now []string }

func (e *FilesChangedError) Error() string {
	return fmt.Sprintf("the files changed while the run began: they declared %s, now %s", strings.Join(e.Began, ","), strings.Join(e.Now, ","))
}

// EphemeralExistsError is an ephemeral run on a sandbox that already
// exists: the run creates its own and destroys it after, so it would
// destroy the user's.
type EphemeralExistsError struct{ Sandbox string }

func (e *EphemeralExistsError) Error() string {
	return fmt.Sprintf("sandbox %q already exists; --ephemeral creates its own for the run and destroys it after (run 'sbx destroy' first, or drop --ephemeral)", e.Sandbox)
}

// PoolChangedError is an ephemeral run on a sandbox with a warm pool whose
// files differ from what 'sbx apply' made the pool from: a run claims,
// it does not change the pool.
type PoolChangedError struct{ Sandbox string }

func (e *PoolChangedError) Error() string {
	return fmt.Sprintf("sandbox %q has a warm pool, made by 'sbx apply' from the files, and the files differ from what was applied: run 'sbx apply', then the ephemeral loop", e.Sandbox)
}

// LostProtectionError is a plan that finds the protection of sandboxes'
// declarations lost since they were made (workspace.protect changed
// outside sbx), in a run that applies unattended: nobody would see the
// agent rewrite what bounds it.
type LostProtectionError struct{ Sandboxes []string }

func (e *LostProtectionError) Error() string {
	var quoted []string
	for _, n := range e.Sandboxes {
		quoted = append(quoted, fmt.Sprintf("%q", n))
	}
	return fmt.Sprintf("sandbox %s lost the protection of its declaration since it was made (the plan above says how); a run does not restore it unattended: run 'sbx apply' to restore it, then the loop", strings.Join(quoted, ", "))
}

// ChangedSinceApprovalError is the detached process of a run finding a
// plan that what the user approved in the first process does not cover.
type ChangedSinceApprovalError struct{ Err error }

func (e *ChangedSinceApprovalError) Error() string {
	return fmt.Sprintf("the sandbox changed after the run was approved, and %v", e.Err)
}
func (e *ChangedSinceApprovalError) Unwrap() error { return e.Err }

// ClaimError is a warm sandbox that could not be claimed for the run.
type ClaimError struct {
	Sandbox string
	Err     error
}

func (e *ClaimError) Error() string { return fmt.Sprintf("claiming a warm sandbox: %v", e.Err) }
func (e *ClaimError) Unwrap() error { return e.Err }

// NoExecError is a backend that cannot run commands in a sandbox: no agent
// can run there.
type NoExecError struct{ Driver string }

func (e *NoExecError) Error() string {
	return fmt.Sprintf("the %s driver cannot run commands in a sandbox", e.Driver)
}

// NoHelperError is a backend whose sandboxes work on a copy of the
// workspace without sbx's binary inside: nothing there could measure the
// agent's progress.
type NoHelperError struct{ Driver string }

func (e *NoHelperError) Error() string {
	return fmt.Sprintf("the %s driver's sandboxes work on a copy of the workspace, without sbx's binary inside to measure the agent's progress there", e.Driver)
}

// RunLoop converges the run's sandboxes and runs the loop in them, or,
// with o.Detach, hands the run on once they are converged (a nil
// result). A plan is shown, approved and applied as sbx apply does,
// except that a run never restores a lost protection unattended; an
// ephemeral run creates its sandboxes and destroys them when it ends
// (or claims one from its warm pool and gives it back). It returns how
// the loop ended, or an error saying why the run ended before its loop:
// errors of this package's types, a *reconcile.StepError, or what o.UI
// and o.Detach returned.
func (s *Session) RunLoop(ctx context.Context, run *loop.Run, o LoopOptions) (res *loop.Result, err error) {
	var began []string
	for _, sb := range run.Status().Sandboxes {
		began = append(began, sb.Name)
	}
	if now := s.Names(); !slices.Equal(began, now) {
		return nil, &FilesChangedError{Began: began, Now: now}
	}
	if err := CheckLoop(s.Specs); err != nil {
		return nil, err
	}
	lead := s.Specs[0]
	ephemeral, claimer := s.ephemeral(o.Ephemeral || lead.Loop.Ephemeral)
	if ephemeral && !o.Resumed {
		for _, sp := range s.Specs {
			if lv := s.Live[sp.Name]; lv != nil && lv.Exists {
				return nil, &EphemeralExistsError{Sandbox: sp.Name}
			}
		}
	}
	handedOff := false
	if ephemeral {
		defer func() {
			if !handedOff { // else the detached process destroys them at its end
				s.destroyEphemeral(o)
			}
		}()
	}
	if err := s.converge(ctx, o, claimer != nil); err != nil {
		return nil, err
	}
	if o.Detach != nil && !o.Resumed {
		s.Release() // the detached process takes the sandboxes' locks again
		if err := o.Detach(ctx); err != nil {
			return nil, err
		}
		handedOff = true
		return nil, nil
	}
	if claimer != nil {
		// Claimed here, in the process that runs the loop (the detached
		// one after --detach), and given back when it ends.
		release, err := claimer.Claim(ctx, lead, o.Stderr)
		if err != nil {
			return nil, &ClaimError{Sandbox: lead.Name, Err: err}
		}
		defer func() {
			ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Minute)
			defer cancel()
			if err := release(ctx); err != nil {
				o.UI.Warn(fmt.Errorf("giving the warm sandbox back: %w", err))
			}
		}()
	}
	cfg, err := s.LoopConfig(ctx, o.MaxIterations, o.Stdout, o.Stderr)
	if err != nil {
		return nil, err
	}
	if claimer != nil {
		cfg.Agents[0].Pull = nil // the claim's release pulls the work home
	}
	if lead.Loop.Checkpoint.When != spec.CheckpointNever {
		cfg.Checkpoint = &loopCheckpointer{s: s, runID: run.ID, l: lead.Loop.Checkpoint, w: o.Stderr}
	}
	return run.Loop(ctx, cfg), nil
}

// ephemeral decides how an ephemeral run gets its sandbox: a sandbox with
// a warm pool (kubernetes.warmPool, one sandbox per run) is claimed from
// the pool that sbx apply made (the Claimer), any other is created for
// the run (true).
func (s *Session) ephemeral(asked bool) (create bool, pool driver.Claimer) {
	if !asked {
		return false, nil
	}
	if cl, ok := s.Backend.(driver.Claimer); ok && len(s.Specs) == 1 && cl.Pooled(s.Specs[0]) {
		return false, cl
	}
	return true, nil
}

// converge plans the run's sandboxes and applies the plan as the run
// may (applyRun). pooled says the run claims its sandbox from a warm
// pool.
func (s *Session) converge(ctx context.Context, o LoopOptions, pooled bool) error {
	p, err := s.Plan(o.Adopt)
	if err != nil {
		return err
	}
	return s.applyRun(ctx, p, o, pooled)
}

// applyRun shows, approves and applies a run's plan p unless it is
// empty: a plan with errors, one that would change a warm pool (which a
// run claims from and never changes), one the user does not approve, and,
// unattended, one that finds a declaration's protection lost, are
// refused.
func (s *Session) applyRun(ctx context.Context, p *reconcile.Changes, o LoopOptions, pooled bool) error {
	if err := p.Err(); err != nil {
		return err
	}
	if p.Empty() {
		return nil
	}
	if pooled {
		return &PoolChangedError{Sandbox: s.Specs[0].Name}
	}
	if err := o.UI.ShowPlan(p); err != nil {
		return err
	}
	if lost := LostProtection(p); len(lost) > 0 && (o.Resumed || o.Approval.Yes) {
		return &LostProtectionError{Sandboxes: lost}
	}
	if err := approveRun(p, o); err != nil {
		return err
	}
	return o.UI.Apply(ctx, s, p, o.Adopt)
}

// approveRun decides whether a run may apply p: as Approve decides, the
// user asked where it leaves them to answer; the detached process asks
// nobody.
func approveRun(p *reconcile.Changes, o LoopOptions) error {
	err := Approve(p, o.Approval)
	var ae *ApprovalError
	switch {
	case err == nil:
		return nil
	case o.Resumed:
		return &ChangedSinceApprovalError{Err: err}
	case errors.As(err, &ae) && ae.Widens:
		return err
	}
	return o.UI.Confirm(p)
}

// LostProtection names the sandboxes whose plan finds their declaration's
// protection lost since they were made (workspace.protect changed outside
// sbx).
func LostProtection(p *reconcile.Changes) []string {
	var names []string
	for _, c := range p.Sandboxes {
		for _, d := range c.Drift {
			if d.Field == reconcile.FieldProtect {
				names = append(names, c.Sandbox)
				break
			}
		}
	}
	return names
}

// destroyEphemeral removes the run's sandboxes whatever happened, and the
// hints queued for them. A failure is said, with what to do about it.
func (s *Session) destroyEphemeral(o LoopOptions) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := s.destroyAll(ctx, o); err != nil {
		o.UI.Warn(err)
		fmt.Fprintf(o.Messages, "sbx: the ephemeral sandbox may be left behind; remove it with 'sbx destroy -y'\n")
	}
}

func (s *Session) destroyAll(ctx context.Context, o LoopOptions) error {
	if err := s.Observe(ctx); err != nil {
		return fmt.Errorf("ephemeral sandbox: %w", err)
	}
	p, err := s.PlanDestroy(false)
	if err != nil {
		return fmt.Errorf("ephemeral sandbox: %w", err)
	}
	if p.Empty() {
		return nil
	}
	fmt.Fprintf(o.Messages, "sbx loop: destroying the ephemeral sandbox\n")
	if err := o.UI.Apply(ctx, s, p, false); err != nil {
		return err
	}
	for _, n := range s.ForgetDestroyed() {
		fmt.Fprintf(o.Messages, "sbx: note: %s\n", n)
	}
	return nil
}

// ForgetDestroyed drops what sbx kept for the session's sandboxes once
// they are destroyed: the loop hints queued for them (a hint for the
// agent of a sandbox that is gone must not reach the next sandbox of that
// name) and their CAs (the next sandbox of that name gets its own). It
// returns a note for each it could not remove.
func (s *Session) ForgetDestroyed() []string {
	var notes []string
	for _, n := range s.Names() {
		if err := loop.NewControl(s.stateDir, n).ClearHints(); err != nil {
			notes = append(notes, fmt.Sprintf("the loop hints queued for sandbox %q were not removed: %v", n, err))
		}
		if err := os.Remove(s.stateDir.CA(s.Backend.Name(), n)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			notes = append(notes, fmt.Sprintf("the CA of sandbox %q was not removed: %v", n, err))
		}
	}
	return notes
}

// LoopConfig is the configuration of a run on the session's sandboxes:
// one agent per sandbox, in the files' order, each running as its file
// says with its secrets (every agent's redacted from the output), the
// bounds from the first file's loop section (maxIterations, when above
// 0, overriding it). stdout and stderr are the terminal.
func (s *Session) LoopConfig(ctx context.Context, maxIterations int, stdout, stderr io.Writer) (loop.Config, error) {
	if _, ok := s.Backend.(driver.Execer); !ok {
		return loop.Config{}, &NoExecError{Driver: s.Backend.Name()}
	}
	lead := s.Specs[0]
	cfg := loop.Config{Workspace: lead.Workspace.Path, Loop: *lead.Loop, Stdout: stdout, Stderr: stderr}
	if u, ok := s.Backend.(driver.Unprotecter); ok {
		cfg.Unprotected = u.Unprotected
	}
	if maxIterations > 0 {
		cfg.Loop.MaxIterations = maxIterations
	}
	for _, sp := range s.Specs {
		secrets, err := s.Secrets(ctx, sp)
		if err != nil {
			return loop.Config{}, err
		}
		for _, n := range sortedNames(secrets) {
			cfg.Redact = append(cfg.Redact, secrets[n])
		}
		cfg.Redact = append(cfg.Redact, s.proxied[sp.Name]...)
		ag := loop.Agent{
			Sandbox: sp.Name, Agent: sp.Agent, File: sp.Files[0], Template: TemplateText(sp), Loop: *sp.Loop,
			Env: s.ExecEnv(sp, secrets), Exec: s.sandbox(sp), Group: s.grouper(),
			WorkspaceReadOnly: sp.Workspace.ReadOnly,
		}
		if ec, ok := s.Backend.(driver.EgressCounter); ok {
			name := sp.Name
			ag.Egress = egressFunc(func(ctx context.Context, since, until time.Time, max int) (netlog.Count, error) {
				return ec.EgressCount(ctx, name, since, until, max)
			})
		}
		if err := s.workOnCopy(sp, &ag); err != nil {
			return loop.Config{}, err
		}
		cfg.Agents = append(cfg.Agents, ag)
	}
	return cfg, nil
}

// TemplateText says what a sandbox is made from, for the loop's message
// when the agent's command is not there.
func TemplateText(sp *spec.Spec) string {
	switch {
	case sp.Template.Checkpoint != "":
		// A checkpoint is the template: its image, not the agent's
		// default, is what lacks the command.
		return fmt.Sprintf("checkpoint %q, image %s", sp.Template.Checkpoint, checkpoint.Ref(sp.Template.Checkpoint))
	case sp.Template.Build != nil:
		return fmt.Sprintf("built from %s/%s", sp.Template.Build.Context, sp.Template.Build.Dockerfile)
	case sp.Template.Image != "":
		return sp.Template.Image
	}
	return spec.DefaultTemplate(sp.Agent) + ", the " + sp.Agent + " agent's default"
}

// sandbox runs commands in sp's sandbox as its file says (Session.Exec:
// as its user).
func (s *Session) sandbox(sp *spec.Spec) loop.Sandbox {
	return execFunc(func(ctx context.Context, argv []string, o driver.ExecOptions) (int, error) {
		return s.Exec(ctx, sp, argv, o)
	})
}

// grouper is how the loop starts and kills agents in the session's
// sandboxes: with sbx's own binary inside where the backend puts it
// there, else with the image's shell.
func (s *Session) grouper() loop.Grouper {
	if h, ok := s.Backend.(driver.Helper); ok {
		return loop.HelperGrouper{Binary: h.SandboxHelper()}
	}
	return loop.ShellGrouper{}
}

// workOnCopy wires an agent whose sandbox works on its own copy of the
// workspace (a driver.Puller backend: kubernetes) to that copy: the loop
// measures its progress there, with sbx's binary inside the sandbox
// (driver.Helper), and pulls the copy home when the run ends, as sbx pull
// does. On other backends the agent works on the host's workspace.
func (s *Session) workOnCopy(sp *spec.Spec, ag *loop.Agent) error {
	p, ok := s.Backend.(driver.Puller)
	if !ok {
		s.ownGit(sp, ag)
		return nil
	}
	h, ok := s.Backend.(driver.Helper)
	if !ok {
		return &NoHelperError{Driver: s.Backend.Name()}
	}
	ag.Progress = &loop.SandboxProgress{Exec: ag.Exec, Binary: h.SandboxHelper(), Dir: sp.Workspace.Path}
	ag.Pull = pullFunc(func(ctx context.Context) (*tarball.Stats, error) { return p.Pull(ctx, sp, io.Discard) })
	return nil
}

// ownGit wires an agent whose sandbox commits to a git directory of its
// own (driver.GitFetcher: docker, while workspace.protect is on): the
// loop measures progress inside the sandbox, where that directory is
// (HEAD, index), and brings the commits home (refs/sbx/NAME/*) when the
// run ends. The working tree is the host's either way.
func (s *Session) ownGit(sp *spec.Spec, ag *loop.Agent) {
	f, ok := s.Backend.(driver.GitFetcher)
	h, helper := s.Backend.(driver.Helper)
	if !ok || !helper || !sp.Protect || sp.Workspace.ReadOnly {
		return
	}
	ag.Progress = &loop.SandboxProgress{Exec: ag.Exec, Binary: h.SandboxHelper(), Dir: sp.Workspace.Path}
	ag.Fetch = func(ctx context.Context) (string, error) {
		var b strings.Builder
		err := f.FetchGit(ctx, sp, &b)
		return strings.TrimSpace(b.String()), err
	}
}

// KillOrphan kills the agent a run whose process died left running in one
// of the session's sandboxes (loop.Control.Reap): the agent must not
// outlive its run.
func (s *Session) KillOrphan(ctx context.Context, o loop.Orphan) error {
	for _, sp := range s.Specs {
		if sp.Name == o.Sandbox {
			return loop.KillOrphan(ctx, s.sandbox(sp), s.grouper(), o.Pidfile)
		}
	}
	return fmt.Errorf("the files do not declare sandbox %q", o.Sandbox)
}

// loopCheckpointer saves the run's sandboxes as loop.checkpoint says:
// before each iteration (every-iteration), and at the end of a completed
// run (on-complete, every-iteration). A checkpoint is a convenience, not a
// bound: one that fails is said and the run goes on.
type loopCheckpointer struct {
	s     *Session
	runID string
	l     spec.LoopCheckpoint
	w     io.Writer
}

func (c *loopCheckpointer) BeforeIteration(ctx context.Context, sandbox string, i int) error {
	if c.l.When == spec.CheckpointEveryIteration {
		c.save(ctx, sandbox, fmt.Sprint(i))
	}
	return nil
}

func (c *loopCheckpointer) AfterRun(ctx context.Context, res *loop.Result) error {
	if res.State == loop.StateCompleted && (c.l.When == spec.CheckpointOnComplete || c.l.When == spec.CheckpointEveryIteration) {
		for _, sp := range c.s.Specs {
			c.save(ctx, sp.Name, "done")
		}
	}
	return nil
}

func (c *loopCheckpointer) save(ctx context.Context, sandbox, when string) {
	if ctx.Err() != nil {
		return
	}
	for _, sp := range c.s.Specs {
		if sp.Name != sandbox {
			continue
		}
		cp, pruned, err := c.s.LoopCheckpoint(ctx, sp, c.runID, when, c.l.Keep)
		if cp != nil {
			fmt.Fprintf(c.w, "sbx loop: saved checkpoint %q\n", cp.Name)
		}
		if len(pruned) > 0 {
			fmt.Fprintf(c.w, "sbx loop: removed older loop checkpoints %s (keep: %d)\n", strings.Join(pruned, ", "), c.l.Keep)
		}
		if err != nil {
			fmt.Fprintf(c.w, "sbx loop: checkpoint (%s) failed, the run goes on: %v\n", when, err)
		}
	}
}

type execFunc func(ctx context.Context, argv []string, o driver.ExecOptions) (int, error)

func (f execFunc) Exec(ctx context.Context, argv []string, o driver.ExecOptions) (int, error) {
	return f(ctx, argv, o)
}

type egressFunc func(ctx context.Context, since, until time.Time, max int) (netlog.Count, error)

func (f egressFunc) EgressCount(ctx context.Context, since, until time.Time, max int) (netlog.Count, error) {
	return f(ctx, since, until, max)
}

type pullFunc func(ctx context.Context) (*tarball.Stats, error)

func (f pullFunc) Pull(ctx context.Context) (*tarball.Stats, error) { return f(ctx) }
