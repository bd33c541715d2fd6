package session

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

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
// in the sandbox's env on a backend whose proxy cannot add it: Secrets
// fails, naming the secret.
func TestSecretHostsNeedAProxy(t *testing.T) {
	w := newWorld(t)
	w.env.Runner.Env = append(w.env.Runner.Env, "SBX_TEST_KEY=the-real-value")
	f := w.file(t, "api.yaml", "version: 1\nname: api\nagent: shell\ndriver: sbx\nworkspace: .\nnetwork: {allow: [api.example.com]}\nsecrets:\n  KEY: {env: SBX_TEST_KEY, hosts: [api.example.com]}\n")
	s := w.open(t, f)
	got, err := s.Secrets(context.Background(), s.Specs[0])
	if err == nil || !strings.Contains(err.Error(), "cannot keep secrets out of the sandbox (secrets.KEY.hosts)") {
		t.Fatalf("Secrets = %v, %v; want the driver refused", got, err)
	}
}
