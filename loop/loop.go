// Package loop runs an unattended agent loop ("Ralph") inside converged
// sandboxes: the same prompt each iteration, fed on standard input to the
// agent's non-interactive command, until the completion checks pass or a
// bound enforced from outside the agent stops it: max iterations, a
// per-iteration timeout that kills the agent's whole process tree inside the
// sandbox, a total duration, and a breaker for iterations that make no
// progress or fail the same way. Several agents, one sandbox each, may
// take turns in one run. A run is observable from its first instant
// (status.json), steerable from another process (hints, stop) and, when
// detached, followed through its log; every iteration is logged and
// recorded under sbx's state directory, outside the workspace the agent
// can write.
package loop

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/sbxhq/sbx/driver"
	"github.com/sbxhq/sbx/internal/redact"
	"github.com/sbxhq/sbx/internal/untrusted"
	"github.com/sbxhq/sbx/netlog"
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
	Exec(ctx context.Context, argv []string, o driver.ExecOptions) (int, error)
}

// Grouper wraps the agent's command so that its whole process tree inside
// the sandbox can be killed: Group runs argv in a new process group whose
// id is written to pidfile; Kill ends that group. A command that is not
// in the sandbox makes Group's command exit 127 after printing
// MissingCommand and the command's name.
type Grouper interface {
	Group(argv []string, pidfile string) []string
	Kill(pidfile string) []string
}

// EgressCounter counts the requests the sandbox's egress denied, and those
// that failed upstream, in a time window, and lists the first max of each
// (driver.EgressCounter, for one sandbox).
type EgressCounter interface {
	EgressCount(ctx context.Context, since, until time.Time, max int) (netlog.Count, error)
}

// Progress measures the workspace where the agent works: the host's, or
// the sandbox's own copy of it on backends that keep one (kubernetes).
// Commits are counted inside the sandbox on every backend
// (CountCommits).
type Progress interface {
	Snapshot(ctx context.Context) (Snapshot, error)
}

// Checkpointer is where checkpoints of the sandboxes hook into a run: the
// loop calls it, with the status's phase "checkpointing" while it works,
// before every iteration (the agent of that iteration not yet started)
// and once the run has ended. An error before an iteration ends the run
// (state error); one after the run is added to its detail. Whether it
// acts at a point is its own business (loop.checkpoint: never,
// onComplete, everyIteration).
type Checkpointer interface {
	BeforeIteration(ctx context.Context, sandbox string, iteration int) error
	// AfterRun gets how the run ended; ctx is done when the run was
	// interrupted.
	AfterRun(ctx context.Context, res *Result) error
}

// Agent is one agent of a run, in its own sandbox.
type Agent struct {
	Sandbox string
	Agent   string // claude, codex, ...: its default command
	// File is the sandbox's file and Template what its sandbox was made
	// from, for the message when the agent's command is not there.
	File     string
	Template string
	// Loop is its file's loop section: the prompt, loop.command and
	// iterationTimeout of this agent's turns.
	Loop spec.Loop
	// Env is the environment of each exec: secrets (and env on backends
	// that store none). Values are passed as -e NAME, never in argv.
	Env    map[string]string
	Exec   Sandbox
	Group  Grouper // default: ShellGrouper
	Egress EgressCounter
	// WorkspaceReadOnly says the file mounts the workspace read-only: the
	// agent is not expected to write it, so the loop does not check that
	// it can.
	WorkspaceReadOnly bool
	// Progress is where the agent's work is measured (nil: the run's
	// workspace on the host, shared by every such agent).
	Progress Progress
	// Pull, on backends whose sandbox works on its own copy of the
	// workspace, brings that copy home when the run ends, whatever its
	// state (nil: the agent works on the host's workspace).
	Pull Puller
	// Fetch, on backends whose sandbox commits to a git directory of its
	// own, brings its commits into the host's repository when the run
	// ends (refs/sbx/NAME/*), and says what it did in a line.
	Fetch func(ctx context.Context) (string, error)
}

