package session

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sbxhq/sbx/loop"
	"github.com/sbxhq/sbx/reconcile"
	"github.com/sbxhq/sbx/spec"
	"github.com/sbxhq/sbx/state"
)

// fakeUI records what a run asked of the user, and applies for real
// (Session.Apply) unless noApply is set.
type fakeUI struct {
	calls   []string
	confirm error // what the user answers
	noApply bool
	warned  []error
}

func (u *fakeUI) ShowPlan(p *reconcile.Changes) error {
	u.calls = append(u.calls, "show "+p.Kind)
	return nil
}

func (u *fakeUI) Confirm(p *reconcile.Changes) error {
	u.calls = append(u.calls, "confirm")
	return u.confirm
}

func (u *fakeUI) Apply(ctx context.Context, s *Session, p *reconcile.Changes, adopt bool) error {
	u.calls = append(u.calls, "apply "+p.Kind)
	if u.noApply {
		return nil
	}
	return s.Apply(ctx, p, adopt, reconcile.ApplyOptions{})
}

func (u *fakeUI) Warn(err error) { u.warned = append(u.warned, err) }

var errDeclined = errors.New("apply cancelled; nothing was changed")

// TestApplyRun: what a run does with a plan before its loop — which plans
// it shows, whom it asks, what it refuses. A widening is never applied on
// -y alone; the detached process (resumed) asks nobody and applies only
// what the flags approve; a lost protection is never restored unattended;
// a warm pool is never changed by a run.
func TestApplyRun(t *testing.T) {
	create := func(widens, lost bool) *reconcile.Changes {
		c := &reconcile.SandboxChange{Sandbox: "api", Action: reconcile.ActionCreate}
		if widens {
			c.Widenings = []reconcile.Widening{{Path: "network.allow", What: "egress to evil.example"}}
		}
		if lost {
			c.Action = reconcile.ActionUpdate
			c.Drift = []reconcile.Diff{{Field: reconcile.FieldProtect, Path: "workspace.protect"}}
		}
		return &reconcile.Changes{Kind: "apply", Sandboxes: []*reconcile.SandboxChange{c}}
	}
	yes := Approval{Yes: true}
	for _, tc := range []struct {
		name    string
		plan    *reconcile.Changes
		o       LoopOptions
		pooled  bool
		confirm error
		want    []string
		wantErr string // the error's type
	}{
		{name: "nothing to do", plan: &reconcile.Changes{Kind: "apply", Sandboxes: []*reconcile.SandboxChange{{Sandbox: "api", Action: reconcile.ActionNoOp}}}},
		{name: "plan errors", plan: &reconcile.Changes{Kind: "apply", Errors: []string{"bad"}}, o: LoopOptions{Approval: yes}, wantErr: "*errors.errorString"},
		{name: "-y", plan: create(false, false), o: LoopOptions{Approval: yes}, want: []string{"show apply", "apply apply"}},
		{name: "-y does not apply a widening", plan: create(true, false), o: LoopOptions{Approval: yes}, want: []string{"show apply"}, wantErr: "*session.ApprovalError"},
		{name: "--approve-widening", plan: create(true, false), o: LoopOptions{Approval: Approval{Yes: true, Widening: true}}, want: []string{"show apply", "apply apply"}},
		{name: "the user approves", plan: create(true, false), want: []string{"show apply", "confirm", "apply apply"}},
		{name: "the user declines", plan: create(false, false), confirm: errDeclined, want: []string{"show apply", "confirm"}, wantErr: "*errors.errorString"},
		{name: "resumed asks nobody", plan: create(false, false), o: LoopOptions{Resumed: true}, want: []string{"show apply"}, wantErr: "*session.ChangedSinceApprovalError"},
		{name: "resumed with a widening", plan: create(true, false), o: LoopOptions{Resumed: true, Approval: yes}, want: []string{"show apply"}, wantErr: "*session.ChangedSinceApprovalError"},
		{name: "resumed as approved", plan: create(true, false), o: LoopOptions{Resumed: true, Approval: Approval{Yes: true, Widening: true}}, want: []string{"show apply", "apply apply"}},
		{name: "lost protection, -y", plan: create(false, true), o: LoopOptions{Approval: Approval{Yes: true, Widening: true}}, want: []string{"show apply"}, wantErr: "*session.LostProtectionError"},
		{name: "lost protection, resumed", plan: create(false, true), o: LoopOptions{Resumed: true, Approval: Approval{Yes: true, Widening: true}}, want: []string{"show apply"}, wantErr: "*session.LostProtectionError"},
		{name: "lost protection, the user decides", plan: create(false, true), want: []string{"show apply", "confirm", "apply apply"}},
		{name: "a warm pool is not changed", plan: create(false, false), o: LoopOptions{Approval: yes}, pooled: true, wantErr: "*session.PoolChangedError"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ui := &fakeUI{confirm: tc.confirm, noApply: true}
			tc.o.UI = ui
			s := &Session{Specs: []*spec.Spec{{Name: "api"}}}
			err := s.applyRun(context.Background(), tc.plan, tc.o, tc.pooled)
			if got := typeOf(err); got != tc.wantErr {
				t.Errorf("error %v (%s), want a %s", err, got, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, ui.calls); diff != "" {
				t.Errorf("calls (-want +got):\n%s", diff)
			}
		})
	}
}

