// Package loop runs an unattended agent loop ("Ralph") inside a converged
// sandbox: the same prompt each iteration, fed on standard input to the
// agent's non-interactive command, until the completion checks pass or a
// bound enforced from outside the agent stops it: max iterations, a
// per-iteration timeout that kills the agent's whole process tree inside the
// sandbox, a total duration, and a breaker for iterations that make no
// progress or fail the same way. Every iteration is logged and recorded
// under sbx's state directory, outside the workspace the agent can write.
package loop

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/sbxhq/sbx/driver/cliutil"
	"github.com/sbxhq/sbx/internal/redact"
	"github.com/sbxhq/sbx/spec"
)

// Exit codes of `sbx loop`, one per way a run ends.
const (
	ExitCompleted     = 0
	ExitError         = 1
	ExitMaxIterations = 3
	ExitBreaker       = 4
	ExitBudget        = 5
	ExitInterrupted   = 130
)

// States a run ends in (Status.State); StateRunning while it runs.
const (
	StateRunning       = "running"
	StateCompleted     = "completed"
	StateMaxIterations = "max-iterations"
	StateBreaker       = "breaker"
	StateBudget        = "budget"
	StateInterrupted   = "interrupted"
	StateError         = "error"
)

var exitCodes = map[string]int{
	StateCompleted: ExitCompleted, StateMaxIterations: ExitMaxIterations, StateBreaker: ExitBreaker,
	StateBudget: ExitBudget, StateInterrupted: ExitInterrupted, StateError: ExitError,
}

// Sandbox runs a command inside the sandbox and returns its exit status.
type Sandbox interface {
	Exec(ctx context.Context, argv []string, o cliutil.ExecOptions) (int, error)
}

// Grouper wraps the agent's command so that its whole process tree inside
// the sandbox can be killed: Group runs argv in a new process group whose
// id is written to pidfile; Kill ends that group.
type Grouper interface {
	Group(argv []string, pidfile string) []string
	Kill(pidfile string) []string
}

// DenialCounter counts the requests the sandbox's egress denied in a time
// window (the docker driver's decision log).
type DenialCounter interface {
	Denials(ctx context.Context, since, until time.Time) (int, error)
}

// Config is one run.
type Config struct {
	Sandbox   string
	Agent     string
	Workspace string
	Loop      spec.Loop
	// Env is the environment of each exec: secrets (and env on backends
	// that store none). Values are passed as -e NAME, never in argv.
	Env map[string]string
	// Redact lists values never written to a log or the terminal.
	Redact  []string
	Exec    Sandbox
	Group   Grouper // default: ShellGrouper
	Denials DenialCounter
	Control *Control
	Stdout  io.Writer
	Stderr  io.Writer
	// Checkpoint, when set, saves the sandbox as a checkpoint
	// (loop.checkpoint): when is the iteration it comes before ("3") or
	// "done" when the run completed.
	Checkpoint func(ctx context.Context, runID, when string) error
}

// Record is one iteration in records.jsonl. Files counts the paths the
// iteration added, removed or modified in the working tree, committed or
// not (ignored files aside); Commits counts the commits HEAD gained (git
// rev-list --count before..after), 0 with a warning when they cannot be
// counted. An iteration stopped while the workspace was read has neither.
type Record struct {
	Iteration   int       `json:"iteration"`
	Start       time.Time `json:"start"`
	DurationMS  int64     `json:"duration_ms"`
	ExitStatus  int       `json:"exit_status"`
	TimedOut    bool      `json:"timed_out,omitempty"`
	Interrupted bool      `json:"interrupted,omitempty"`
	PromiseSeen bool      `json:"promise_seen"`
	Verify      []Verify  `json:"verify,omitempty"`
	Progressed  bool      `json:"progressed"`
	Files       int       `json:"files_changed"`
	Commits     int       `json:"commits"`
	Denials     *int      `json:"denials,omitempty"`
	Failure     *Failure  `json:"failure,omitempty"`
	Log         string    `json:"log"`
}

// Verify is one completion.verify command's result.
type Verify struct {
	Command    string `json:"command"`
	ExitStatus int    `json:"exit_status"`
}

// Result is how a run ended.
type Result struct {
	State      string
	ExitCode   int
	Detail     string
	Iterations int
	RunDir     string
}

// killGrace is how long the agent's process group has after SIGTERM
// before SIGKILL.
const killGrace = time.Second