// Config is what a run does.
type Config struct {
	Workspace string
	// Loop bounds the run: maxIterations, maxDuration, the breaker and
	// the completion checks (the first file's loop section, with the
	// command line's overrides).
	Loop spec.Loop
	// Agents take turns: iteration i runs on Agents[(i-1) % len(Agents)],
	// all in the one workspace.
	Agents []Agent
	// Redact lists values never written to a log or the terminal (every
	// agent's secrets).
	Redact     []string
	Checkpoint Checkpointer
	// Unprotected, when set, says how the protection of a sandbox's
	// declaration was lost since it was made (driver.Unprotecter). The
	// loop starts no iteration in a sandbox that lost it: unattended,
	// nobody would see the agent rewrite what bounds it.
	Unprotected func(ctx context.Context, sandbox string) ([]string, error)
	// Stdout and Stderr are the terminal (io.Discard for a detached run,
	// whose log is the run's). The run's log gets what they get, with
	// each iteration's output bounded.
	Stdout io.Writer
	Stderr io.Writer
}

// Record is one iteration in records.jsonl. Files counts the paths the
// iteration added, removed or modified in the working tree, committed or
// not (ignored files aside); Commits counts the commits HEAD gained (git
// rev-list --count before..after), 0 with a warning when they cannot be
// counted. An iteration stopped while the workspace was read has neither.
// Denials counts the requests egress denied during the iteration, on
// drivers that log them; Denied lists the first MaxDenialRecords of them,
// each text bounded. UpstreamErrors and Failed are the same for requests
// that failed upstream (an unreachable or failing model is otherwise
// invisible: the agent retries, for minutes).
type Record struct {
	Iteration      int             `json:"iteration"`
	Sandbox        string          `json:"sandbox"`
	Start          time.Time       `json:"start"`
	DurationMS     int64           `json:"duration_ms"`
	ExitStatus     int             `json:"exit_status"`
	TimedOut       bool            `json:"timed_out,omitempty"`
	Interrupted    bool            `json:"interrupted,omitempty"`
	CommandMissing bool            `json:"command_missing,omitempty"`
	PromiseSeen    bool            `json:"promise_seen"`
	Verify         []Verify        `json:"verify,omitempty"`
	Progressed     bool            `json:"progressed"`
	Files          int             `json:"files_changed"`
	Commits        int             `json:"commits"`
	Denials        *int            `json:"denials,omitempty"`
	Denied         []netlog.Denial `json:"denied,omitempty"`
	UpstreamErrors *int            `json:"upstream_errors,omitempty"`
	Failed         []netlog.Denial `json:"failed,omitempty"`
	Failure        *Failure        `json:"failure,omitempty"`
	Summary        string          `json:"summary"`
	Log            string          `json:"log"`
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

// Loop runs the loop until it completes or a bound stops it, then records
// how it ended. Cancelling ctx (Ctrl-C) or `sbx loop stop` kills the
// agent inside the sandbox and ends the run as "interrupted".
func (r *Run) Loop(ctx context.Context, cfg Config) *Result {
	ctx = r.Watch(ctx)
	it := &iterator{run: r, cfg: cfg, last: map[Progress]*Snapshot{}}
	if it.cfg.Stdout == nil {
		it.cfg.Stdout = io.Discard
	}
	if it.cfg.Stderr == nil {
		it.cfg.Stderr = io.Discard
	}
	it.log = Quiet{r.log}
	res := it.loop(ctx)
	res.ExitCode, res.RunDir = exitCodes[res.State], string(r.Dir)
	r.update(func(s *Status) { s.Iteration = res.Iterations })
	if it.started {
		it.pullHome(ctx, res)
	}
	if cfg.Checkpoint != nil {
		r.SetPhase(PhaseCheckpointing)
		if err := cfg.Checkpoint.AfterRun(ctx, res); err != nil {
			res.Detail += "; checkpoint after the run: " + err.Error()
		}
	}
	// Said before the end is recorded: whoever follows the log until
	// the run ends (sbx loop logs --follow) sees this line.
	it.say("%s: %s (exit %d; records in %s)", res.State, res.Detail, res.ExitCode, res.RunDir)
	if n := r.Finish(res.State, res.ExitCode, res.Detail); n > 0 {
		it.say("%d hint(s) queued for this run were not delivered: it ended first", n)
	}
	return res
}

// iterator is one run's loop.
type iterator struct {
	run *Run
	cfg Config
	log io.Writer // the run's log
	// last is each workspace (by its Progress) after the previous
	// iteration there, reused as the next one's starting point when
	// nothing ran in between.
	last     map[Progress]*Snapshot
	commands [][]string // each agent's command
	// started says the run got past checking its configuration: its
	// agents may have run.
	started bool
	// failures counts the failing iterations in a row (loop.backoff).
	failures int
}

// say prints one line of the loop's own on the terminal and in the log:
// one line, whatever its arguments hold (an error may quote what the
// agent wrote), with nothing a terminal could act on.
func (it *iterator) say(format string, args ...any) {
	line := "sbx loop: " + untrusted.Line(fmt.Sprintf(format, args...)) + "\n"
	io.WriteString(it.cfg.Stderr, line)
	io.WriteString(it.log, line)
}

func (it *iterator) loop(ctx context.Context) *Result {
	cfg := it.cfg
	l := cfg.Loop
	fail := func(format string, args ...any) *Result {
		return &Result{State: StateError, Detail: fmt.Sprintf(format, args...)}
	}
	cfg.Agents = append([]Agent(nil), cfg.Agents...)
	switch {
	case l.MaxIterations <= 0:
		return fail("maxIterations must be greater than 0")
	case len(cfg.Agents) != len(it.run.controls):
		return fail("%d agents for a run of %d sandboxes", len(cfg.Agents), len(it.run.controls))
	}
	for i, a := range cfg.Agents {
		if a.Sandbox != it.run.controls[i].Sandbox {
			return fail("agent %d runs in sandbox %q, the run's sandbox %d is %q", i+1, a.Sandbox, i+1, it.run.controls[i].Sandbox)
		}
		command := a.Loop.Command
		if len(command) == 0 {
			command = spec.AgentOf(a.Agent).Command
		}
		if len(command) == 0 {
			return fail("agent %s has no default non-interactive command; set loop.command in %s", a.Agent, a.File)
		}
		if cfg.Agents[i].Group == nil {
			cfg.Agents[i].Group = ShellGrouper{}
		}
		it.commands = append(it.commands, command)
	}
	var host Progress
	for i := range cfg.Agents {
		if cfg.Agents[i].Progress == nil {
			if host == nil {
				host = &hostProgress{scan: NewScanner(cfg.Workspace)}
			}
			cfg.Agents[i].Progress = host
		}
	}
	it.cfg = cfg
	records, err := os.OpenFile(it.run.Dir.Records(), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return fail("%v", err)
	}
	defer records.Close()
	start := time.Now()
	if err := it.run.update(func(s *Status) {
		s.MaxIterations = l.MaxIterations
		s.Breaker = Breaker{NoProgressLimit: l.Breaker.NoProgress, SameErrorLimit: l.Breaker.SameError}
		s.Completion = CompletionState{Promise: l.Completion.Promise, Verify: len(l.Completion.Verify)}
	}); err != nil {
		return fail("%v", err)
	}
	if len(cfg.Agents) > 1 {
		var names []string
		for _, a := range cfg.Agents {
			names = append(names, fmt.Sprintf("%q", a.Sandbox))
		}
		it.say("%d agents take turns: %s (iteration i runs on the ((i-1) mod %d)+1st)", len(names), strings.Join(names, ", "), len(names))
	}
	runCtx := ctx
	if l.MaxDuration > 0 {
		var cancel context.CancelFunc
		runCtx, cancel = context.WithDeadline(ctx, start.Add(l.MaxDuration))
		defer cancel()
	}
	ended := func(state, detail string, i int) *Result {
		return &Result{State: state, Detail: detail, Iterations: i}
	}
	it.started = true
	if err := it.preflight(runCtx); err != nil {
		if ctx.Err() != nil {
			return ended(StateInterrupted, "stopped before iteration 1", 0)
		}
		return ended(StateError, err.Error(), 0)
	}
	for i := 1; ; i++ {
		switch {
		case ctx.Err() != nil:
			return ended(StateInterrupted, "stopped before iteration "+fmt.Sprint(i), i-1)
		case runCtx.Err() != nil:
			return ended(StateBudget, fmt.Sprintf("maxDuration %s spent", l.MaxDuration), i-1)
		}
		turn := (i - 1) % len(cfg.Agents)
		ag := &it.cfg.Agents[turn]
		if err := it.protected(runCtx, ag.Sandbox); err != nil {
			if ctx.Err() != nil {
				return ended(StateInterrupted, "stopped before iteration "+fmt.Sprint(i), i-1)
			}
			return ended(StateError, fmt.Sprintf("iteration %d not started: %v", i, err), i-1)
		}
		if cfg.Checkpoint != nil {
			it.run.update(func(s *Status) { s.Phase, s.Iteration, s.IterationSandbox = PhaseCheckpointing, i, ag.Sandbox })
			if err := cfg.Checkpoint.BeforeIteration(runCtx, ag.Sandbox, i); err != nil {
				if ctx.Err() != nil {
					return ended(StateInterrupted, fmt.Sprintf("stopped while checkpointing before iteration %d", i), i-1)
				}
				return ended(StateError, fmt.Sprintf("checkpoint before iteration %d: %v", i, err), i-1)
			}
		}
		rec, err := it.iteration(ctx, runCtx, i, turn)
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
		it.say("%s", rec.Summary)
		done := !rec.Interrupted && !rec.CommandMissing && it.completed(rec)
		var trip string
		if err := it.run.update(func(s *Status) {
			s.LastOutcome, s.VerifyCommand = rec, ""
			if rec.Denials != nil {
				s.Denials = append(s.Denials, *rec.Denials)
			}
			if rec.UpstreamErrors != nil {
				s.UpstreamErrors = append(s.UpstreamErrors, *rec.UpstreamErrors)
			}
			s.Completion.PromiseSeen = rec.PromiseSeen
			s.Completion.VerifyPassed = len(l.Completion.Verify) > 0 && verified(rec, l)
			s.Completion.Complete = done
			if !done && !rec.Interrupted && !rec.CommandMissing {
				trip = s.Breaker.Observe(rec.Progressed, rec.Failure)
			}
		}); err != nil {
			return ended(StateError, err.Error(), i)
		}
		switch {
		case rec.Interrupted && ctx.Err() != nil:
			return ended(StateInterrupted, fmt.Sprintf("stopped during iteration %d; the agent was killed", i), i)
		case rec.Interrupted:
			return ended(StateBudget, fmt.Sprintf("maxDuration %s spent during iteration %d; the agent was killed", l.MaxDuration, i), i)
		case rec.CommandMissing:
			return ended(StateError, ag.missing(it.commands[turn]), i)
		case done:
			return ended(StateCompleted, fmt.Sprintf("complete after %d iteration(s)", i), i)
		case trip != "":
			return ended(StateBreaker, trip, i)
		case i >= l.MaxIterations:
			return ended(StateMaxIterations, fmt.Sprintf("reached maxIterations (%d) without completing", l.MaxIterations), i)
		}
		if rec.Failure == nil {
			it.failures = 0
			continue
		}
		it.failures++
		if !it.pause(ctx, runCtx, i) {
			if ctx.Err() != nil {
				return ended(StateInterrupted, fmt.Sprintf("stopped after iteration %d, while pausing", i), i)
			}
			return ended(StateBudget, fmt.Sprintf("maxDuration %s spent after iteration %d, while pausing", l.MaxDuration, i), i)
		}
	}
}

// pause waits loop.backoff's pause after the it.failures-th failing
// iteration in a row, the run's status saying so; false when the run was
// stopped or ran out of time meanwhile.
func (it *iterator) pause(ctx, runCtx context.Context, i int) bool {
	d := it.cfg.Loop.Backoff.Pause(it.failures)
	if d <= 0 {
		return true
	}
	until := time.Now().Add(d)
	it.run.update(func(s *Status) { s.Phase, s.PauseUntil = PhasePausing, &until })
	defer it.run.update(func(s *Status) { s.PauseUntil = nil })
	it.say("pausing %s after %s in a row (loop.backoff)", roundDuration(d), plural(it.failures, "failing iteration"))
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-runCtx.Done():
		return false
	}
}