func typeOf(err error) string {
	if err == nil {
		return ""
	}
	return fmt.Sprintf("%T", err)
}

// TestChangedSinceApprovalUnwraps: the detached process's refusal is an
// approval error underneath, widening or not, so that callers can tell.
func TestChangedSinceApprovalUnwraps(t *testing.T) {
	p := &reconcile.Changes{Kind: "apply", Sandboxes: []*reconcile.SandboxChange{{Sandbox: "api", Action: reconcile.ActionCreate,
		Widenings: []reconcile.Widening{{Path: "network.allow"}}}}}
	err := approveRun(p, LoopOptions{Resumed: true, Approval: Approval{Yes: true}})
	var ae *ApprovalError
	if !errors.As(err, &ae) || !ae.Widens {
		t.Fatalf("got %v, want a widening ApprovalError inside", err)
	}
	if want := "the sandbox changed after the run was approved, and the plan widens"; !strings.HasPrefix(err.Error(), want) {
		t.Errorf("message %q, want it to start %q", err, want)
	}
}

// TestApprove: -y alone never applies a widening (the agent may have
// written the file it came from); a saved plan was reviewed when made.
func TestApprove(t *testing.T) {
	plain := &reconcile.Changes{Kind: "apply", Sandboxes: []*reconcile.SandboxChange{{Sandbox: "a", Action: reconcile.ActionCreate}}}
	widens := &reconcile.Changes{Kind: "apply", Sandboxes: []*reconcile.SandboxChange{{Sandbox: "a", Action: reconcile.ActionUpdate,
		Widenings: []reconcile.Widening{{Path: "mounts[0]"}}}}}
	destroy := &reconcile.Changes{Kind: "destroy", Sandboxes: []*reconcile.SandboxChange{{Sandbox: "a", Action: reconcile.ActionDestroy,
		Widenings: []reconcile.Widening{{Path: "mounts[0]"}}}}}
	for _, tc := range []struct {
		name string
		p    *reconcile.Changes
		a    Approval
		want *ApprovalError
	}{
		{"nothing given", plain, Approval{}, &ApprovalError{}},
		{"-y", plain, Approval{Yes: true}, nil},
		{"-y, widening", widens, Approval{Yes: true}, &ApprovalError{Widens: true}},
		{"--approve-widening alone asks", widens, Approval{Widening: true}, &ApprovalError{}},
		{"-y --approve-widening", widens, Approval{Yes: true, Widening: true}, nil},
		{"saved plan", widens, Approval{Reviewed: true}, nil},
		{"a destroy widens nothing", destroy, Approval{Yes: true}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got *ApprovalError
			if err := Approve(tc.p, tc.a); err != nil && !errors.As(err, &got) {
				t.Fatalf("error %v is not an ApprovalError", err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Approve (-want +got):\n%s", diff)
			}
		})
	}
}