// Run runs the loop until it completes or a bound stops it. Cancelling ctx
// (Ctrl-C, sbx loop stop) kills the agent inside the sandbox and returns
// "interrupted".
func Run(ctx context.Context, cfg Config) *Result {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	r := &loopRun{cfg: cfg, cancel: cancel, scan: NewScanner(cfg.Workspace)}
	if r.cfg.Group == nil {
		r.cfg.Group = ShellGrouper{}
	}
	res := r.run(ctx)
	res.ExitCode = exitCodes[res.State]
	r.status.State, r.status.ExitCode, r.status.Detail = res.State, res.ExitCode, res.Detail
	if err := cfg.Control.WriteStatus(&r.status); err != nil && res.State != StateError {
		res.State, res.ExitCode, res.Detail = StateError, ExitError, "writing status: "+err.Error()
	}
	return res
}

type loopRun struct {
	cfg    Config
	cancel context.CancelFunc // ends the run as sbx loop stop does
	status Status
	runDir string
	// last is the workspace after the previous iteration, reused as the
	// next one's starting point when nothing ran in between.
	last *Snapshot
	scan *Scanner
}

func (r *loopRun) run(ctx context.Context) *Result {
	cfg := r.cfg
	l := cfg.Loop
	runID := time.Now().UTC().Format("20060102T150405Z") + "-" + randomID(3)
	r.runDir = filepath.Join(cfg.Control.Dir, "runs", runID)
	fail := func(format string, args ...any) *Result {
		return &Result{State: StateError, Detail: fmt.Sprintf(format, args...), RunDir: r.runDir}
	}
	if l.MaxIterations <= 0 {
		return fail("maxIterations must be greater than 0")
	}
	command := l.Command
	if len(command) == 0 {
		command = DefaultCommand(cfg.Agent)
	}
	if len(command) == 0 {
		return fail("agent %s has no default non-interactive command; set loop.command", cfg.Agent)
	}
	if err := os.MkdirAll(r.runDir, 0o700); err != nil {
		return fail("%v", err)
	}
	records, err := os.OpenFile(filepath.Join(r.runDir, "records.jsonl"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return fail("%v", err)
	}
	defer records.Close()
	start := time.Now()
	r.status = Status{
		RunID: runID, Sandbox: cfg.Sandbox, PID: os.Getpid(), State: StateRunning,
		Started: start, MaxIterations: l.MaxIterations, RunDir: r.runDir, Denials: []int{},
		Breaker:    Breaker{NoProgressLimit: l.Breaker.NoProgress, SameErrorLimit: l.Breaker.SameError},
		Completion: CompletionState{Promise: l.Completion.Promise, Verify: len(l.Completion.Verify)},
	}
	if err := cfg.Control.WriteStatus(&r.status); err != nil {
		return fail("%v", err)
	}
	go cfg.Control.watchStop(ctx, runID, 100*time.Millisecond, r.cancel)
	runCtx := ctx
	if l.MaxDuration > 0 {
		var cancel context.CancelFunc
		runCtx, cancel = context.WithDeadline(ctx, start.Add(l.MaxDuration))
		defer cancel()
	}
	ended := func(state, detail string, i int) *Result {
		return &Result{State: state, Detail: detail, Iterations: i, RunDir: r.runDir}
	}
	for i := 1; ; i++ {
		switch {
		case ctx.Err() != nil:
			return ended(StateInterrupted, "stopped before iteration "+fmt.Sprint(i), i-1)
		case runCtx.Err() != nil:
			return ended(StateBudget, fmt.Sprintf("maxDuration %s spent", l.MaxDuration), i-1)
		}
		if l.Checkpoint.When == spec.CheckpointEveryIteration {
			r.checkpoint(ctx, fmt.Sprint(i))
		}
		rec, err := r.iteration(ctx, runCtx, i, command)
		switch {
		case err != nil && ctx.Err() != nil:
			// Stopped while the iteration could not finish (reading the
			// workspace before the agent ran): not an error.
			return ended(StateInterrupted, fmt.Sprintf("stopped in iteration %d", i), i-1)
		case err != nil:
			return ended(StateError, err.Error(), i)
		}
		if err := json.NewEncoder(records).Encode(rec); err != nil {
			return ended(StateError, err.Error(), i)
		}
		r.status.Iteration, r.status.LastOutcome = i, rec
		if rec.Denials != nil {
			r.status.Denials = append(r.status.Denials, *rec.Denials)
		}
		switch {
		case rec.Interrupted && ctx.Err() != nil:
			r.cfg.Control.WriteStatus(&r.status)
			return ended(StateInterrupted, fmt.Sprintf("stopped during iteration %d; the agent was killed", i), i)
		case rec.Interrupted:
			r.cfg.Control.WriteStatus(&r.status)
			return ended(StateBudget, fmt.Sprintf("maxDuration %s spent during iteration %d; the agent was killed", l.MaxDuration, i), i)
		}
		done := r.completed(rec)
		r.status.Completion.Complete = done
		trip := ""
		if !done {
			trip = r.status.Breaker.Observe(rec.Progressed, rec.Failure)
		}
		if err := r.cfg.Control.WriteStatus(&r.status); err != nil {
			return ended(StateError, err.Error(), i)
		}
		switch {
		case done:
			if w := l.Checkpoint.When; w == spec.CheckpointOnComplete || w == spec.CheckpointEveryIteration {
				r.checkpoint(ctx, "done")
			}
			return ended(StateCompleted, fmt.Sprintf("complete after %d iteration(s)", i), i)
		case trip != "":
			return ended(StateBreaker, trip, i)
		case i >= l.MaxIterations:
			return ended(StateMaxIterations, fmt.Sprintf("reached maxIterations (%d) without completing", l.MaxIterations), i)
		}
	}
}

// checkpoint saves the sandbox (Config.Checkpoint); a failure is said and
// the run goes on: a checkpoint is a convenience, not a bound.
func (r *loopRun) checkpoint(ctx context.Context, when string) {
	if r.cfg.Checkpoint == nil || ctx.Err() != nil {
		return
	}
	if err := r.cfg.Checkpoint(ctx, r.status.RunID, when); err != nil {
		fmt.Fprintf(r.cfg.Stderr, "sbx loop: checkpoint (%s) failed, the run goes on: %v\n", when, err)
	}
}

// completed applies the completion rule: every configured check holds.
func (r *loopRun) completed(rec *Record) bool {
	c := r.cfg.Loop.Completion
	promiseOK := c.Promise == "" || rec.PromiseSeen
	verifyOK := len(c.Verify) == 0 || (len(rec.Verify) == len(c.Verify) && allPassed(rec.Verify))
	r.status.Completion.PromiseSeen = rec.PromiseSeen
	r.status.Completion.VerifyPassed = len(c.Verify) > 0 && verifyOK
	return (c.Promise != "" || len(c.Verify) > 0) && promiseOK && verifyOK && rec.ExitStatus == 0
}

func allPassed(vs []Verify) bool {
	for _, v := range vs {
		if v.ExitStatus != 0 {
			return false
		}
	}
	return true
}

// iteration runs the agent once and checks the outcome. ctx is the user's
// (cancelled by stop), runCtx adds maxDuration.
func (r *loopRun) iteration(ctx, runCtx context.Context, i int, command []string) (*Record, error) {
	cfg := r.cfg
	l := cfg.Loop
	prompt, err := ReadPrompt(cfg.Workspace, l)
	if err != nil {
		return nil, err
	}
	hints, err := cfg.Control.TakeHints()
	if err != nil {
		return nil, fmt.Errorf("hints: %v", err)
	}
	input := Prompt(i, l.MaxIterations, hints, string(prompt))
	// The workspace as the last iteration left it, unless something ran
	// since (verify commands may write).
	before := r.last
	if before == nil {
		b, err := r.scan.Snapshot(ctx)
		if err != nil {
			return nil, err
		}
		before = &b
	}
	logPath := filepath.Join(r.runDir, fmt.Sprintf("iter-%03d.log", i))
	logFile, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, err
	}
	defer logFile.Close()
	captured := &tail{max: maxTail}
	log := &capped{w: logFile, max: maxLog}
	out := newRedactor(io.MultiWriter(cfg.Stdout, log, captured), cfg.Redact)
	errOut := newRedactor(io.MultiWriter(cfg.Stderr, log, captured), cfg.Redact)
	fmt.Fprintf(cfg.Stderr, "sbx loop: iteration %d of %d\n", i, l.MaxIterations)

	rec := &Record{Iteration: i, Start: time.Now(), Log: logPath}
	iterCtx, cancel := context.WithTimeout(runCtx, l.IterationTimeout)
	defer cancel()
	pidfile := fmt.Sprintf("/tmp/sbx-loop-%s-%d.pid", r.status.RunID, i)
	status, err := r.supervise(iterCtx, cfg.Group.Group(command, pidfile), pidfile, cliutil.ExecOptions{
		Interactive: true,
		Workdir:     cfg.Workspace,
		Env:         cfg.Env,
		Stdin:       strings.NewReader(input),
		Stdout:      out,
		Stderr:      errOut,
	})
	out.Flush()
	errOut.Flush()
	rec.DurationMS = time.Since(rec.Start).Milliseconds()
	if err != nil {
		return nil, fmt.Errorf("iteration %d: %v", i, err)
	}
	rec.ExitStatus = status
	switch {
	case ctx.Err() != nil || runCtx.Err() != nil:
		rec.Interrupted = true
	case iterCtx.Err() != nil:
		rec.TimedOut = true
		fmt.Fprintf(cfg.Stderr, "sbx loop: iteration %d hit iterationTimeout (%s); the agent was killed\n", i, l.IterationTimeout)
	}
	output := captured.String()
	rec.PromiseSeen = PromiseSeen(output, l.Completion.Promise)
	// Count egress denials (a backend call) while the workspace is read.
	denials := make(chan *int, 1)
	go func() {
		if cfg.Denials != nil {
			if n, err := cfg.Denials.Denials(ctx, rec.Start, time.Now()); err == nil {
				denials <- &n
				return
			}
		}
		denials <- nil
	}()
	after, err := r.scan.Snapshot(ctx)
	rec.Denials = <-denials
	switch {
	case err == nil:
		rec.Progressed = !before.Same(after)
		rec.Files = Changed(*before, after)
		if rec.Commits, err = Commits(ctx, cfg.Workspace, before.Head, after.Head); err != nil && ctx.Err() == nil {
			fmt.Fprintf(cfg.Stderr, "sbx loop: iteration %d: counting commits: %v\n", i, err)
		}
		r.last = &after
	case ctx.Err() != nil:
		// Stopped while the workspace was read: the run ends without
		// this iteration's progress measured.
		rec.Interrupted = true
	default:
		return nil, err
	}
	if !rec.Interrupted && rec.ExitStatus == 0 && !rec.TimedOut && (l.Completion.Promise == "" || rec.PromiseSeen) {
		r.last = nil // verify may change the workspace
		for _, v := range l.Completion.Verify {
			code, err := cfg.Exec.Exec(runCtx, []string{"sh", "-c", v}, cliutil.ExecOptions{Workdir: cfg.Workspace, Env: cfg.Env, Stdout: out, Stderr: errOut})
			out.Flush()
			errOut.Flush()
			if err != nil {
				return nil, fmt.Errorf("verify %q: %v", v, err)
			}
			rec.Verify = append(rec.Verify, Verify{Command: v, ExitStatus: code})
			if code != 0 {
				break
			}
		}
	}
	if rec.ExitStatus != 0 || rec.TimedOut {
		code := rec.ExitStatus
		if rec.TimedOut {
			code = 124
		}
		rec.Failure = &Failure{ExitStatus: code, LastLine: LastErrorLine(output)}
	}
	return rec, nil
}

