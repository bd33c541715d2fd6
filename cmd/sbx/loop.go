package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/pflag"

	"github.com/sbxhq/sbx/egress"
	"github.com/sbxhq/sbx/internal/untrusted"
	"github.com/sbxhq/sbx/loop"
	"github.com/sbxhq/sbx/reconcile"
	"github.com/sbxhq/sbx/session"
	"github.com/sbxhq/sbx/spec"
	"github.com/sbxhq/sbx/state"
)

func loopVerb() *verb {
	return &verb{
		name:    "loop",
		summary: "run the agent loop inside the converged sandbox; status, logs, hint, stop",
		usage:   "[flags] | status [--json] | logs [--follow] [RUN] | hint [--next] TEXT | stop | wait",
		help: `sbx loop converges the sandbox (showing the plan and applying it with the
usual approval rules), then runs iterations of the file's loop section: the
prompt, any hints, and a header go to the agent's non-interactive command on
stdin, until the completion checks pass or a bound stops it. After each
iteration it prints one line: its exit status and time, the verify result,
the files it changed and the requests egress denied.

--detach converges in the foreground (asking for approval as usual), then
carries on in the background, detached from the terminal, prints the run's
id and returns; the run's output goes to its log.

Several -f files, each declaring a sandbox with its own agent, run as one
multi-agent run in one workspace: iteration i runs on the ((i-1) mod n)+1st
file's sandbox (implementer, reviewer, implementer, ...). The first file's
loop section sets the bounds (maxIterations, maxDuration, breaker,
completion); each file's own section gives its agent's prompt, command and
iterationTimeout.

From another terminal:
  sbx loop status [--json]   what the run does now (converging, iteration i running,
                             verifying, finished and why), its last iteration, breaker;
                             --json: docs/loop-status-json.md, with every iteration's record
  sbx loop logs [--follow] [RUN]  the run's output (default: the sandbox's latest run);
                             --follow follows it until the run ends and exits with its
                             status (-f is --file here too, as on every verb)
  sbx loop hint "TEXT"       add TEXT to the next iteration's prompt of the live run;
                             --next queues it for the sandbox's next run instead
  sbx loop stop              kill the agent inside the sandbox and end the run (also the
                             agent of a run whose sbx process died)
  sbx loop wait [--timeout D]  wait for the run to end; print how it ended and exit with
                             its status (for a script, or a notification when it is over)

A second sbx loop on a sandbox whose run is live is refused at once. An
agent whose run's sbx process died is killed before the sandbox's next run
starts. A failing iteration is followed by a pause that doubles with each
failure in a row (loop.backoff: 10s up to 5m by default).

Exit status: 0 completed, 1 error, 3 max iterations reached, 4 breaker
tripped, 5 maxDuration spent, 130 interrupted (Ctrl-C or sbx loop stop).`,
		setup: func(fs *pflag.FlagSet) runFunc {
			o := &loopFlags{}
			o.register(fs)
			// Flags end at the subcommand: each has its own.
			fs.SetInterspersed(false)
			return func(ctx context.Context, a *app, args []string) int {
				if len(args) > 0 {
					if sub := loopSubcommand(args[0]); sub != nil {
						// sbx -f x loop logs: the files, driver and
						// --no-local before the subcommand are its own.
						var other []string
						fs.Visit(func(f *pflag.Flag) {
							switch f.Name {
							case "file", "driver", "no-local":
							default:
								other = append(other, "--"+f.Name)
							}
						})
						if len(other) > 0 {
							return a.errorf("%s of a run cannot go with loop %s", strings.Join(other, ", "), args[0])
						}
						return sub.run(ctx, a, append(o.t.argv(), args[1:]...))
					}
					return a.errorf("loop: unknown subcommand %q (loop takes status, logs, hint, stop or wait)", args[0])
				}
				if fs.Changed("max-iterations") && o.maxIter <= 0 {
					return a.errorf("--max-iterations must be greater than 0")
				}
				return a.loopRun(ctx, o)
			}
		},
	}
}

// loopFlags are the flags of a run.
type loopFlags struct {
	t         target
	ap        approval
	maxIter   int
	ephemeral bool
	detach    bool
}