// TestCheckLoop: every file of a run has a loop section, and a
// multi-agent run has one workspace.
func TestCheckLoop(t *testing.T) {
	sp := func(name, ws string, l *spec.Loop) *spec.Spec {
		s := &spec.Spec{Name: name, Files: []string{name + ".yaml"}, Loop: l}
		s.Workspace.Path = ws
		return s
	}
	l := &spec.Loop{MaxIterations: 1}
	for _, tc := range []struct {
		name  string
		specs []*spec.Spec
		want  error
	}{
		{"one", []*spec.Spec{sp("a", "/w", l)}, nil},
		{"two in one workspace", []*spec.Spec{sp("a", "/w", l), sp("b", "/w", l)}, nil},
		{"no loop section", []*spec.Spec{sp("a", "/w", l), sp("b", "/w", nil)}, &NoLoopError{Sandbox: "b", File: "b.yaml"}},
		{"two workspaces", []*spec.Spec{sp("a", "/w", l), sp("b", "/v", l)},
			&WorkspacesError{File: "a.yaml", Workspace: "/w", OtherFile: "b.yaml", OtherWorkspace: "/v"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, CheckLoop(tc.specs)); diff != "" {
				t.Errorf("CheckLoop (-want +got):\n%s", diff)
			}
		})
	}
}

// TestLostProtection names the sandboxes whose protection drifted, once
// each, and no other drift.
func TestLostProtection(t *testing.T) {
	p := &reconcile.Changes{Sandboxes: []*reconcile.SandboxChange{
		{Sandbox: "a", Drift: []reconcile.Diff{{Field: reconcile.FieldEnv}}},
		{Sandbox: "b", Drift: []reconcile.Diff{{Field: reconcile.FieldProtect}, {Field: reconcile.FieldProtect}}},
		{Sandbox: "c", Drift: []reconcile.Diff{{Field: reconcile.FieldEnv}, {Field: reconcile.FieldProtect}}},
	}}
	if diff := cmp.Diff([]string{"b", "c"}, LostProtection(p)); diff != "" {
		t.Errorf("LostProtection (-want +got):\n%s", diff)
	}
	want := `sandbox "b", "c" lost the protection of its declaration since it was made (the plan above says how); a run does not restore it unattended: run 'sbx apply' to restore it, then the loop`
	if got := (&LostProtectionError{Sandboxes: []string{"b", "c"}}).Error(); got != want {
		t.Errorf("message:\n got %s\nwant %s", got, want)
	}
}

// TestTemplateText says what the agent's sandbox is made from, for the
// message when its command is missing there.
func TestTemplateText(t *testing.T) {
	built := &spec.Spec{Agent: "shell"}
	built.Template.Build = &spec.Build{Context: "ctx", Dockerfile: "Dockerfile.agent"}
	image := &spec.Spec{Agent: "shell"}
	image.Template.Image = "example/agent:1"
	fromCheckpoint := &spec.Spec{Agent: "claude"}
	fromCheckpoint.Template.Checkpoint = "before-refactor"
	for _, tc := range []struct {
		name string
		sp   *spec.Spec
		want string
	}{
		{"build", built, "built from ctx/Dockerfile.agent"},
		{"image", image, "example/agent:1"},
		{"checkpoint", fromCheckpoint, `checkpoint "before-refactor", image sbx-checkpoint:before-refactor`},
		{"default", &spec.Spec{Agent: "claude"}, spec.DefaultTemplate("claude") + ", the claude agent's default"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := TemplateText(tc.sp); got != tc.want {
				t.Errorf("TemplateText = %q, want %q", got, tc.want)
			}
		})
	}
}