// supervise runs the agent and, when ctx ends first, kills its process
// group inside the sandbox so that nothing of it survives, then waits for
// the exec to return.
func (r *loopRun) supervise(ctx context.Context, argv []string, pidfile string, o cliutil.ExecOptions) (int, error) {
	execCtx, cancelExec := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelExec()
	type result struct {
		code int
		err  error
	}
	done := make(chan result, 1)
	go func() {
		code, err := r.cfg.Exec.Exec(execCtx, argv, o)
		done <- result{code, err}
	}()
	select {
	case res := <-done:
		return res.code, res.err
	case <-ctx.Done():
	}
	killCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), killGrace+3*time.Second)
	defer cancel()
	var discard bytes.Buffer
	r.cfg.Exec.Exec(killCtx, r.cfg.Group.Kill(pidfile), cliutil.ExecOptions{Stdout: &discard, Stderr: &discard})
	select {
	case res := <-done:
		return res.code, res.err
	case <-time.After(2 * time.Second):
		cancelExec() // the client is stuck; the agent itself is dead
		res := <-done
		if res.err != nil && errors.Is(execCtx.Err(), context.Canceled) {
			return -1, nil
		}
		return res.code, res.err
	}
}

// redactor writes whole lines with secret values (and their common
// encodings) replaced.
type redactor struct {
	mu      sync.Mutex
	w       io.Writer
	secrets *redact.Set
	buf     []byte
}