// missing is the error of an agent whose command is not in its sandbox.
func (a *Agent) missing(command []string) string {
	where := fmt.Sprintf("sandbox %q (template %s)", a.Sandbox, a.Template)
	if len(a.Loop.Command) > 0 {
		return fmt.Sprintf("loop.command's program %q is not in %s; install it in the template, or change loop.command in %s", command[0], where, a.File)
	}
	return fmt.Sprintf("%q, the %s agent's default command, is not in %s; use a template that has it, or set loop.command in %s to a command the template has", command[0], a.Agent, where, a.File)
}

// completed applies the completion rule: every configured check holds.
func (it *iterator) completed(rec *Record) bool {
	c := it.cfg.Loop.Completion
	promiseOK := c.Promise == "" || rec.PromiseSeen
	verifyOK := len(c.Verify) == 0 || verified(rec, it.cfg.Loop)
	return (c.Promise != "" || len(c.Verify) > 0) && promiseOK && verifyOK && rec.ExitStatus == 0
}

// protected fails when sandbox lost the protection of its declaration
// (Config.Unprotected), saying how and what restores it.
func (it *iterator) protected(ctx context.Context, sandbox string) error {
	if it.cfg.Unprotected == nil {
		return nil
	}
	lost, err := it.cfg.Unprotected(ctx, sandbox)
	if err != nil {
		return fmt.Errorf("checking the protection of sandbox %q: %v", sandbox, err)
	}
	if len(lost) > 0 {
		return fmt.Errorf("sandbox %q lost the protection of its declaration (%s); 'sbx plan' shows it and 'sbx apply' restores it", sandbox, strings.Join(lost, "; "))
	}
	return nil
}