// loopFile is a sandbox file whose agent says the promise at once.
func loopFile(name, extra string) string {
	return fmt.Sprintf(`version: 1
name: %s
agent: shell
driver: sbx
network: {agentHosts: false}
%sloop:
  prompt: PROMPT.md
  maxIterations: 3
  completion: {promise: DONE}
  command: [sh, -c, 'echo "$$GH_TOKEN" > agent-saw; echo "<promise>DONE</promise>"']
`, name, extra)
}

// begin begins a run on the files' sandboxes, as sbx loop does before it
// opens the session.
func (w *world) begin(t *testing.T, files ...string) *loop.Run {
	t.Helper()
	res, err := Load(Options{Files: files, Offline: true}, w.env.Runner.LookupEnv)
	if err != nil {
		t.Fatal(err)
	}
	run, err := BeginLoop(w.state, res.Specs, 0, false)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { run.Close(loop.ExitError, "test over") })
	return run
}

func (w *world) exists(t *testing.T, name string) bool {
	t.Helper()
	s, err := Open(context.Background(), Options{Files: []string{filepath.Join(w.ws, name+".yaml")}, Env: w.env, StateDir: w.state})
	if err != nil {
		t.Fatal(err)
	}
	l := s.Live[name]
	return l != nil && l.Exists
}

// TestRunLoopEphemeral: an ephemeral run creates its sandbox, runs the
// loop in it and destroys it at the end; one on a sandbox that exists is
// refused and leaves that sandbox alone (it is the user's).
func TestRunLoopEphemeral(t *testing.T) {
	w := newWorld(t)
	f := w.file(t, "api.yaml", loopFile("api", "workspace: .\n"))

	run := w.begin(t, f)
	ui := &fakeUI{}
	var msgs strings.Builder
	s := w.open(t, f)
	res, err := s.RunLoop(context.Background(), run, LoopOptions{
		Ephemeral: true, Approval: Approval{Yes: true}, UI: ui, Stdout: io.Discard, Stderr: io.Discard, Messages: &msgs})
	s.Release()
	if err != nil {
		t.Fatal(err)
	}
	if res.State != loop.StateCompleted {
		t.Errorf("run ended %s (%s), want completed", res.State, res.Detail)
	}
	if diff := cmp.Diff([]string{"show apply", "apply apply", "apply destroy"}, ui.calls); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}
	if want := "sbx loop: destroying the ephemeral sandbox\n"; msgs.String() != want {
		t.Errorf("messages %q, want %q", msgs.String(), want)
	}
	if w.exists(t, "api") {
		t.Error("the ephemeral sandbox is still there")
	}

	// The user's own sandbox of that name: refused, not destroyed.
	w.apply(t, f)
	run.Close(loop.ExitError, "")
	run = w.begin(t, f)
	ui = &fakeUI{}
	_, err = w.open(t, f).RunLoop(context.Background(), run, LoopOptions{
		Ephemeral: true, Approval: Approval{Yes: true}, UI: ui, Stdout: io.Discard, Stderr: io.Discard, Messages: io.Discard})
	var ee *EphemeralExistsError
	if !errors.As(err, &ee) || ee.Sandbox != "api" {
		t.Errorf("got %v, want an EphemeralExistsError for api", err)
	}
	if len(ui.calls) > 0 {
		t.Errorf("the refused run did %v", ui.calls)
	}
	if !w.exists(t, "api") {
		t.Error("the refused ephemeral run destroyed the user's sandbox")
	}
}

