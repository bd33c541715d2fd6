package fakedocker

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sbxhq/sbx/internal/fakecli/fakestate"
)

func (w *world) load(t *testing.T) *fakestate.State {
	t.Helper()
	b, err := os.ReadFile(w.state)
	if err != nil {
		t.Fatal(err)
	}
	st := fakestate.New()
	if err := json.Unmarshal(b, st); err != nil {
		t.Fatal(err)
	}
	return st
}

const createAPI = "sandbox create --name api claude $WS $DIR:ro"

func TestVerbs(t *testing.T) {
	created := step{args: createAPI, stdout: "✓ Created sandbox api in VM api\n"}
	tests := []struct {
		name  string
		steps []step
	}{
		{"version", []step{
			{args: "sandbox version", stdout: "github.com/docker/sandboxes/cli-plugin v0.12.0 5810c6afcea21e6741fa6abbbbdb31dc0ee3a225\n"},
			{args: "sandbox version", env: map[string]string{"FAKE_DOCKER_SANDBOX_VERSION": "0.7.1"},
				stdout: "github.com/docker/sandboxes/cli-plugin v0.7.1 f00f0d6473647c2201cd0507ce31613345c48ae6\n"},
		}},
		{"not docker", []step{
			{args: "ps", code: 1, stderr: "docker: 'ps' is not a docker command.\nSee 'docker --help'\n"},
			{args: "sandbox ls", env: map[string]string{"FAKE_DOCKER_NO_SANDBOX": "1"}, code: 1,
				stderr: "docker: 'sandbox' is not a docker command.\nSee 'docker --help'\n"},
			{args: "sandbox inspect api", code: 1, stderr: "docker: 'sandbox inspect' is not a docker command.\nSee 'docker --help'\n"},
			{args: "sandbox ls", env: map[string]string{"FAKE_DOCKER_SANDBOX_VERSION": "0.13.0"}, code: 1,
				stderr: "The Docker Desktop-integrated `docker sandbox` commands are deprecated and replaced by the standalone `sbx` CLI.\n"},
		}},
		{"create and ls", []step{
			created,
			{args: "sandbox create -e A=b claude $WS", code: 125, stderr: "unknown shorthand flag: 'e' in -e\nSee 'docker sandbox create --help'.\n"},
			{args: "sandbox create claude", code: 1,
				stderr: "\"docker sandbox create\" requires at least 2 arguments.\nSee 'docker sandbox create --help'.\n\nUsage:  docker sandbox create [OPTIONS] AGENT WORKSPACE\n"},
			{args: createAPI, code: 1, stderr: "sandbox with name \"api\" already exists\n"},
			{args: "--context desktop-linux sandbox create -q codex $WS"},
			{args: "sandbox stop codex-proj", stdout: "codex-proj\n"},
			{args: "sandbox ls", stdout: `VM ID       NAME         STATUS    WORKSPACE   SOCKET PATH                                                    SANDBOXES   AGENTS
16d226b28   api          running   $WS         $HOME/.docker/sandboxes/vm/api/docker-1794398400000.sock   1           claude
1b05e5510   codex-proj   stopped   $WS
`, fields: true},
			{args: "sandbox ls -q", stdout: "api\ncodex-proj\n"},
			{args: "sandbox ls --json", stdout: `{
  "vms": [
    {
      "name": "api",
      "agent": "claude",
      "status": "running",
      "socket_path": "$HOME/.docker/sandboxes/vm/api/docker-1794398400000.sock",
      "sandbox_count": 1,
      "workspaces": [
        "$WS",
        "$DIR:ro"
      ]
    },
    {
      "name": "codex-proj",
      "agent": "codex",
      "status": "stopped",
      "sandbox_count": 0
    }
  ]
}
`},
			{args: "sandbox ls --json", env: map[string]string{"FAKE_DOCKER_LS_SHAPE": "sandboxes", "FAKE_DOCKER_NOISE": "before"},
				stdout: "Starting sandboxd...\n{\n  \"sandboxes\": [\n    {\n      \"name\": \"api\",\n      \"agent\": \"claude\",\n      \"status\": \"running\",\n      \"socket_path\": \"$HOME/.docker/sandboxes/vm/api/docker-1794398400000.sock\",\n      \"sandbox_count\": 1,\n      \"workspaces\": [\n        \"$WS\",\n        \"$DIR:ro\"\n      ]\n    },\n    {\n      \"name\": \"codex-proj\",\n      \"agent\": \"codex\",\n      \"status\": \"stopped\",\n      \"sandbox_count\": 0\n    }\n  ]\n}\n"},
		}},
		{"run", []step{
			{args: "sandbox run -d claude $WS", stdout: "7c5997391232fb42e043f1e04e1e7cb34ad33a1dd7c7ebc7827be642da3a9d40\n"},
			{args: "sandbox stop claude-proj", stdout: "claude-proj\n"},
			{args: "sandbox run -d claude $WS", stdout: "7c5997391232fb42e043f1e04e1e7cb34ad33a1dd7c7ebc7827be642da3a9d40\n"},
			{args: "sandbox run claude-proj -- --continue"},
			{args: "sandbox ls -q", stdout: "claude-proj\n"},
		}},
		{"network", []step{
			created,
			{args: "sandbox network proxy api --policy deny --allow-host api.anthropic.com --allow-host github.com --block-host pastebin.com --allow-cidr 10.0.0.0/8"},
			{args: "sandbox network proxy api --policy maybe", code: 125,
				stderr: "invalid argument \"maybe\" for \"--policy\" flag: must be allow or deny\nSee 'docker sandbox network proxy --help'.\n"},
			{args: "sandbox stop api", stdout: "api\n"},
			{args: "sandbox network proxy api --allow-host x.com", code: 1,
				stderr: "sandbox \"api\" is not running: start it before changing its network policy\n"},
			{args: "sandbox fake-add-log api GET https://api.example.com/data allowed --time 2026-01-29T10:15:23Z"},
			{args: "sandbox fake-add-log api GET https://blocked.example.com/ denied --time 2026-01-29T10:15:25Z"},
			{args: "sandbox network log", stdout: "2026-01-29T10:15:23Z sandbox=api request GET https://api.example.com/data allowed\n2026-01-29T10:15:25Z sandbox=api request GET https://blocked.example.com/ denied\n"},
			{args: "sandbox network log --json --limit 1", stdout: "{\n  \"entries\": [\n    {\n      \"timestamp\": \"2026-01-29T10:15:25Z\",\n      \"sandbox\": \"api\",\n      \"type\": \"request\",\n      \"method\": \"GET\",\n      \"url\": \"https://blocked.example.com/\",\n      \"action\": \"denied\"\n    }\n  ]\n}\n"},
		}},
		{"exec", []step{
			created,
			{args: "sandbox exec api pwd", stdout: "$WS\n"},
			{args: "sandbox exec -e X=1 -w $DIR api sh -c echo\\ $X\\ $(pwd)", stdout: "1 $DIR\n"},
			{args: "sandbox exec api sh -c exit\\ 4", code: 4},
			{args: "sandbox exec -i api cat", stdin: "in", stdout: "in"},
			{args: "sandbox exec nope true", code: 1, stderr: "sandbox \"nope\" not found\n"},
		}},
		{"save rm reset", []step{
			created,
			{args: "sandbox save api my-checkpoint:v1"},
			{args: "sandbox save api", code: 1,
				stderr: "\"docker sandbox save\" requires exactly 2 arguments.\nSee 'docker sandbox save --help'.\n\nUsage:  docker sandbox save [OPTIONS] SANDBOX TAG\n"},
			{args: "sandbox rm api nope", code: 1, stderr: "sandbox \"nope\" not found\n"},
			{args: "sandbox remove api", stdout: "api\n"},
			{args: "sandbox rm api", code: 1, stderr: "sandbox \"api\" not found\n"},
			{args: "sandbox reset", stdin: "n\n", code: 1, stdout: "This stops all VMs and deletes all sandbox state. Continue? [y/N] ", stderr: "cancelled\n"},
			{args: "sandbox reset --force", stdout: "All VMs reset successfully\n"},
		}},
		{"failure injection", []step{
			{args: createAPI, env: map[string]string{"FAKE_DOCKER_FAIL": "create:1"}, code: 1,
				stderr: "create: request failed: 500 Internal Server Error: injected by FAKE_DOCKER_FAIL\n"},
			{args: createAPI, env: map[string]string{"FAKE_DOCKER_FAIL": "create:1"}, stdout: "✓ Created sandbox api in VM api\n"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			newWorld(t).steps(t, tt.steps)
		})
	}
}

func TestNetworkState(t *testing.T) {
	w := newWorld(t)
	w.steps(t, []step{
		{args: createAPI, stdout: "✓ Created sandbox api in VM api\n"},
		{args: "sandbox network proxy api --policy deny --allow-host a.com --block-host b.com --allow-cidr 10.0.0.0/8 --bypass-cidr 10.1.0.0/16"},
		{args: "sandbox network proxy api --allow-host a.com --allow-host b.com"},
	})
	got := w.load(t).Find("api").Network
	var rules []string
	for _, r := range got.Rules {
		rules = append(rules, r.Decision+" "+r.Resource)
	}
	if diff := cmp.Diff([]string{"allow a.com", "deny b.com", "allow b.com"}, rules); diff != "" {
		t.Errorf("rules (-want +got):\n%s", diff)
	}
	if got.Default != "deny" || strings.Contains(strings.Join(got.BlockCIDRs, ","), "10.0.0.0/8") {
		t.Errorf("default %q, block CIDRs %v", got.Default, got.BlockCIDRs)
	}
	if diff := cmp.Diff([]string{"10.1.0.0/16"}, got.BypassCIDRs); diff != "" {
		t.Errorf("bypass CIDRs (-want +got):\n%s", diff)
	}
}
