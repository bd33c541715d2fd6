package session

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sbxhq/sbx/driver"
	"github.com/sbxhq/sbx/reconcile"
	"github.com/sbxhq/sbx/spec"
)

// stubBackend is a backend whose calls are named after the step, for
// tests of what a session decides from what it observed; it runs nothing.
type stubBackend struct {
	status reconcile.Mode // FieldStatus's mode
}

func (b stubBackend) Name() string { return "stub" }
func (b stubBackend) Caps() reconcile.Caps {
	return reconcile.Caps{Driver: "stub", Fields: map[reconcile.Field]reconcile.Cap{reconcile.FieldStatus: {Mode: b.status}}}
}
func (b stubBackend) Observe(context.Context, []string) (map[string]*reconcile.Live, error) {
	return nil, errors.New("stub observes nothing")
}
func (b stubBackend) Calls(s reconcile.Step, sb *spec.Spec, live *reconcile.Live) ([]reconcile.Call, error) {
	return []reconcile.Call{{Desc: fmt.Sprintf("stub %s %s", s.Kind, s.Sandbox)}}, nil
}
func (b stubBackend) Identify(context.Context) (driver.Identity, error) {
	return driver.Identity{}, nil
}
func (b stubBackend) Use(driver.Identity)                  {}
func (b stubBackend) Executable() string                   { return "stub" }
func (b stubBackend) BuildHash(*spec.Spec) (string, error) { return "", nil }

var _ driver.Backend = stubBackend{}

// TestLifecycle: what sbx stop and sbx start decide for a sandbox from
// what was observed: only sbx's own sandboxes are touched, one already as
// asked is left alone and says so, and the calls are the driver's.
func TestLifecycle(t *testing.T) {
	running := &reconcile.Live{Exists: true, Managed: true, Status: "running"}
	exited := &reconcile.Live{Exists: true, Managed: true, Stopped: true, Status: "exited"}
	foreign := &reconcile.Live{Exists: true, Status: "running"}
	for _, tc := range []struct {
		name    string
		kind    reconcile.StepKind
		live    *reconcile.Live
		record  bool
		skip    string
		calls   []string
		wantErr string
	}{
		{name: "stop a running sandbox", kind: reconcile.StepStop, live: running, calls: []string{"stub stop api"}},
		{name: "stop a stopped one", kind: reconcile.StepStop, live: exited, skip: "already stopped (exited)"},
		{name: "start a stopped one", kind: reconcile.StepStart, live: exited, calls: []string{"stub start api"}},
		{name: "start a running one", kind: reconcile.StepStart, live: running, skip: "already running"},
		{name: "not created", kind: reconcile.StepStop, wantErr: `sandbox "api" does not exist; create it with 'sbx apply'`},
		{name: "not sbx's", kind: reconcile.StepStop, live: foreign, wantErr: `sandbox "api" exists but was not created by sbx; sbx stop leaves it alone`},
		{name: "sbx's by its record", kind: reconcile.StepStart, live: &reconcile.Live{Exists: true, Stopped: true, Status: "stopped"}, record: true, calls: []string{"stub start api"}},
		{name: "no such verb", kind: reconcile.StepCreate, live: running, wantErr: "no lifecycle verb for step create"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &Session{Specs: []*spec.Spec{{Name: "api"}}, Backend: stubBackend{}, Live: map[string]*reconcile.Live{}, Records: map[string]*reconcile.Record{}}
			if tc.live != nil {
				s.Live["api"] = tc.live
			}
			if tc.record {
				s.Records["api"] = &reconcile.Record{Name: "api"}
			}
			lcs, err := s.Lifecycle(tc.kind)
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("error %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(lcs) != 1 {
				t.Fatalf("%d lifecycles for one sandbox", len(lcs))
			}
			var calls []string
			for _, c := range lcs[0].Calls {
				calls = append(calls, c.Desc)
			}
			if diff := cmp.Diff(tc.calls, calls); diff != "" {
				t.Errorf("calls (-want +got):\n%s", diff)
			}
			if lcs[0].Skip != tc.skip {
				t.Errorf("skip %q, want %q", lcs[0].Skip, tc.skip)
			}
		})
	}
}

