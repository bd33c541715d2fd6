package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/sbxhq/sbx/driver"
	"github.com/sbxhq/sbx/driver/cliutil"
	"github.com/sbxhq/sbx/egress"
	"github.com/sbxhq/sbx/loop"
	"github.com/sbxhq/sbx/reconcile"
	"github.com/sbxhq/sbx/session"
	"github.com/sbxhq/sbx/spec"
)

func loopVerb() *verb {
	return &verb{
		name:    "loop",
		summary: "run the agent loop inside the converged sandbox; status, hint, stop",
		usage:   "[flags] | status [--json] | hint TEXT | stop",
		help: `sbx loop converges the sandbox (showing the plan and applying it with the
usual approval rules), then runs iterations of the file's loop section: the
prompt, any hints, and a header go to the agent's non-interactive command on
stdin, until the completion checks pass or a bound stops it.

From another terminal:
  sbx loop status [--json]   run id, iteration, elapsed, last outcome, breaker, completion
  sbx loop hint "TEXT"       add TEXT to the next iteration's prompt
  sbx loop stop              kill the agent inside the sandbox and end the run

Exit status: 0 completed, 1 error, 3 max iterations reached, 4 breaker
tripped, 5 maxDuration spent, 130 interrupted (Ctrl-C or sbx loop stop).`,
		setup: func(fs *pflag.FlagSet) runFunc {
			t := &target{}
			t.register(fs)
			t.registerLock(fs)
			maxIter := fs.Int("max-iterations", 0, "override loop.maxIterations (must be > 0)")
			ap := &approval{}
			ap.register(fs)
			ephemeral := fs.Bool("ephemeral", false, "create the sandbox for this run and destroy it at the end, even on failure (with kubernetes.warmPool: claim a warm sandbox and give it back)")
			asJSON := fs.Bool("json", false, "with status: print as JSON")
			fs.SetInterspersed(true)
			return func(ctx context.Context, a *app, args []string) int {
				if len(args) > 0 {
					switch args[0] {
					case "status":
						return a.loopStatus(t, *asJSON, args[1:])
					case "hint":
						return a.loopHint(t, args[1:])
					case "stop":
						return a.loopStop(t, args[1:])
					}
					return a.errorf("loop: unknown subcommand %q (loop takes status, hint or stop)", args[0])
				}
				if fs.Changed("max-iterations") && *maxIter <= 0 {
					return a.errorf("--max-iterations must be greater than 0")
				}
				return a.loopRun(ctx, t, *maxIter, ap, *ephemeral)
			}
		},
	}
}

// loopControl finds the loop directory of the one declared sandbox
// without touching the backend.
func (a *app) loopControl(t *target) (*loop.Control, *spec.Spec, error) {
	res, err := session.Load(session.Options{Files: t.files, NoLocal: t.noLocal, Offline: true}, a.lookupEnv)
	if err != nil {
		return nil, nil, err
	}
	if len(res.Specs) != 1 {
		return nil, nil, fmt.Errorf("the files declare %d sandboxes; name one with -f", len(res.Specs))
	}
	dir, err := a.stateDir()
	if err != nil {
		return nil, nil, err
	}
	return loop.NewControl(dir, res.Specs[0].Name), res.Specs[0], nil
}

func (a *app) loopStatus(t *target, asJSON bool, args []string) int {
	if len(args) > 0 {
		return a.errorf("loop status takes no arguments")
	}
	c, _, err := a.loopControl(t)
	if err != nil {
		return a.fail(err)
	}
	s, err := c.ReadStatus()
	if err != nil {
		return a.errorf("%v", err)
	}
	if asJSON {
		return a.writeJSON(s)
	}
	fmt.Fprintf(a.stdout, "run %s of sandbox %q: %s\n", s.RunID, s.Sandbox, s.State)
	if s.Detail != "" {
		fmt.Fprintf(a.stdout, "  %s\n", s.Detail)
	}
	fmt.Fprintf(a.stdout, "  iteration %d of %d, elapsed %s\n", s.Iteration, s.MaxIterations, (time.Duration(s.ElapsedMS) * time.Millisecond).Round(time.Second))
	if o := s.LastOutcome; o != nil {
		fmt.Fprintf(a.stdout, "  last iteration: exit %d in %s, promise seen: %v, progressed: %v, %d commit(s)\n",
			o.ExitStatus, (time.Duration(o.DurationMS) * time.Millisecond).Round(time.Millisecond), o.PromiseSeen, o.Progressed, o.Commits)
	}
	fmt.Fprintf(a.stdout, "  breaker: no progress %d/%d, same failure %d/%d\n", s.Breaker.NoProgress, s.Breaker.NoProgressLimit, s.Breaker.SameError, s.Breaker.SameErrorLimit)
	if len(s.Denials) > 0 {
		fmt.Fprintf(a.stdout, "  egress denials per iteration: %v\n", s.Denials)
	}
	fmt.Fprintf(a.stdout, "  logs: %s\n", s.RunDir)
	return exitOK
}