// TestRunLoopDetach: a run handed to the detached process once converged
// gives the sandboxes' locks up before it (that process takes them), runs
// no loop here and leaves the ephemeral sandbox to that process.
func TestRunLoopDetach(t *testing.T) {
	w := newWorld(t)
	f := w.file(t, "api.yaml", loopFile("api", "workspace: .\n"))
	run := w.begin(t, f)
	ui := &fakeUI{}
	detached := false
	res, err := w.open(t, f).RunLoop(context.Background(), run, LoopOptions{
		Ephemeral: true, Approval: Approval{Yes: true}, UI: ui, Stdout: io.Discard, Stderr: io.Discard, Messages: io.Discard,
		Detach: func(ctx context.Context) error {
			detached = true
			l, err := state.AcquireLock(ctx, w.state, "api", state.LockOptions{Command: "detached"})
			if err != nil {
				return fmt.Errorf("the sandbox's lock is still held: %w", err)
			}
			l.Release()
			return nil
		},
	})
	if err != nil || res != nil {
		t.Fatalf("RunLoop = %v, %v; want a run handed on", res, err)
	}
	if !detached {
		t.Error("the run was not handed on")
	}
	if diff := cmp.Diff([]string{"show apply", "apply apply"}, ui.calls); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}
	if !w.exists(t, "api") {
		t.Error("the first process destroyed the ephemeral sandbox the detached one runs in")
	}
}

// TestRunLoopFilesChanged: the run's sandboxes are those it began with;
// files that now declare others end it before anything is planned.
func TestRunLoopFilesChanged(t *testing.T) {
	w := newWorld(t)
	f := w.file(t, "api.yaml", loopFile("api", "workspace: .\n"))
	g := w.file(t, "web.yaml", loopFile("web", "workspace: .\n"))
	run := w.begin(t, f)
	ui := &fakeUI{}
	_, err := w.open(t, g).RunLoop(context.Background(), run, LoopOptions{Approval: Approval{Yes: true}, UI: ui, Messages: io.Discard})
	want := &FilesChangedError{Began: []string{"api"}, Now: []string{"web"}}
	if diff := cmp.Diff(want, err); diff != "" {
		t.Errorf("RunLoop (-want +got):\n%s", diff)
	}
	if len(ui.calls) > 0 {
		t.Errorf("the run did %v", ui.calls)
	}
}

// TestLoopConfig: one agent per file in turn order, each with its own
// loop section, template and secrets (every agent's redacted from the
// output); the first file's bounds, which --max-iterations overrides.
func TestLoopConfig(t *testing.T) {
	w := newWorld(t)
	w.env.Runner.Env = append(w.env.Runner.Env, "GH_TOKEN=ghp_session_test_1", "NPM_TOKEN=npm_session_test_2")
	f := w.file(t, "impl.yaml", loopFile("impl", "workspace: .\ntemplate: example/impl:1\nsecrets:\n  GITHUB_TOKEN: {env: GH_TOKEN}\n"))
	g := w.file(t, "review.yaml", loopFile("review", "workspace: .\nsecrets:\n  NPM_TOKEN: {env: NPM_TOKEN}\n"))
	s := w.open(t, f, g)
	for _, tc := range []struct {
		name     string
		override int
		want     int
	}{
		{"the file's bound", 0, 3},
		{"--max-iterations", 7, 7},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := s.LoopConfig(context.Background(), tc.override, io.Discard, io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Loop.MaxIterations != tc.want {
				t.Errorf("maxIterations %d, want %d", cfg.Loop.MaxIterations, tc.want)
			}
			type agent struct {
				Sandbox, File, Template string
				Env                     map[string]string
			}
			var got []agent
			for _, a := range cfg.Agents {
				got = append(got, agent{a.Sandbox, a.File, a.Template, a.Env})
			}
			want := []agent{
				{"impl", f, "example/impl:1", map[string]string{"GITHUB_TOKEN": "ghp_session_test_1"}},
				{"review", g, spec.DefaultTemplate("shell"), map[string]string{"NPM_TOKEN": "npm_session_test_2"}},
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("agents (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff([]string{"ghp_session_test_1", "npm_session_test_2"}, cfg.Redact); diff != "" {
				t.Errorf("redacted (-want +got):\n%s", diff)
			}
			if cfg.Workspace != w.ws {
				t.Errorf("workspace %s, want %s", cfg.Workspace, w.ws)
			}
		})
	}
}