// TestRunnable: a command runs in a sandbox that exists; a stopped one is
// refused only where the backend does not start it for the exec itself.
func TestRunnable(t *testing.T) {
	stopped := &reconcile.Live{Exists: true, Stopped: true, Status: "exited"}
	for _, tc := range []struct {
		name string
		live *reconcile.Live
		mode reconcile.Mode
		want error
	}{
		{"running", &reconcile.Live{Exists: true, Status: "running"}, reconcile.InPlace, nil},
		{"stopped, sbx starts it", stopped, reconcile.InPlace, &StoppedError{Sandbox: "api", Status: "exited"}},
		{"stopped, the backend starts it", stopped, reconcile.Ignored, nil},
		{"absent", nil, reconcile.InPlace, &NotCreatedError{Sandbox: "api"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &Session{Backend: stubBackend{status: tc.mode}, Live: map[string]*reconcile.Live{"api": tc.live}}
			if diff := cmp.Diff(tc.want, s.Runnable(&spec.Spec{Name: "api"})); diff != "" {
				t.Errorf("Runnable (-want +got):\n%s", diff)
			}
		})
	}
}

// TestList: sbx ls merges this machine's records with what the backend
// holds, and compares each sandbox with the file it was applied from: a
// sandbox the file no longer declares is listed as such, one whose file
// cannot be read is unknown (and still listed), and a sandbox sbx did not
// create is not sbx's to list.
func TestList(t *testing.T) {
	w := newWorld(t)
	api := w.file(t, "api.yaml", "version: 1\nname: api\nagent: shell\ndriver: sbx\nworkspace: .\nnetwork: {agentHosts: false}\n")
	web := w.file(t, "web.yaml", "version: 1\nname: web\nagent: shell\ndriver: sbx\nworkspace: .\nnetwork: {agentHosts: false}\n")
	w.apply(t, api)
	w.apply(t, web)
	if _, err := w.env.Runner.Output(context.Background(), w.env.Self, "create", "-q", "--name", "byhand", "shell", w.ws); err != nil {
		t.Fatal(err)
	}
	type row struct{ Name, State, File, Detail string }
	for _, step := range []struct {
		name string
		edit func(t *testing.T)
		want []row
	}{
		{"as applied", func(*testing.T) {}, []row{{"api", "in-sync", api, ""}, {"web", "in-sync", web, ""}}},
		{"a change pending", func(t *testing.T) {
			w.file(t, "api.yaml", "version: 1\nname: api\nagent: shell\ndriver: sbx\nworkspace: .\nnetwork: {agentHosts: false}\nenv: {MODE: new}\n")
		}, []row{{"api", "changes-pending", api, ""}, {"web", "in-sync", web, ""}}},
		{"no longer declared", func(t *testing.T) {
			w.file(t, "web.yaml", "version: 1\nname: web2\nagent: shell\ndriver: sbx\nworkspace: .\nnetwork: {agentHosts: false}\n")
		}, []row{{"api", "changes-pending", api, ""},
			{"web", "undeclared", web, web + " no longer declares it: declare it there again to manage it (sbx destroy), or remove it with the backend's own CLI"}}},
		{"a file that cannot be read", func(t *testing.T) {
			w.file(t, "api.yaml", "version: 1\nname: [api\n")
		}, []row{{"api", "unknown", api, api + " cannot be read: " + api + ":"}, {"web", "undeclared", web, ""}}},
	} {
		t.Run(step.name, func(t *testing.T) {
			step.edit(t)
			l, err := List(context.Background(), ListOptions{Env: w.env, StateDir: w.state, Driver: "sbx"})
			if err != nil {
				t.Fatal(err)
			}
			var got []row
			for i, s := range l.Sandboxes {
				r := row{s.Name, s.State, s.File, s.Detail}
				if i < len(step.want) && strings.HasPrefix(s.Detail, step.want[i].Detail) {
					r.Detail = step.want[i].Detail // the step's detail is a prefix
				}
				if s.Driver != "sbx" || !s.Exists {
					t.Errorf("%s: driver %s, exists %v", s.Name, s.Driver, s.Exists)
				}
				got = append(got, r)
			}
			if diff := cmp.Diff(step.want, got); diff != "" {
				t.Errorf("listing (-want +got):\n%s", diff)
			}
		})
	}
}
