package reconcile

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/sbxhq/sbx/spec"
)

// Recorder keeps last-applied records. Store is the CLI drivers' Recorder;
// a backend that keeps records with the sandbox provides its own.
type Recorder interface {
	Put(r *Record) error
	Delete(driver, name string) error
}

// ApplyOptions are what Apply needs besides the plan.
type ApplyOptions struct {
	// Records receives StepRecord and StepForget.
	Records Recorder
	// Progress, when set, is called before each step (i counts from 1).
	Progress func(i, n int, s Step)
	// Done, when set, is called after each step that succeeded, with the
	// time it took.
	Done func(i, n int, s Step, took time.Duration)
	// Output, when set, receives what a long backend command prints as it
	// runs (a template build, an image pull), for the user to watch; the
	// calls find it with CallOutput.
	Output io.Writer
}

type outputKey struct{}

// CallOutput is where a call streams what a long backend command prints
// (ApplyOptions.Output); nil when nobody watches.
func CallOutput(ctx context.Context) io.Writer {
	w, _ := ctx.Value(outputKey{}).(io.Writer)
	return w
}

// Prepare asks the driver for the backend calls of every step of the plan,
// from the desired sandboxes the plan was made for and what was observed
// (nil for the steps after a create: they meet the sandbox as created),
// and writes them into the steps (Step.Calls), so the plan shows them and
// Apply runs exactly them. A driver that cannot carry out a step says so
// here, before anything runs.
func (p *Changes) Prepare(d Driver, live map[string]*Live) error {
	if d.Name() != p.Driver {
		return fmt.Errorf("plan was made for driver %s, not %s", p.Driver, d.Name())
	}
	p.calls = map[*Step][]Call{}
	for _, c := range p.Sandboxes {
		l := existing(live[c.Sandbox])
		for i := range c.Steps {
			s := &c.Steps[i]
			s.Calls = nil
			if s.Kind == StepRecord || s.Kind == StepForget {
				continue
			}
			sb := p.specs[s.Sandbox]
			if sb == nil && p.Kind != "destroy" {
				return fmt.Errorf("%s: the plan has no sandbox.yaml for it (a saved plan must be rebound first)", s)
			}
			// A remove and the create after it see the sandbox as
			// observed (what a replacement may keep: the kubernetes
			// driver's volume); what follows the create meets the
			// sandbox as just created.
			calls, err := d.Calls(*s, sb, l)
			if s.Kind == StepCreate {
				l = nil
			}
			if err != nil {
				return fmt.Errorf("sandbox %q: %s: %w", s.Sandbox, s, err)
			}
			for _, call := range calls {
				s.Calls = append(s.Calls, call.Desc)
			}
			p.calls[s] = calls
		}
	}
	return nil
}

// StepError is a failed or interrupted step of an apply.
type StepError struct {
	Index, Total int // Index counts from 1
	Step         Step
	// Interrupted is set when the apply was cancelled (Ctrl-C) rather
	// than failed: Err is then the context's error.
	Interrupted bool
	Err         error
}

func (e *StepError) Error() string {
	if e.Interrupted {
		return fmt.Sprintf("interrupted during step %d/%d (%s)", e.Index, e.Total, e.Step)
	}
	return fmt.Sprintf("apply step %d/%d (%s): %v", e.Index, e.Total, e.Step, e.Err)
}

func (e *StepError) Unwrap() error { return e.Err }

// Apply runs the calls Prepare put in the plan's steps, in order, and
// decides nothing. The first failing step stops it with a *StepError
// (`apply step 3/6 (create sandbox "api"): cause`). The record is written
// only by a StepRecord, after every other step of its sandbox succeeded, so
// an interrupted or failed apply leaves the previous record and the next
// plan redoes the work. Afterwards the caller observes again, plans again
// and checks Converged.
func Apply(ctx context.Context, d Driver, p *Changes, opts ApplyOptions) error {
	if err := p.Err(); err != nil {
		return fmt.Errorf("plan has errors: %w", err)
	}
	if d.Name() != p.Driver {
		return fmt.Errorf("plan was made for driver %s, not %s", p.Driver, d.Name())
	}
	if p.calls == nil {
		return errors.New("the plan was not prepared: its backend calls are unknown")
	}
	var steps []*Step
	for _, c := range p.Sandboxes {
		for i := range c.Steps {
			steps = append(steps, &c.Steps[i])
		}
	}
	if opts.Output != nil {
		ctx = context.WithValue(ctx, outputKey{}, opts.Output)
	}
	for i, s := range steps {
		fail := func(err error) error {
			if ctx.Err() != nil {
				return &StepError{Index: i + 1, Total: len(steps), Step: *s, Interrupted: true, Err: ctx.Err()}
			}
			return &StepError{Index: i + 1, Total: len(steps), Step: *s, Err: err}
		}
		if err := ctx.Err(); err != nil {
			return fail(err)
		}
		if opts.Progress != nil {
			opts.Progress(i+1, len(steps), *s)
		}
		start := time.Now()
		if err := runStep(ctx, p, opts, s); err != nil {
			return fail(err)
		}
		if opts.Done != nil {
			opts.Done(i+1, len(steps), *s, time.Since(start))
		}
	}
	return nil
}

