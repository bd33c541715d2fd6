package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sbxhq/sbx/internal/agenttest"
)

// registry serves the four version documents of Claude Code claude and
// Codex codex, their integrities those of the pins when the versions are
// the pins'.
func registry(t *testing.T, claude, codex string, status int) *httptest.Server {
	pins := agenttest.New(func(string) string { return "" }).Pins
	var srv *httptest.Server
	srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if status != http.StatusOK {
			w.WriteHeader(status)
			return
		}
		integrity := func(p agenttest.Pin, v string) string {
			if v == p.Release {
				return p.Integrity
			}
			return pins.Claude.Integrity // another digest, well formed
		}
		docs := map[string]string{
			"/@anthropic-ai/claude-code/latest": fmt.Sprintf(`{"name":"@anthropic-ai/claude-code","version":%q,"optionalDependencies":{"@anthropic-ai/claude-code-linux-x64":%[1]q}}`, claude),
			"/@anthropic-ai/claude-code-linux-x64/" + claude: fmt.Sprintf(`{"name":"@anthropic-ai/claude-code-linux-x64","version":%q,"dist":{"integrity":%q,"tarball":"%s/@anthropic-ai/claude-code-linux-x64/-/claude-code-linux-x64-%[1]s.tgz"}}`,
				claude, integrity(pins.Claude, claude), srv.URL),
			"/@openai/codex/latest": fmt.Sprintf(`{"name":"@openai/codex","version":%q,"optionalDependencies":{"@openai/codex-linux-x64":"npm:@openai/codex@%[1]s-linux-x64"}}`, codex),
			"/@openai/codex/" + codex + "-linux-x64": fmt.Sprintf(`{"name":"@openai/codex","version":"%s-linux-x64","dist":{"integrity":%q,"tarball":"%s/@openai/codex/-/codex-%[1]s-linux-x64.tgz"}}`,
				codex, integrity(pins.Codex, codex), srv.URL),
		}
		body, ok := docs[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Write([]byte(body))
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestRun(t *testing.T) {
	tests := []struct {
		name          string
		claude, codex string
		status        int
		code          int
		stdout        string
		stderr        string
	}{
		{"the pins", agenttest.ClaudeVersion, agenttest.CodexVersion, 200, 0, "same\n",
			"agent releases: pinned claude-code " + agenttest.ClaudeVersion + ", codex " + agenttest.CodexVersion + "; newest claude-code " + agenttest.ClaudeVersion + ", codex " + agenttest.CodexVersion + "\n"},
		{"a new codex", agenttest.ClaudeVersion, "99.0.0", 200, 0, "new\n",
			"agent releases: pinned claude-code " + agenttest.ClaudeVersion + ", codex " + agenttest.CodexVersion + "; newest claude-code " + agenttest.ClaudeVersion + ", codex 99.0.0\n"},
		{"a new claude", "2.2.0", agenttest.CodexVersion, 200, 0, "new\n",
			"agent releases: pinned claude-code " + agenttest.ClaudeVersion + ", codex " + agenttest.CodexVersion + "; newest claude-code 2.2.0, codex " + agenttest.CodexVersion + "\n"},
		{"registry down", "", "", http.StatusServiceUnavailable, 1, "", "releases: the agents' newest releases: GET "},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := registry(t, tc.claude, tc.codex, tc.status)
			c := agenttest.New(func(string) string { return "" })
			c.Registry, c.Client = srv.URL, srv.Client()
			var stdout, stderr strings.Builder
			code := run(t.Context(), c, &stdout, &stderr)
			if diff := cmp.Diff([]any{tc.code, tc.stdout}, []any{code, stdout.String()}); diff != "" {
				t.Errorf("exit code and stdout (-want +got):\n%s\nstderr: %s", diff, stderr.String())
			}
			if !strings.HasPrefix(stderr.String(), tc.stderr) {
				t.Errorf("stderr %q, want it to start with %q", stderr.String(), tc.stderr)
			}
		})
	}
}
