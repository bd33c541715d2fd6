package reconcile

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sbxhq/sbx/internal/golden"
	"github.com/sbxhq/sbx/spec"
	"github.com/sbxhq/sbx/state"
)

// fakeDriver simulates a backend in memory: Do changes what Observe reports.
type fakeDriver struct {
	caps   Caps
	live   map[string]*Live
	calls  []string
	failAt StepKind // a step kind that fails once
	failed bool
	// lazy makes set-network do nothing, a backend bug apply must catch.
	lazy bool
}

func (f *fakeDriver) Name() string { return f.caps.Driver }
func (f *fakeDriver) Caps() Caps   { return f.caps }

func (f *fakeDriver) Observe(ctx context.Context, names []string) (map[string]*Live, error) {
	out := map[string]*Live{}
	for _, n := range names {
		if l, ok := f.live[n]; ok {
			c := *l
			c.Network.Allow = append([]string(nil), l.Network.Allow...)
			out[n] = &c
		}
	}
	return out, nil
}

// Calls is one call per step, which changes the fake's live state.
func (f *fakeDriver) Calls(s Step, sb *spec.Spec, live *Live) ([]Call, error) {
	return []Call{{Desc: "fake " + s.String(), Run: func(ctx context.Context) error { return f.do(s, sb) }}}, nil
}

func (f *fakeDriver) do(s Step, sb *spec.Spec) error {
	f.calls = append(f.calls, s.Kind.String())
	if s.Kind == f.failAt && !f.failed {
		f.failed = true
		return errors.New("backend said no")
	}
	switch s.Kind {
	case StepStop:
		f.live[s.Sandbox].Status = "stopped"
	case StepRemove:
		delete(f.live, s.Sandbox)
	case StepCreate:
		l := liveOf(sb, sbxCaps())
		l.Network = LiveNetwork{}
		f.live[s.Sandbox] = l
	case StepSetNetwork:
		if f.lazy {
			return nil
		}
		n := &f.live[s.Sandbox].Network
		if s.Network.Policy != "" {
			n.Policy = s.Network.Policy
		}
		n.Allow = applyDelta(n.Allow, s.Network.AllowAdd, s.Network.AllowRemove)
		n.Deny = applyDelta(n.Deny, s.Network.DenyAdd, s.Network.DenyRemove)
	}
	return nil
}

func applyDelta(vs, add, remove []string) []string {
	var out []string
	for _, v := range vs {
		if !contains(remove, v) {
			out = append(out, v)
		}
	}
	return append(out, add...)
}

// world plans against the fake driver and the store.
func plan(t *testing.T, f *fakeDriver, st *Store, sb *spec.Spec) *Changes {
	t.Helper()
	live, err := f.Observe(context.Background(), []string{sb.Name})
	if err != nil {
		t.Fatal(err)
	}
	recs, err := st.Records(f.caps.Driver, []string{sb.Name})
	if err != nil {
		t.Fatal(err)
	}
	p := Plan([]Desired{desiredOf(t, sb)}, live, recs, f.caps, Options{})
	if err := p.Prepare(f, live); err != nil {
		t.Fatal(err)
	}
	return p
}

func applyOpts(st *Store) ApplyOptions {
	return ApplyOptions{Records: st}
}

func TestApplyRunsStepsInOrderAndConverges(t *testing.T) {
	f := &fakeDriver{caps: sbxCaps(), live: map[string]*Live{}}
	st, _ := OpenStore(state.Dir(t.TempDir()))
	sb := baseSpec()
	p := plan(t, f, st, sb)
	var progress []string
	opts := applyOpts(st)
	opts.Progress = func(i, n int, s Step) { progress = append(progress, fmt.Sprintf("%d/%d %s", i, n, s)) }
	if err := Apply(context.Background(), f, p, opts); err != nil {
		t.Fatal(err)
	}
	want := []string{
		`1/4 create sandbox "api"`, `2/4 update network rules of sandbox "api"`,
		`3/4 verify sandbox "api"`, `4/4 record sandbox "api"`,
	}
	if diff := cmp.Diff(want, progress); diff != "" {
		t.Errorf("steps (-want +got):\n%s", diff)
	}
	if err := Converged(plan(t, f, st, sb)); err != nil {
		t.Fatal(err)
	}

	// An env change replaces the sandbox, in the documented order.
	sb.Env["NODE_ENV"] = "production"
	f.calls = nil
	if err := Apply(context.Background(), f, plan(t, f, st, sb), applyOpts(st)); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"stop", "remove", "create", "set-network", "verify"}, f.calls); diff != "" {
		t.Errorf("driver calls (-want +got):\n%s", diff)
	}
	if err := Converged(plan(t, f, st, sb)); err != nil {
		t.Fatal(err)
	}
}