func runStep(ctx context.Context, p *Changes, opts ApplyOptions, s *Step) error {
	switch s.Kind {
	case StepRecord:
		if opts.Records == nil {
			return errors.New("no record store")
		}
		if s.Record == nil {
			return errors.New("the step has no record")
		}
		return opts.Records.Put(s.Record)
	case StepForget:
		if opts.Records == nil {
			return errors.New("no record store")
		}
		return opts.Records.Delete(p.Driver, s.Sandbox)
	}
	for _, c := range p.calls[s] {
		if err := c.Run(ctx); err != nil {
			return err
		}
	}
	return nil
}

// Converged checks the plan made after an apply: it must be empty.
func Converged(after *Changes) error {
	var problems []string
	problems = append(problems, after.Errors...)
	for _, c := range after.Sandboxes {
		if c.Action == ActionNoOp {
			continue
		}
		var ds []string
		for _, d := range c.Changes {
			ds = append(ds, d.String())
		}
		msg := fmt.Sprintf("sandbox %q still needs %s", c.Sandbox, c.Action)
		if len(ds) > 0 {
			msg += " (" + strings.Join(ds, "; ") + ")"
		}
		problems = append(problems, msg)
	}
	if len(problems) == 0 {
		return nil
	}
	return errors.New("did not converge: " + strings.Join(problems, "; "))
}

// Save writes the plan so `sbx apply FILE` can apply exactly it: the JSON
// document of WriteJSON, which carries digests of what the plan was made
// from.
func (p *Changes) Save(w io.Writer) error { return WriteJSON(w, p) }

// LoadPlan reads a saved plan. Before Apply, the caller observes again and
// calls Rebind.
func LoadPlan(r io.Reader) (*Changes, error) {
	var p Changes
	dec := json.NewDecoder(r)
	if err := dec.Decode(&p); err != nil {
		return nil, fmt.Errorf("read saved plan: %w", err)
	}
	if p.FormatVersion != FormatVersion {
		return nil, fmt.Errorf("saved plan has format version %q; this sbx reads %q", p.FormatVersion, FormatVersion)
	}
	if p.Errors == nil {
		p.Errors = []string{}
	}
	return &p, nil
}

// Adopts reports whether the plan takes over a sandbox sbx did not create
// (it was made with --adopt).
func (p *Changes) Adopts() bool {
	for _, c := range p.Sandboxes {
		if c.Adopt {
			return true
		}
	}
	return false
}

// Matches checks that a saved plan is exactly fresh, the plan made now
// from the same files and live state: a saved plan is applied as it is,
// so one edited since it was made must not run.
func (p *Changes) Matches(fresh *Changes) error {
	var a, b bytes.Buffer
	if err := WriteJSON(&a, p); err != nil {
		return err
	}
	if err := WriteJSON(&b, fresh); err != nil {
		return err
	}
	if !bytes.Equal(a.Bytes(), b.Bytes()) {
		return errors.New("the saved plan is not what sbx plans now from the same files and live state (was it edited?); make a new plan")
	}
	return nil
}

// Rebind checks that a saved plan still describes the world, then attaches
// the resolved sandbox.yaml so Apply can run it. desired, live and records
// are observed afresh; if the live state or the file moved since the plan
// was made, the plan is stale and must be made again.
func (p *Changes) Rebind(desired []Desired, live map[string]*Live, records map[string]*Record) error {
	p.digest()
	var names []string
	for _, c := range p.Sandboxes {
		names = append(names, c.Sandbox)
	}
	if p.Kind == "destroy" {
		desired = nil
	}
	if observedDigest(names, live, records) != p.Observed {
		return errors.New("saved plan is stale: the live sandbox changed since the plan was made")
	}
	if desiredDigest(p.Driver, desired) != p.Desired {
		return errors.New("saved plan is stale: sandbox.yaml changed since the plan was made")
	}
	p.specs = map[string]*spec.Spec{}
	for _, d := range desired {
		p.specs[d.Spec.Name] = d.Spec
	}
	return nil
}