func (a *app) loopHint(t *target, args []string) int {
	if len(args) == 0 {
		return a.errorf("loop hint needs the text of the hint")
	}
	c, sp, err := a.loopControl(t)
	if err != nil {
		return a.fail(err)
	}
	if err := c.AddHint(strings.Join(args, " ")); err != nil {
		return a.errorf("%v", err)
	}
	fmt.Fprintf(a.stdout, "hint queued for the next iteration of sandbox %q\n", sp.Name)
	return exitOK
}

func (a *app) loopStop(t *target, args []string) int {
	if len(args) > 0 {
		return a.errorf("loop stop takes no arguments")
	}
	c, _, err := a.loopControl(t)
	if err != nil {
		return a.fail(err)
	}
	s, err := c.Stop(2 * time.Second)
	if err != nil {
		return a.errorf("%v", err)
	}
	fmt.Fprintf(a.stdout, "stopped run %s of sandbox %q after %d iteration(s)\n", s.RunID, s.Sandbox, s.Iteration)
	return exitOK
}

func (a *app) loopRun(ctx context.Context, t *target, maxIter int, ap *approval, ephemeral bool) int {
	s, err := a.open(ctx, t, "sbx loop")
	if err != nil {
		return a.fail(err)
	}
	defer s.Release()
	if len(s.Specs) != 1 {
		return a.errorf("the files declare %d sandboxes; name one with -f", len(s.Specs))
	}
	sp := s.Specs[0]
	if sp.Loop == nil {
		return a.errorf("sandbox %q has no loop section in %s", sp.Name, sp.Files[0])
	}
	l := *sp.Loop
	if maxIter > 0 {
		l.MaxIterations = maxIter
	}
	ephemeral = ephemeral || l.Ephemeral
	// A sandbox with a warm pool (kubernetes.warmPool) runs an ephemeral
	// loop in a sandbox claimed from the pool, which sbx apply made.
	cl, pooled := s.Backend.(driver.Claimer)
	pooled = pooled && ephemeral && cl.Pooled(sp)
	if pooled {
		ephemeral = false
	}
	if ephemeral {
		if lv := s.Live[sp.Name]; lv != nil && lv.Exists {
			return a.errorf("sandbox %q already exists; --ephemeral creates its own for the run and destroys it after (run 'sbx destroy' first, or drop --ephemeral)", sp.Name)
		}
		defer func() {
			if code := a.destroyEphemeral(s); code != exitOK {
				fmt.Fprintf(a.stderr, "sbx: the ephemeral sandbox %q may be left behind; remove it with 'sbx destroy -y'\n", sp.Name)
			}
		}()
	}
	p, err := s.Plan(t.adopt)
	if err != nil {
		return a.fail(err)
	}
	if err := p.Err(); err != nil {
		return a.errorf("%v", err)
	}
	if pooled {
		if !p.Empty() {
			return a.errorf("sandbox %q has a warm pool, made by 'sbx apply' from the files, and the files differ from what was applied: run 'sbx apply', then the ephemeral loop", sp.Name)
		}
		release, err := cl.Claim(ctx, sp, a.stderr)
		if err != nil {
			return a.errorf("claiming a warm sandbox: %v", err)
		}
		defer func() {
			ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Minute)
			defer cancel()
			if err := release(ctx); err != nil {
				a.errorf("giving the warm sandbox back: %v", err)
			}
		}()
	}
	if !p.Empty() {
		if err := reconcile.Render(a.stdout, p, a.color(a.stdout)); err != nil {
			return a.errorf("%v", err)
		}
		if code, ok := a.approve(p, ap, "apply"); !ok {
			return code
		}
		if code := a.execute(ctx, s, p, t.adopt); code != exitOK {
			return code
		}
	}
	secrets, err := s.Secrets(ctx, sp)
	if err != nil {
		return a.errorf("%v", err)
	}
	ex, ok := s.Backend.(driver.Execer)
	if !ok {
		return a.errorf("the %s driver cannot run commands in a sandbox", s.Backend.Name())
	}
	dir, err := a.stateDir()
	if err != nil {
		return a.errorf("%v", err)
	}
	var redact []string
	for _, v := range secrets {
		redact = append(redact, v)
	}
	cfg := loop.Config{
		Sandbox: sp.Name, Agent: sp.Agent, Workspace: sp.Workspace.Path, Loop: l,
		Env: s.ExecEnv(sp, secrets), Redact: redact,
		Exec: execFunc(func(ctx context.Context, argv []string, o cliutil.ExecOptions) (int, error) {
			return ex.Exec(ctx, sp.Name, argv, o)
		}),
		Control: loop.NewControl(dir, sp.Name),
		Stdout:  a.stdout, Stderr: a.stderr,
	}
	if h, ok := s.Backend.(driver.Helper); ok {
		cfg.Group = loop.HelperGrouper{Binary: h.SandboxHelper()}
	}
	if dc, ok := s.Backend.(driver.DenialCounter); ok {
		cfg.Denials = denialFunc(func(ctx context.Context, since, until time.Time) (int, error) {
			return dc.Denials(ctx, sp.Name, since, until)
		})
	}
	res := loop.Run(ctx, cfg)
	fmt.Fprintf(a.stderr, "sbx loop: %s: %s (exit %d; records in %s)\n", res.State, res.Detail, res.ExitCode, res.RunDir)
	return res.ExitCode
}