func (o *loopFlags) register(fs *pflag.FlagSet) {
	o.t.register(fs)
	o.t.registerLock(fs)
	fs.IntVar(&o.maxIter, "max-iterations", 0, "override loop.maxIterations (must be > 0)")
	o.ap.register(fs)
	fs.BoolVar(&o.ephemeral, "ephemeral", false, "create the sandbox for this run and destroy it at the end, even on failure (with kubernetes.warmPool: claim a warm sandbox and give it back)")
	fs.BoolVar(&o.detach, "detach", false, "run in the background once converged: print the run id and return")
}

// argv is the flags as the detached process gets them: what the user
// gave, nothing from the files.
func (o *loopFlags) argv() []string {
	args := o.t.argv()
	args = append(args, "--lock-timeout", o.t.lockTimeout.String())
	if o.maxIter > 0 {
		args = append(args, "--max-iterations", strconv.Itoa(o.maxIter))
	}
	if o.ap.Yes {
		args = append(args, "--yes")
	}
	if o.ap.Widening {
		args = append(args, "--approve-widening")
	}
	if o.ephemeral {
		args = append(args, "--ephemeral")
	}
	return args
}

// loopSubcommand is one of `sbx loop status|logs|hint|stop`, with its own
// flags.
func loopSubcommand(name string) *verb {
	t := &target{}
	switch name {
	case "status":
		return &verb{name: "loop status", usage: "[--json] [-f FILE...]", setup: func(fs *pflag.FlagSet) runFunc {
			t.register(fs)
			asJSON := fs.Bool("json", false, "print as JSON (docs/loop-status-json.md)")
			return func(ctx context.Context, a *app, args []string) int { return a.loopStatus(t, *asJSON, args) }
		}}
	case "logs":
		return &verb{name: "loop logs", usage: "[--follow] [-f FILE...] [RUN]", setup: func(fs *pflag.FlagSet) runFunc {
			// -f is --file here as on every verb (it was --follow once:
			// movedFollow turns the old spelling into an error naming
			// the new one rather than a file that is not there).
			fs.StringArrayVarP(&t.files, "file", "f", nil, "sandbox file (repeatable; default: the nearest sandbox.yaml)")
			fs.BoolVar(&t.noLocal, "no-local", false, "do not merge sandbox.local.yaml")
			follow := fs.Bool("follow", false, "follow the log until the run ends; exit with the run's status")
			return func(ctx context.Context, a *app, args []string) int {
				if code, moved := a.movedFollow(t.files); moved {
					return code
				}
				return a.loopLogs(ctx, t, *follow, args)
			}
		}}
	case "hint":
		return &verb{name: "loop hint", usage: "[--next] [-f FILE] TEXT", setup: func(fs *pflag.FlagSet) runFunc {
			t.register(fs)
			next := fs.Bool("next", false, "queue the hint for the sandbox's next run, not the live one")
			return func(ctx context.Context, a *app, args []string) int { return a.loopHint(ctx, t, *next, args) }
		}}
	case "stop":
		return &verb{name: "loop stop", usage: "[-f FILE...]", setup: func(fs *pflag.FlagSet) runFunc {
			t.register(fs)
			return func(ctx context.Context, a *app, args []string) int { return a.loopStop(ctx, t, args) }
		}}
	case "wait":
		return &verb{name: "loop wait", usage: "[--timeout D] [-f FILE...]", setup: func(fs *pflag.FlagSet) runFunc {
			t.register(fs)
			timeout := fs.Duration("timeout", 0, "give up after this long (exit 1); 0 waits as long as the run takes")
			return func(ctx context.Context, a *app, args []string) int { return a.loopWait(ctx, t, *timeout, args) }
		}}
	}
	return nil
}

// movedFollow refuses a -f of loop logs that is no file: `sbx loop logs
// -f RUN` from when -f meant --follow there would otherwise read RUN as a
// sandbox file and fail on something the user never meant.
func (a *app) movedFollow(files []string) (int, bool) {
	for _, f := range files {
		if _, err := os.Stat(f); err != nil {
			return a.errorf("loop logs: no sandbox file %q: %s", f, movedShort["loop logs -f"]), true
		}
	}
	return 0, false
}