// verified reports whether every completion.verify command ran and passed.
func verified(rec *Record, l spec.Loop) bool {
	if len(rec.Verify) != len(l.Completion.Verify) {
		return false
	}
	for _, v := range rec.Verify {
		if v.ExitStatus != 0 {
			return false
		}
	}
	return true
}

// What an iteration's output may cost the run's log, where it sits beside
// every other iteration's: the iteration's own log keeps up to maxLog.
const maxRunLogIteration = 1 << 20

// iteration runs the agent whose turn it is once and checks the outcome.
// ctx is the user's (cancelled by stop), runCtx adds maxDuration.
func (it *iterator) iteration(ctx, runCtx context.Context, i, turn int) (*Record, error) {
	cfg := it.cfg
	l := cfg.Loop
	ag := &cfg.Agents[turn]
	command := it.commands[turn]
	started := time.Now()
	if err := it.run.update(func(s *Status) {
		s.Phase, s.Iteration, s.IterationSandbox, s.IterationStarted, s.VerifyCommand = PhaseAgent, i, ag.Sandbox, &started, ""
	}); err != nil {
		return nil, err
	}
	prompt, err := ReadPrompt(cfg.Workspace, ag.Loop)
	if err != nil {
		return nil, err
	}
	hints, err := it.run.controls[turn].takeHints(it.run.ID)
	if err != nil {
		return nil, fmt.Errorf("hints: %v", err)
	}
	input := Prompt(i, l.MaxIterations, hints, string(prompt))
	// The workspace as the last iteration left it, unless something ran
	// since (verify commands may write).
	progress := ag.Progress
	before := it.last[progress]
	if before == nil {
		b, err := progress.Snapshot(ctx)
		if err != nil {
			return nil, err
		}
		before = &b
	}
	logPath := it.run.Dir.IterationLog(i)
	logFile, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, err
	}
	defer logFile.Close()
	captured := &tail{max: maxTail}
	// The agent's answer: its standard output, where the promise counts
	// (what it echoes of its prompt on stderr, as codex exec does, never
	// does).
	answer := &tail{max: maxTail}
	iterLog := &capped{w: logFile, max: maxLog}
	runLog := &capped{w: it.log, max: maxRunLogIteration,
		note: fmt.Sprintf("the run's log stops here for iteration %d, which printed more than %d MiB; its own log has more: %s", i, maxRunLogIteration>>20, logPath)}
	out := newAgentOutput(io.MultiWriter(Quiet{cfg.Stdout}, runLog, iterLog), io.MultiWriter(captured, answer), cfg.Redact)
	errOut := newAgentOutput(io.MultiWriter(Quiet{cfg.Stderr}, runLog, iterLog), captured, cfg.Redact)
	if len(cfg.Agents) > 1 {
		it.say("iteration %d of %d (sandbox %q)", i, l.MaxIterations, ag.Sandbox)
	} else {
		it.say("iteration %d of %d", i, l.MaxIterations)
	}

	rec := &Record{Iteration: i, Sandbox: ag.Sandbox, Start: time.Now(), Log: logPath}
	timeout := ag.Loop.IterationTimeout
	if timeout <= 0 {
		timeout = l.IterationTimeout
	}
	iterCtx, cancel := context.WithTimeout(runCtx, timeout)
	defer cancel()
	pidfile := fmt.Sprintf("/tmp/sbx-loop-%s-%d.pid", it.run.ID, i)
	// Recorded while the agent runs, so that if this process dies the
	// next run (or sbx loop stop) can kill the agent it left behind.
	it.run.update(func(s *Status) { s.AgentPidfile = pidfile })
	status, err := it.supervise(iterCtx, ag, ag.Group.Group(command, pidfile), pidfile, driver.ExecOptions{
		Interactive: true,
		Workdir:     cfg.Workspace,
		Env:         ag.Env,
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
	it.run.update(func(s *Status) { s.AgentPidfile = "" })
	rec.ExitStatus = status
	switch {
	case ctx.Err() != nil || runCtx.Err() != nil:
		rec.Interrupted = true
	case iterCtx.Err() != nil:
		rec.TimedOut = true
		it.say("iteration %d hit iterationTimeout (%s); the agent was killed", i, timeout)
	}
	output := captured.String()
	rec.CommandMissing = status == 127 && strings.Contains(output, MissingCommand+command[0]+"\n")
	rec.PromiseSeen = PromiseSeen(Unechoed(answer.String(), input, string(prompt)), l.Completion.Promise)
	// Count egress denials and upstream failures (a backend call) while
	// the workspace is read.
	type counts struct {
		c   netlog.Count
		err error
	}
	counted := make(chan counts, 1)
	go func() {
		var c counts
		if ag.Egress != nil {
			c.c, c.err = ag.Egress.EgressCount(ctx, rec.Start, time.Now(), MaxDenialRecords)
		}
		counted <- c
	}()
	after, err := progress.Snapshot(ctx)
	c := <-counted
	if ag.Egress != nil && c.err == nil {
		rec.Denials, rec.Denied = &c.c.Denied, boundDenials(c.c.FirstDenied)
		rec.UpstreamErrors, rec.Failed = &c.c.Failed, boundDenials(c.c.FirstFailed)
	} else if c.err != nil && ctx.Err() == nil {
		it.say("iteration %d: counting egress denials: %v", i, c.err)
	}
	switch {
	case err == nil:
		rec.Progressed = !before.Same(after)
		rec.Files = Changed(*before, after)
		if rec.Commits, err = CountCommits(ctx, ag.Exec, it.cfg.Workspace, before.Head, after.Head, 0); err != nil && ctx.Err() == nil {
			it.say("iteration %d: counting commits: %v", i, err)
		}
		it.last[progress] = &after
	case ctx.Err() != nil:
		// Stopped while the workspace was read: the run ends without
		// this iteration's progress measured.
		rec.Interrupted = true
	default:
		return nil, err
	}
	if !rec.Interrupted && !rec.CommandMissing && rec.ExitStatus == 0 && !rec.TimedOut && (l.Completion.Promise == "" || rec.PromiseSeen) {
		it.last[progress] = nil // verify may change the workspace
		for _, v := range l.Completion.Verify {
			it.run.update(func(s *Status) { s.Phase, s.VerifyCommand = PhaseVerifying, v })
			code, err := ag.Exec.Exec(runCtx, []string{"sh", "-c", v}, driver.ExecOptions{Workdir: cfg.Workspace, Env: ag.Env, Stdout: out, Stderr: errOut})
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
	rec.Summary = Summary(rec, len(cfg.Agents) > 1)
	return rec, nil
}

// supervise runs the agent and, when ctx ends first, kills its process
// group inside the sandbox so that nothing of it survives, then waits for
// the exec to return.
func (it *iterator) supervise(ctx context.Context, ag *Agent, argv []string, pidfile string, o driver.ExecOptions) (int, error) {
	execCtx, cancelExec := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelExec()
	type result struct {
		code int
		err  error
	}
	done := make(chan result, 1)
	go func() {
		code, err := ag.Exec.Exec(execCtx, argv, o)
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
	ag.Exec.Exec(killCtx, ag.Group.Kill(pidfile), driver.ExecOptions{Stdout: &discard, Stderr: &discard})
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

// Quiet writes to W and ignores its errors: the terminal or the run's log
// failing does not fail the agent's iteration (or what sbx prints).
type Quiet struct{ W io.Writer }

func (q Quiet) Write(p []byte) (int, error) {
	q.W.Write(p)
	return len(p), nil
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
