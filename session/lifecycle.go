package session

import (
	"context"
	"fmt"
	"strings"

	"github.com/sbxhq/sbx/reconcile"
	"github.com/sbxhq/sbx/spec"
)

// StoppedError is a verb that runs in a sandbox (shell, netlog --follow)
// finding it stopped on a backend that does not start it for an exec.
type StoppedError struct {
	Sandbox, Status string
}

func (e *StoppedError) Error() string {
	return fmt.Sprintf("sandbox %q is stopped (%s); start it with 'sbx start' (or 'sbx apply')", e.Sandbox, e.Status)
}

// Runnable checks that a command can run in a declared sandbox now: it
// exists, and is not stopped where the backend needs sbx to start it
// (FieldStatus not Ignored: Docker's sbx and the plugin run an exec in a
// stopped sandbox themselves).
func (s *Session) Runnable(sp *spec.Spec) error {
	l := s.Live[sp.Name]
	if l == nil || !l.Exists {
		return &NotCreatedError{Sandbox: sp.Name}
	}
	if err := s.Foreign(sp); err != nil {
		return err
	}
	if l.Stopped && s.Backend.Caps().Of(reconcile.FieldStatus).Mode != reconcile.Ignored {
		return &StoppedError{Sandbox: sp.Name, Status: l.Status}
	}
	return nil
}

// Lifecycle is what sbx stop or sbx start does to one declared sandbox:
// the step and its backend calls, or why nothing is to be done.
type Lifecycle struct {
	Sandbox string
	// Skip says why the sandbox is left as it is ("already stopped");
	// empty when Step runs.
	Skip string
	Step reconcile.Step
	// Calls are Step's backend calls, as the plan would show them.
	Calls []reconcile.Call
}

// Lifecycle decides what stopping (reconcile.StepStop) or starting
// (reconcile.StepStart) the declared sandboxes takes: each must exist and
// be sbx's; the driver's calls for the step (the same a plan shows) are
// asked before anything runs, so a backend that cannot do it says so
// first.
func (s *Session) Lifecycle(kind reconcile.StepKind) ([]*Lifecycle, error) {
	verb := map[reconcile.StepKind]string{reconcile.StepStop: "sbx stop", reconcile.StepStart: "sbx start"}[kind]
	if verb == "" {
		return nil, fmt.Errorf("no lifecycle verb for step %s", kind)
	}
	var out []*Lifecycle
	for _, sp := range s.Specs {
		l := s.Live[sp.Name]
		if l == nil || !l.Exists {
			return nil, &NotCreatedError{Sandbox: sp.Name}
		}
		if s.Records[sp.Name] == nil && !l.Managed {
			return nil, fmt.Errorf("sandbox %q exists but was not created by sbx; %s leaves it alone", sp.Name, verb)
		}
		if err := s.Foreign(sp); err != nil {
			return nil, err
		}
		lc := &Lifecycle{Sandbox: sp.Name, Step: reconcile.Step{Kind: kind, Sandbox: sp.Name, Reason: verb}}
		switch {
		case kind == reconcile.StepStop && l.Stopped && !strings.HasPrefix(l.Status, "running"):
			lc.Skip = "already stopped (" + l.Status + ")"
		case kind == reconcile.StepStart && !l.Stopped:
			lc.Skip = "already running"
		default:
			calls, err := s.Backend.Calls(lc.Step, sp, l)
			if err != nil {
				return nil, fmt.Errorf("sandbox %q: %v", sp.Name, err)
			}
			lc.Calls = calls
			for _, c := range calls {
				lc.Step.Calls = append(lc.Step.Calls, c.Desc)
			}
		}
		out = append(out, lc)
	}
	return out, nil
}

// RunLifecycle runs the calls Lifecycle decided, in order, then observes
// again and checks that each sandbox is now as asked. before, when set, is
// called before each call.
func (s *Session) RunLifecycle(ctx context.Context, lcs []*Lifecycle, before func(lc *Lifecycle, c reconcile.Call)) error {
	for _, lc := range lcs {
		for _, c := range lc.Calls {
			if before != nil {
				before(lc, c)
			}
			if err := c.Run(ctx); err != nil {
				return fmt.Errorf("%s: %w", lc.Step, err)
			}
		}
	}
	if err := s.Observe(ctx); err != nil {
		return fmt.Errorf("after %s: %w", lcs[0].Step.Reason, err)
	}
	var problems []string
	for _, lc := range lcs {
		l := s.Live[lc.Sandbox]
		switch {
		case l == nil || !l.Exists:
			problems = append(problems, fmt.Sprintf("sandbox %q is gone", lc.Sandbox))
		case lc.Step.Kind == reconcile.StepStop && !l.Stopped:
			problems = append(problems, fmt.Sprintf("sandbox %q is still %s", lc.Sandbox, l.Status))
		case lc.Step.Kind == reconcile.StepStop && strings.HasPrefix(l.Status, "running"):
			problems = append(problems, fmt.Sprintf("sandbox %q is still %s", lc.Sandbox, l.Status))
		case lc.Step.Kind == reconcile.StepStart && l.Stopped:
			problems = append(problems, fmt.Sprintf("sandbox %q is still %s", lc.Sandbox, l.Status))
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("%s did not take effect: %s", lcs[0].Step.Reason, strings.Join(problems, "; "))
	}
	return nil
}

// StatusDeclared reports whether the backend treats a stopped sandbox as a
// difference from sandbox.yaml (plan shows it, apply starts it).
func (s *Session) StatusDeclared() bool {
	return s.Backend.Caps().Of(reconcile.FieldStatus).Mode == reconcile.InPlace
}