// loopSpecs loads the files without touching the backend, refusing a
// sandbox of another workspace (session.CheckOwned) unless --adopt.
func (a *app) loopSpecs(t *target) ([]*spec.Spec, error) {
	res, err := session.Load(session.Options{Files: t.files, NoLocal: t.noLocal, Offline: true, HostValue: a.hostValues.add}, a.lookupEnv)
	if err != nil {
		return nil, err
	}
	if len(res.Specs) == 0 {
		return nil, errors.New("the files declare no sandbox")
	}
	if !t.adopt {
		// Loops share their sandbox's name: another workspace's is not
		// this one's to read or stop.
		dir, err := a.stateDir()
		if err != nil {
			return nil, err
		}
		if err := session.CheckOwned(dir, res.Specs, ""); err != nil {
			return nil, err
		}
	}
	return res.Specs, nil
}

// loopLatest is the latest run of the files' sandboxes: one run, which a
// multi-agent run's files share.
func (a *app) loopLatest(t *target) (*loop.Status, error) {
	specs, err := a.loopSpecs(t)
	if err != nil {
		return nil, err
	}
	dir, err := a.stateDir()
	if err != nil {
		return nil, err
	}
	var latest *loop.Status
	for _, sp := range specs {
		s, err := loop.NewControl(dir, sp.Name).Latest()
		if err != nil {
			return nil, err
		}
		if latest != nil && s.RunID != latest.RunID {
			return nil, fmt.Errorf("sandboxes %q and %q had different runs last; name one with -f", latest.Sandbox, sp.Name)
		}
		latest = s
	}
	return latest, nil
}

func (a *app) loopStatus(t *target, asJSON bool, args []string) int {
	if len(args) > 0 {
		return a.errorf("loop status takes no arguments")
	}
	s, err := a.loopLatest(t)
	if err != nil {
		return a.fail(err)
	}
	if asJSON {
		r, err := s.Report()
		if err != nil {
			return a.errorf("%v", err)
		}
		return a.writeJSON(r)
	}
	a.printStatus(s)
	return exitOK
}

// printStatus shows a run for people; what the agent chose (host names it
// asked for) is escaped.
func (a *app) printStatus(s *loop.Status) {
	w := a.stdout
	var names []string
	for _, sb := range s.Sandboxes {
		names = append(names, strconv.Quote(sb.Name))
	}
	of := "sandbox " + strconv.Quote(s.Sandbox)
	if len(names) > 1 {
		of = "sandboxes " + strings.Join(names, ", ")
	}
	fmt.Fprintf(w, "run %s of %s: %s\n", s.RunID, of, s.State)
	elapsed := (time.Duration(s.ElapsedMS) * time.Millisecond).Round(time.Second)
	if s.State == loop.StateRunning {
		now := s.Doing()
		switch {
		case s.Phase == loop.PhaseAgent && s.IterationStarted != nil:
			now += fmt.Sprintf(" for %s", time.Since(*s.IterationStarted).Round(time.Second))
		case s.Phase == loop.PhaseVerifying:
			now += ": " + untrusted.Text(s.VerifyCommand)
		case s.Phase == loop.PhasePausing && s.PauseUntil != nil:
			now += fmt.Sprintf(", %s left", time.Until(*s.PauseUntil).Round(time.Second))
		}
		if len(s.Sandboxes) > 1 && s.IterationSandbox != "" && s.Phase != loop.PhaseConverging {
			now += fmt.Sprintf(" (sandbox %q)", s.IterationSandbox)
		}
		fmt.Fprintf(w, "  now: %s\n  elapsed %s; pid %d%s\n", now, elapsed, s.PID, map[bool]string{true: ", in the background"}[s.Detached])
	} else {
		fmt.Fprintf(w, "  %s (exit %d)\n  %d iteration(s) of %d in %s\n", untrusted.Line(s.Detail), s.ExitCode, s.Iteration, s.MaxIterations, elapsed)
	}
	if o := s.LastOutcome; o != nil {
		fmt.Fprintf(w, "  last: %s\n", o.Summary)
		for _, d := range o.Denied {
			fmt.Fprintf(w, "    denied %s\n", loop.DenialLine(d))
		}
		if o.Denials != nil && *o.Denials > len(o.Denied) {
			fmt.Fprintf(w, "    (and %d more; sbx netlog shows them all)\n", *o.Denials-len(o.Denied))
		}
		for _, d := range o.Failed {
			fmt.Fprintf(w, "    failed %s\n", loop.DenialLine(d))
		}
		if o.UpstreamErrors != nil && *o.UpstreamErrors > len(o.Failed) {
			fmt.Fprintf(w, "    (and %d more failed; sbx netlog shows them all)\n", *o.UpstreamErrors-len(o.Failed))
		}
	}
	fmt.Fprintf(w, "  breaker: no progress %d/%d, same failure %d/%d\n", s.Breaker.NoProgress, s.Breaker.NoProgressLimit, s.Breaker.SameError, s.Breaker.SameErrorLimit)
	fmt.Fprintf(w, "  log: %s\n  records: %s\n", s.Log, s.RunDir)
}