func TestApplyFailureNamesStepAndRerunConverges(t *testing.T) {
	kinds := []StepKind{StepStop, StepRemove, StepCreate, StepSetNetwork, StepVerify}
	for i, kind := range kinds {
		t.Run(kind.String(), func(t *testing.T) {
			st, _ := OpenStore(state.Dir(t.TempDir()))
			applied := baseSpec()
			f := &fakeDriver{caps: sbxCaps(), live: map[string]*Live{"api": liveOf(applied, sbxCaps())}}
			if err := st.Put(recordOf(t, f.caps, applied)); err != nil {
				t.Fatal(err)
			}
			sb := baseSpec()
			sb.Env["NODE_ENV"] = "production"
			f.failAt = kind
			err := Apply(context.Background(), f, plan(t, f, st, sb), applyOpts(st))
			wantErr := fmt.Sprintf("apply step %d/6 (%s): backend said no", i+1, Step{Kind: kind, Sandbox: "api"})
			if err == nil || err.Error() != wantErr {
				t.Fatalf("got error %v, want %q", err, wantErr)
			}
			// The record still describes the old sandbox: the next plan redoes the work.
			p := plan(t, f, st, sb)
			if p.Empty() {
				t.Fatal("plan after a failed apply is empty; the failure would be forgotten")
			}
			if err := Apply(context.Background(), f, p, applyOpts(st)); err != nil {
				t.Fatalf("rerun: %v", err)
			}
			if err := Converged(plan(t, f, st, sb)); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestApplyDidNotConverge(t *testing.T) {
	st, _ := OpenStore(state.Dir(t.TempDir()))
	applied := baseSpec()
	f := &fakeDriver{caps: sbxCaps(), live: map[string]*Live{"api": liveOf(applied, sbxCaps())}, lazy: true}
	if err := st.Put(recordOf(t, f.caps, applied)); err != nil {
		t.Fatal(err)
	}
	sb := baseSpec()
	sb.Network.Allow = append(sb.Network.Allow, "registry.npmjs.org")
	if err := Apply(context.Background(), f, plan(t, f, st, sb), applyOpts(st)); err != nil {
		t.Fatal(err)
	}
	err := Converged(plan(t, f, st, sb))
	want := `did not converge: sandbox "api" still needs update (+ network.allow: "registry.npmjs.org")`
	if err == nil || err.Error() != want {
		t.Fatalf("got %v, want %q", err, want)
	}
}

func TestApplyRefusesPlanWithErrors(t *testing.T) {
	f := &fakeDriver{caps: sbxCaps(), live: map[string]*Live{"api": liveOf(baseSpec(), sbxCaps())}}
	st, _ := OpenStore(state.Dir(t.TempDir()))
	p := plan(t, f, st, baseSpec())
	err := Apply(context.Background(), f, p, applyOpts(st))
	if err == nil || !strings.Contains(err.Error(), "use --adopt") {
		t.Fatalf("got %v", err)
	}
	if len(f.calls) != 0 {
		t.Fatalf("driver called: %v", f.calls)
	}
}

func TestSavedPlan(t *testing.T) {
	st, _ := OpenStore(state.Dir(t.TempDir()))
	applied := baseSpec()
	f := &fakeDriver{caps: sbxCaps(), live: map[string]*Live{"api": liveOf(applied, sbxCaps())}}
	if err := st.Put(recordOf(t, f.caps, applied)); err != nil {
		t.Fatal(err)
	}
	sb := baseSpec()
	sb.Network.Allow = append(sb.Network.Allow, "registry.npmjs.org")
	var buf bytes.Buffer
	if err := plan(t, f, st, sb).Save(&buf); err != nil {
		t.Fatal(err)
	}
	saved := buf.String()
	assertNoSecrets(t, saved)
	observe := func() (map[string]*Live, map[string]*Record) {
		live, _ := f.Observe(context.Background(), []string{"api"})
		recs, _ := st.Records("sbx", []string{"api"})
		return live, recs
	}

	tests := []struct {
		name    string
		change  func(sb *spec.Spec)
		wantErr string
	}{
		{"live moved", func(*spec.Spec) { f.live["api"].Network.Allow = append(f.live["api"].Network.Allow, "x.example") },
			"saved plan is stale: the live sandbox changed since the plan was made"},
		{"file moved", func(sb *spec.Spec) { sb.Env["NODE_ENV"] = "test" },
			"saved plan is stale: sandbox.yaml changed since the plan was made"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			keep := *f.live["api"]
			defer func() { f.live["api"] = &keep }()
			f.live["api"] = liveOf(applied, sbxCaps())
			sb2 := baseSpec()
			sb2.Network.Allow = append(sb2.Network.Allow, "registry.npmjs.org")
			tc.change(sb2)
			p, err := LoadPlan(strings.NewReader(saved))
			if err != nil {
				t.Fatal(err)
			}
			live, recs := observe()
			err = p.Rebind([]Desired{desiredOf(t, sb2)}, live, recs)
			if err == nil || err.Error() != tc.wantErr {
				t.Fatalf("got %v, want %q", err, tc.wantErr)
			}
		})
	}

	t.Run("fresh", func(t *testing.T) {
		p, err := LoadPlan(strings.NewReader(saved))
		if err != nil {
			t.Fatal(err)
		}
		live, recs := observe()
		if err := p.Rebind([]Desired{desiredOf(t, sb)}, live, recs); err != nil {
			t.Fatal(err)
		}
		fresh := Plan([]Desired{desiredOf(t, sb)}, live, recs, f.caps, Options{})
		if err := fresh.Prepare(f, live); err != nil {
			t.Fatal(err)
		}
		if err := p.Matches(fresh); err != nil {
			t.Fatal(err)
		}
		if err := p.Prepare(f, live); err != nil {
			t.Fatal(err)
		}
		if err := Apply(context.Background(), f, p, applyOpts(st)); err != nil {
			t.Fatal(err)
		}
		if err := Converged(plan(t, f, st, sb)); err != nil {
			t.Fatal(err)
		}
	})
}

func TestPlanJSON(t *testing.T) {
	applied := baseSpec()
	sb := baseSpec()
	sb.Env["NODE_ENV"] = "production"
	sb.Env["DATABASE_URL"] = "postgresql://prod-db/app"
	sb.Network.Allow = append(sb.Network.Allow, "registry.npmjs.org")
	p := Plan([]Desired{desiredOf(t, sb)}, map[string]*Live{"api": liveOf(applied, sbxCaps())},
		map[string]*Record{"api": recordOf(t, sbxCaps(), applied)}, sbxCaps(), Options{DriverVersion: "0.53.0"})
	var buf bytes.Buffer
	if err := WriteJSON(&buf, p); err != nil {
		t.Fatal(err)
	}
	assertNoSecrets(t, buf.String())
	golden.Check(t, filepath.Join("testdata", "plan_json.golden"), buf.Bytes())
}

func TestPlanDestroy(t *testing.T) {
	rec := recordOf(t, sbxCaps(), baseSpec())
	tests := []struct {
		name    string
		live    map[string]*Live
		records map[string]*Record
		adopt   bool
		want    string
	}{
		{"managed", map[string]*Live{"api": liveOf(baseSpec(), sbxCaps())}, map[string]*Record{"api": rec}, false,
			"sbx will perform the following actions (driver: sbx):\n\n  # sandbox \"api\" will be destroyed\n  - sandbox \"api\"\n    " + destroyNote + "\n\nPlan: 0 to create, 0 to update, 0 to replace, 1 to destroy.\n"},
		{"absent", nil, nil, false, "No changes. Sandbox \"api\" does not exist.\n"},
		{"unmanaged", map[string]*Live{"api": liveOf(baseSpec(), sbxCaps())}, nil, false,
			"Error: sandbox \"api\" exists but was not created by sbx; use --adopt to manage it\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := PlanDestroy([]string{"api"}, tc.live, tc.records, sbxCaps(), Options{Adopt: tc.adopt})
			var buf bytes.Buffer
			if err := Render(&buf, p, false); err != nil {
				buf.WriteString("Error: " + err.Error() + "\n")
			}
			if diff := cmp.Diff(tc.want, buf.String()); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestRenderColour(t *testing.T) {
	p := Plan([]Desired{desiredOf(t, baseSpec())}, nil, nil, sbxCaps(), Options{})
	var plain, colour bytes.Buffer
	Render(&plain, p, false)
	Render(&colour, p, true)
	if strings.Contains(plain.String(), "\x1b[") {
		t.Error("plain output has escape codes")
	}
	if !strings.Contains(colour.String(), ansiGreen+"+"+ansiReset) {
		t.Errorf("coloured output lacks a green +:\n%q", colour.String())
	}
}