func newRedactor(w io.Writer, secrets []string) *redactor {
	s := &redact.Set{}
	s.Add(secrets...)
	return &redactor{w: w, secrets: s}
}

// maxPending bounds what the redactor holds while it waits for the end of
// a line: an agent printing without newlines must not grow sbx's memory.
const maxPending = 64 << 10

func (r *redactor) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.buf = append(r.buf, p...)
	cut := bytes.LastIndexByte(r.buf, '\n') + 1
	if cut == 0 && len(r.buf) > maxPending {
		// No line end in sight: mask what is whole, then write all but a
		// tail that could hold the start of a secret.
		r.buf = append(r.buf[:0], r.secrets.String(string(r.buf))...)
		cut = len(r.buf) - max(r.secrets.Longest()-1, 0)
	}
	if cut > 0 {
		if err := r.emit(r.buf[:cut]); err != nil {
			return 0, err
		}
		r.buf = append(r.buf[:0], r.buf[cut:]...)
	}
	return len(p), nil
}

// Flush writes a trailing partial line.
func (r *redactor) Flush() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.buf) > 0 {
		r.emit(r.buf)
		r.buf = r.buf[:0]
	}
}

func (r *redactor) emit(b []byte) error {
	_, err := io.WriteString(r.w, r.secrets.String(string(b)))
	return err
}