func (a *app) loopLogs(ctx context.Context, t *target, follow bool, args []string) int {
	var s *loop.Status
	var err error
	switch len(args) {
	case 0:
		s, err = a.loopLatest(t)
	case 1:
		var dir state.Dir
		if dir, err = a.stateDir(); err == nil {
			s, err = loop.FindRun(dir, args[0])
		}
	default:
		return a.errorf("loop logs takes at most one run id")
	}
	if err != nil {
		return a.fail(err)
	}
	f, err := os.Open(s.Log)
	if err != nil {
		return a.errorf("%v", err)
	}
	defer f.Close()
	// The log holds what the agent printed, marked and made visible as
	// the run wrote it; made visible again (which changes nothing there)
	// for a log that something else wrote to, or an older sbx.
	out := &untrusted.VisibleWriter{W: a.stdout}
	defer out.Flush()
	if _, err := io.Copy(out, f); err != nil {
		return a.errorf("%v", err)
	}
	if !follow {
		return exitOK
	}
	// Until the run ends: what it writes, every 100 ms. Ctrl-C ends the
	// following, not the run (another process).
	now, err := a.runEnd(ctx, s, func() error {
		_, err := io.Copy(out, f)
		return err
	})
	switch {
	case ctx.Err() != nil:
		return exitInterrupted
	case err != nil:
		return a.errorf("%v", err)
	}
	// Ended: what it wrote before recording that is in the file.
	io.Copy(out, f)
	if now.State == loop.StateVanished {
		return a.errorf("run %s: %s", now.RunID, untrusted.Line(now.Detail))
	}
	return now.ExitCode
}

func (a *app) loopHint(ctx context.Context, t *target, next bool, args []string) int {
	if len(args) == 0 {
		return a.errorf("loop hint needs the text of the hint")
	}
	specs, err := a.loopSpecs(t)
	if err != nil {
		return a.fail(err)
	}
	if len(specs) != 1 {
		return a.errorf("the files declare %d sandboxes; a hint goes to one agent: name its file with -f", len(specs))
	}
	name := specs[0].Name
	dir, err := a.stateDir()
	if err != nil {
		return a.errorf("%v", err)
	}
	c := loop.NewControl(dir, name)
	live, err := c.Live()
	if err != nil {
		return a.errorf("%v", err)
	}
	text := strings.Join(args, " ")
	if live != nil && !next {
		if err := c.AddHint(live.RunID, text); err != nil {
			return a.errorf("%v", err)
		}
		fmt.Fprintf(a.stdout, "hint queued for the next iteration of sandbox %q (run %s)\n", name, live.RunID)
		return exitOK
	}
	if !next {
		return a.errorf("no loop is running on sandbox %q; nothing would read the hint (queue it for the sandbox's next run with --next)", name)
	}
	if live == nil {
		// Queued for a sandbox that is not there, it would wait for
		// whatever sandbox of that name came next.
		s, err := a.open(ctx, t, "")
		if err != nil {
			return a.fail(err)
		}
		if l := s.Live[name]; l == nil || !l.Exists {
			return a.errorf("sandbox %q does not exist; create it (sbx apply) before queuing hints for it", name)
		}
	}
	if err := c.AddHint("", text); err != nil {
		return a.errorf("%v", err)
	}
	fmt.Fprintf(a.stdout, "hint queued for the next run on sandbox %q\n", name)
	return exitOK
}

