package session

import (
	"context"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sbxhq/sbx/driver/dockersandbox"
	"github.com/sbxhq/sbx/internal/fakecli/fakestate"
	"github.com/sbxhq/sbx/reconcile"
	"github.com/sbxhq/sbx/spec"
)

// TestExecEnvAgent: a command in a claude sandbox gets what Claude Code
// documents for sandboxes (IS_SANDBOX=1, without which its default loop
// command refuses to run as root), unless the file sets the name itself;
// other agents get nothing of claude's.
func TestExecEnvAgent(t *testing.T) {
	for _, tc := range []struct {
		name    string
		sp      spec.Spec
		secrets reconcile.Secrets
		want    map[string]string
	}{
		{"claude", spec.Spec{Agent: "claude"}, reconcile.Secrets{"ANTHROPIC_API_KEY": "k"},
			map[string]string{"IS_SANDBOX": "1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "ANTHROPIC_API_KEY": "k"}},
		{"the file's env wins", spec.Spec{Agent: "claude", Env: map[string]string{"IS_SANDBOX": "0"}}, nil,
			map[string]string{"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1"}},
		{"a secret wins", spec.Spec{Agent: "claude", Secrets: map[string]spec.Secret{"IS_SANDBOX": {Env: "X"}}}, reconcile.Secrets{"IS_SANDBOX": "yes"},
			map[string]string{"IS_SANDBOX": "yes", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1"}},
		{"codex", spec.Spec{Agent: "codex"}, reconcile.Secrets{"CODEX_API_KEY": "k"}, map[string]string{"CODEX_API_KEY": "k"}},
		{"shell", spec.Spec{Agent: "shell"}, nil, map[string]string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := (&Session{}).ExecEnv(&tc.sp, tc.secrets)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("ExecEnv (-want +got):\n%s", diff)
			}
		})
	}
}

// TestSecretHostsNeedAProxy: a secret that names its hosts is never put
// in the sandbox's env on a backend whose proxy cannot add it (the
// docker-sandbox plugin's): Secrets fails, naming the secret.
func TestSecretHostsNeedAProxy(t *testing.T) {
	w := newWorld(t)
	w.env.Runner.Env = append(w.env.Runner.Env, "SBX_TEST_KEY=the-real-value")
	sp := &spec.Spec{Name: "api", Agent: "shell", Files: []string{"api.yaml"},
		Secrets: map[string]spec.Secret{"KEY": {Env: "SBX_TEST_KEY", Hosts: []string{"api.example.com"}}}}
	s := &Session{Specs: []*spec.Spec{sp}, Backend: dockersandbox.New(dockersandbox.Options{Runner: w.env.Runner}), env: w.env, stateDir: w.state}
	got, err := s.Secrets(context.Background(), sp)
	if err == nil || !strings.Contains(err.Error(), "the docker-sandbox driver cannot keep secrets out of the sandbox (secrets.KEY.hosts)") {
		t.Fatalf("Secrets = %v, %v; want the driver refused", got, err)
	}
}

// fakeFile is the path the fake of Docker's sbx keeps knob's file at
// (FAKE_SBX_STATE, FAKE_SBX_LOG).
func (w *world) fakeFile(t *testing.T, knob string) string {
	t.Helper()
	for _, e := range w.env.Runner.Env {
		if v, ok := strings.CutPrefix(e, knob+"="); ok {
			return v
		}
	}
	t.Fatalf("no %s", knob)
	return ""
}

// TestSecretHostsOnSbx: on the sbx driver a secret that names its hosts
// goes to Docker's secret store, in the sandbox's scope, and never into
// the exec's environment, an argv or the fake's state; removed from the
// file, it leaves the store on the next exec, even when no secret with
// hosts is left.
func TestSecretHostsOnSbx(t *testing.T) {
	const value = "sk-ant-api03-the-REAL-value"
	w := newWorld(t)
	w.env.Runner.Env = append(w.env.Runner.Env, "SBX_TEST_KEY="+value)
	head := "version: 1\nname: api\nagent: shell\ndriver: sbx\nworkspace: .\nnetwork: {allow: [api.anthropic.com]}\n"
	f := w.file(t, "api.yaml", head+"secrets:\n  ANTHROPIC_API_KEY: {env: SBX_TEST_KEY, hosts: [api.anthropic.com]}\n  PLAIN: {env: SBX_TEST_KEY}\n")
	w.apply(t, f)
	s := w.open(t, f)
	sp := s.Specs[0]
	secrets, err := s.Secrets(context.Background(), sp)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(reconcile.Secrets{"PLAIN": value}, secrets); diff != "" {
		t.Errorf("secrets for the exec's environment (-want +got):\n%s", diff)
	}
	env := s.ExecEnv(sp, secrets)
	if v, ok := env["ANTHROPIC_API_KEY"]; ok {
		t.Errorf("the exec gets ANTHROPIC_API_KEY=%q; Docker's sentinel is the sandbox's", v)
	}
	store := fakestate.Store{Path: w.fakeFile(t, "FAKE_SBX_STATE")}
	var stored []fakestate.Secret
	if err := store.View(func(st *fakestate.State) error { stored = st.Secrets; return nil }); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]fakestate.Secret{{Scope: "api", Type: "service", Name: "anthropic", SHA256: fakestate.Fingerprint(value)}}, stored); diff != "" {
		t.Errorf("Docker's store (-want +got):\n%s", diff)
	}
	for _, file := range []string{"FAKE_SBX_LOG", "FAKE_SBX_STATE"} {
		b, err := os.ReadFile(w.fakeFile(t, file))
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(b), "REAL") {
			t.Errorf("%s holds the value", file)
		}
	}

	// The secret is gone from the file: the next exec's Secrets takes it
	// out of Docker's store.
	s.Release()
	w.file(t, "api.yaml", head+"secrets:\n  PLAIN: {env: SBX_TEST_KEY}\n")
	w.apply(t, f)
	s = w.open(t, f)
	if _, err := s.Secrets(context.Background(), s.Specs[0]); err != nil {
		t.Fatal(err)
	}
	if err := store.View(func(st *fakestate.State) error { stored = st.Secrets; return nil }); err != nil {
		t.Fatal(err)
	}
	if len(stored) != 0 {
		t.Errorf("Docker's store still holds %+v", stored)
	}
}