// destroyEphemeral removes the run's sandbox whatever happened.
func (a *app) destroyEphemeral(s *session.Session) int {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := s.Observe(ctx); err != nil {
		return a.errorf("ephemeral sandbox: %v", err)
	}
	p, err := s.PlanDestroy(false)
	if err != nil {
		return a.errorf("ephemeral sandbox: %v", err)
	}
	if p.Empty() {
		return exitOK
	}
	fmt.Fprintf(a.stderr, "sbx loop: destroying the ephemeral sandbox\n")
	return a.execute(ctx, s, p, false)
}

type execFunc func(ctx context.Context, argv []string, o cliutil.ExecOptions) (int, error)

func (f execFunc) Exec(ctx context.Context, argv []string, o cliutil.ExecOptions) (int, error) {
	return f(ctx, argv, o)
}

type denialFunc func(ctx context.Context, since, until time.Time) (int, error)

func (f denialFunc) Denials(ctx context.Context, since, until time.Time) (int, error) {
	return f(ctx, since, until)
}

// hiddenVerbs are the in-sandbox helpers of the static binary: not listed,
// not for people.
func hiddenVerbs() map[string]func(ctx context.Context, a *app, args []string) int {
	return map[string]func(ctx context.Context, a *app, args []string) int{
		"__run-group": func(ctx context.Context, a *app, args []string) int {
			return loop.RunGroupMain(args, a.stdin, a.stdout, a.stderr)
		},
		"__kill-group": func(ctx context.Context, a *app, args []string) int {
			return loop.KillGroupMain(args, a.stderr)
		},
		"__egress-proxy": func(ctx context.Context, a *app, args []string) int {
			return egress.ProxyMain(ctx, args, a.stdin, a.stdout, a.stderr)
		},
		"__egress-bridge": func(ctx context.Context, a *app, args []string) int {
			return egress.BridgeMain(ctx, args, a.stderr)
		},
		"__sandbox-init": func(ctx context.Context, a *app, args []string) int {
			return egress.InitMain(ctx, args, a.stderr)
		},
	}
}