func (a *app) loopStop(ctx context.Context, t *target, args []string) int {
	if len(args) > 0 {
		return a.errorf("loop stop takes no arguments")
	}
	specs, err := a.loopSpecs(t)
	if err != nil {
		return a.fail(err)
	}
	dir, err := a.stateDir()
	if err != nil {
		return a.errorf("%v", err)
	}
	c := loop.NewControl(dir, specs[0].Name)
	s, err := c.Stop(3 * time.Second)
	var nr *loop.NotRunningError
	if errors.As(err, &nr) && nr.Last != nil && nr.Last.State == loop.StateVanished {
		return a.loopReap(ctx, t, c)
	}
	if err != nil {
		return a.errorf("%v", err)
	}
	fmt.Fprintf(a.stdout, "stopped run %s of sandbox %q after %d iteration(s)\n", s.RunID, s.Sandbox, s.Iteration)
	return exitOK
}

// loopReap kills the agent a run whose process died left running in the
// sandbox (loop stop of a vanished run): the agent must not outlive its
// run.
func (a *app) loopReap(ctx context.Context, t *target, c *loop.Control) int {
	var sess *session.Session
	defer func() {
		if sess != nil {
			sess.Release()
		}
	}()
	run, orphans, err := c.Reap(func(o loop.Orphan) error {
		if sess == nil {
			s, err := a.open(ctx, t, "")
			if err != nil {
				return err
			}
			sess = s
		}
		return sess.KillOrphan(ctx, o)
	})
	if err != nil {
		return a.fail(err)
	}
	for _, o := range orphans {
		fmt.Fprintf(a.stdout, "run %s of sandbox %q had ended without its process (pid %d); killed the agent it left running\n", o.RunID, o.Sandbox, run.PID)
	}
	return exitOK
}

// loopWait waits for the sandbox's latest run to end and exits with its
// status: how a script or a notification learns that a run of hours is
// over.
func (a *app) loopWait(ctx context.Context, t *target, timeout time.Duration, args []string) int {
	if len(args) > 0 {
		return a.errorf("loop wait takes no arguments")
	}
	s, err := a.loopLatest(t)
	if err != nil {
		return a.fail(err)
	}
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	end, err := a.runEnd(ctx, s, nil)
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return a.errorf("run %s is still running after %s (%s)", s.RunID, timeout, end.Doing())
	case err != nil:
		return exitInterrupted
	}
	if end.State == loop.StateVanished {
		return a.errorf("run %s: %s", end.RunID, untrusted.Line(end.Detail))
	}
	fmt.Fprintf(a.stdout, "run %s of sandbox %q: %s: %s (exit %d)\n", end.RunID, end.Sandbox, end.State, untrusted.Line(end.Detail), end.ExitCode)
	return end.ExitCode
}

// runEnd waits until the run s ends and returns how it ended; each
// look calls tick first (logs -f copies the log). It returns ctx's error
// (with the run's latest status) when ctx ends first.
func (a *app) runEnd(ctx context.Context, s *loop.Status, tick func() error) (*loop.Status, error) {
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		now, err := loop.ReadRun(state.RunDir(s.RunDir))
		if err != nil {
			return s, err
		}
		if tick != nil {
			if err := tick(); err != nil {
				return now, err
			}
		}
		if !now.Live() {
			return now, nil
		}
		select {
		case <-ctx.Done():
			return now, ctx.Err()
		case <-t.C:
		}
	}
}