// TestLoopRedactsProxiedValues: a value the proxy adds never reaches the
// sandbox, but an upstream may echo it back: the loop redacts it in what
// it shows and keeps, as it does a value passed in the environment.
func TestLoopRedactsProxiedValues(t *testing.T) {
	const value = "sk-ant-api03-the-REAL-value"
	w := newWorld(t)
	w.env.Runner.Env = append(w.env.Runner.Env, "SBX_TEST_KEY="+value)
	f := w.file(t, "api.yaml", "version: 1\nname: api\nagent: shell\ndriver: sbx\nworkspace: .\nnetwork: {allow: [api.anthropic.com]}\n"+
		"secrets:\n  ANTHROPIC_API_KEY: {env: SBX_TEST_KEY, hosts: [api.anthropic.com]}\n"+
		"loop:\n  prompt: PROMPT.md\n  maxIterations: 1\n  command: [sh, -c, 'true']\n")
	w.file(t, "PROMPT.md", "x\n")
	w.apply(t, f)
	s := w.open(t, f)
	cfg, err := s.LoopConfig(context.Background(), 0, io.Discard, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(cfg.Redact, value) {
		t.Errorf("the loop redacts %q, not the proxied value", cfg.Redact)
	}
	for _, a := range cfg.Agents {
		if slices.Contains(slices.Collect(maps.Values(a.Env)), value) {
			t.Errorf("sandbox %s's exec env holds the value", a.Sandbox)
		}
	}
}