// loopRun starts a run: it takes the sandboxes' run locks (refusing at
// once when one has a live run), records the run from its first instant,
// converges and loops, or hands the run to a detached process.
func (a *app) loopRun(ctx context.Context, o *loopFlags) int {
	specs, err := a.loopSpecs(&o.t)
	if err != nil {
		return a.fail(err)
	}
	if o.detach {
		if err := canDetach(); err != nil {
			return a.errorf("%v", err)
		}
	}
	dir, err := a.stateDir()
	if err != nil {
		return a.errorf("%v", err)
	}
	run, err := session.BeginLoop(dir, specs, o.maxIter, o.detach)
	if err != nil {
		return a.fail(err)
	}
	// A run in the foreground ends with its terminal (SIGHUP) as with
	// Ctrl-C: its agent is killed, not left running without a run. (Only
	// here: the egress proxy, the same binary, reloads on SIGHUP; the
	// detached run ignores it.)
	ctx, stopHangup := signal.NotifyContext(ctx, syscall.SIGHUP)
	defer stopHangup()
	term := stdio{out: a.stdout, err: a.stderr}
	a.stdout = io.MultiWriter(term.out, loop.Quiet{W: run.Log()})
	if o.detach {
		// The run's id is all --detach prints on stdout, as scripts
		// read it (RUN=$(sbx loop -y --detach)); the plan, the approval
		// and apply's steps go to stderr.
		a.stdout = io.MultiWriter(term.err, loop.Quiet{W: run.Log()})
	}
	a.stderr = io.MultiWriter(term.err, loop.Quiet{W: run.Log()})
	return a.loopDrive(run.Watch(ctx), run, o, term, false)
}

// loopResume is the detached process's side of --detach: it takes over
// the run the foreground process began (its lock files are this
// process's descriptors from 3 on, then the end of a pipe on which it says
// it has), and carries it on. Its standard output and error are the run's
// log.
func (a *app) loopResume(ctx context.Context, o *loopFlags, runID string) int {
	specs, err := a.loopSpecs(&o.t)
	if err != nil {
		return a.fail(err)
	}
	dir, err := a.stateDir()
	if err != nil {
		return a.errorf("%v", err)
	}
	var names []string
	for _, sp := range specs {
		names = append(names, sp.Name)
	}
	locks, ready, err := inheritedFiles(len(names))
	if err != nil {
		return a.errorf("%v", err)
	}
	run, err := loop.Resume(dir, runID, names, locks)
	if err != nil {
		ready.Close()
		return a.errorf("%v", err)
	}
	io.WriteString(ready, "ok\n")
	ready.Close()
	return a.loopDrive(run.Watch(ctx), run, o, stdio{out: io.Discard, err: io.Discard}, true)
}

type stdio struct{ out, err io.Writer }

// loopDrive has the session converge the run's sandboxes and run the loop
// in them (session.RunLoop), then records how the run ended: the loop's
// end, or the error that ended it before (a run handed to the detached
// process records nothing here). resumed says this is the detached
// process.
func (a *app) loopDrive(ctx context.Context, run *loop.Run, o *loopFlags, term stdio, resumed bool) int {
	code, why := a.loopConverge(ctx, run, o, term, resumed)
	run.Close(code, why)
	return code
}

// loopConverge opens the run's sandboxes, taking their locks, and runs
// the run in them; it returns the exit code and why the run ended.
func (a *app) loopConverge(ctx context.Context, run *loop.Run, o *loopFlags, term stdio, resumed bool) (int, string) {
	s, err := a.open(ctx, &o.t, "sbx loop")
	if err != nil {
		return a.failure(err)
	}
	defer s.Release()
	lo := session.LoopOptions{
		MaxIterations: o.maxIter, Ephemeral: o.ephemeral, Adopt: o.t.adopt, Approval: o.ap.Approval,
		Resumed: resumed, UI: loopUI{a}, Stdout: term.out, Stderr: term.err, Messages: a.stderr,
	}
	if o.detach && !resumed {
		lo.Detach = func(ctx context.Context) error { return a.detach(ctx, run, o, term) }
	}
	res, err := s.RunLoop(ctx, run, lo)
	if err != nil {
		return a.loopFailure(err)
	}
	if res == nil {
		return exitOK, "" // handed to the detached process
	}
	return res.ExitCode, res.Detail
}

// errDetachInterrupted is Ctrl-C while the detached process of a run
// starts: it is killed, and the run ends here.
var errDetachInterrupted = errors.New("interrupted; the background loop was not started")

// loopFailure prints why a run ended before its loop and returns the
// exit code and, in a line, the why.
func (a *app) loopFailure(err error) (int, string) {
	var ae *session.ApprovalError
	var changed *session.ChangedSinceApprovalError
	switch {
	case errors.Is(err, errDetachInterrupted):
		a.errorf("%v", err)
		return exitInterrupted, err.Error()
	case errors.As(err, &ae) && ae.Widens && !errors.As(err, &changed):
		why := fmt.Sprintf("apply refused: %v", err)
		a.errorf("%s", why)
		return exitError, why
	}
	return a.failure(err)
}

// loopUI is how a run converging in this process shows its plan and asks
// for approval, as sbx apply does.
type loopUI struct{ a *app }

func (u loopUI) ShowPlan(p *reconcile.Changes) error {
	return reconcile.RenderWidth(u.a.stdout, p, false, u.a.termWidth(u.a.stdout))
}

func (u loopUI) Confirm(p *reconcile.Changes) error { return u.a.confirm("apply") }
func (u loopUI) Warn(err error)                     { u.a.failure(err) }
func (u loopUI) Apply(ctx context.Context, s *session.Session, p *reconcile.Changes, adopt bool) error {
	return u.a.applyPlan(ctx, s, p, adopt)
}

// hiddenVerbs are the in-sandbox helpers of the static binary and the
// detached loop: not listed, not for people.
func hiddenVerbs() map[string]func(ctx context.Context, a *app, args []string) int {
	return map[string]func(ctx context.Context, a *app, args []string) int{
		"__run-group": func(ctx context.Context, a *app, args []string) int {
			return loop.RunGroupMain(args, a.stdin, a.stdout, a.stderr)
		},
		"__kill-group": func(ctx context.Context, a *app, args []string) int {
			return loop.KillGroupMain(args, a.stderr)
		},
		loop.ProgressVerb: func(ctx context.Context, a *app, args []string) int {
			return loop.ProgressMain(ctx, args, a.stdout, a.stderr)
		},
		"__egress-proxy": func(ctx context.Context, a *app, args []string) int {
			return egress.ProxyMain(ctx, args, a.stdin, a.stdout, a.stderr)
		},
		"__egress-bridge": func(ctx context.Context, a *app, args []string) int {
			return egress.BridgeMain(ctx, args, a.stderr)
		},
		egress.TrustVerb: func(ctx context.Context, a *app, args []string) int {
			return egress.TrustMain(args, a.stdin, a.stderr)
		},
		egress.SecretFileVerb: func(ctx context.Context, a *app, args []string) int {
			return egress.SecretFileMain(args, a.stdin, a.stderr)
		},
		egress.HostRelayVerb: func(ctx context.Context, a *app, args []string) int {
			return egress.HostRelayMain(ctx, args, a.stderr)
		},
		egress.ServiceInitVerb: func(ctx context.Context, a *app, args []string) int {
			return egress.ServiceInitMain(ctx, args, a.stderr)
		},
		egress.PortsVerb: func(ctx context.Context, a *app, args []string) int {
			return egress.PortsMain(ctx, args, a.stderr)
		},
		"__sandbox-init": func(ctx context.Context, a *app, args []string) int {
			return egress.InitMain(ctx, args, a.stderr)
		},
		"__complete": completeMain,
		loopDetachedVerb: func(ctx context.Context, a *app, args []string) int {
			o := &loopFlags{}
			runID := ""
			v := &verb{name: loopDetachedVerb, hidden: true, setup: func(fs *pflag.FlagSet) runFunc {
				o.register(fs)
				fs.StringVar(&runID, "run", "", "the run to carry on")
				return func(ctx context.Context, a *app, args []string) int {
					if len(args) > 0 || runID == "" {
						return a.errorf("usage: sbx %s --run RUN [loop flags]", loopDetachedVerb)
					}
					ignoreHangup()
					return a.loopResume(ctx, o, runID)
				}
			}}
			return v.run(ctx, a, args)
		},
	}
}

// loopDetachedVerb is the hidden verb the detached process of `sbx loop
// --detach` runs.
const loopDetachedVerb = "__loop-detached"
