package fakedocker

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const createAPI = "sandbox create --name api claude $WS $DIR:ro"

func TestVerbs(t *testing.T) {
	created := step{Args: createAPI, Stdout: "✓ Created sandbox api in VM api\n"}
	tests := []struct {
		name  string
		steps []step
	}{
		{"version", []step{
			{Args: "sandbox version", Stdout: "github.com/docker/sandboxes/cli-plugin v0.12.0 5810c6afcea21e6741fa6abbbbdb31dc0ee3a225\n"},
			{Args: "sandbox version", Env: map[string]string{"FAKE_DOCKER_SANDBOX_VERSION": "0.7.1"},
				Stdout: "github.com/docker/sandboxes/cli-plugin v0.7.1 f00f0d6473647c2201cd0507ce31613345c48ae6\n"},
		}},
		{"not docker", []step{
			{Args: "ps", Code: 1, Stderr: "docker: 'ps' is not a docker command.\nSee 'docker --help'\n"},
			{Args: "sandbox ls", Env: map[string]string{"FAKE_DOCKER_NO_SANDBOX": "1"}, Code: 1,
				Stderr: "docker: 'sandbox' is not a docker command.\nSee 'docker --help'\n"},
			{Args: "sandbox inspect api", Code: 1, Stderr: "docker: 'sandbox inspect' is not a docker command.\nSee 'docker --help'\n"},
			{Args: "sandbox ls", Env: map[string]string{"FAKE_DOCKER_SANDBOX_VERSION": "0.13.0"}, Code: 1,
				Stderr: "The Docker Desktop-integrated `docker sandbox` commands are deprecated and replaced by the standalone `sbx` CLI.\n"},
		}},
		{"create and ls", []step{
			created,
			{Args: "sandbox create -e A=b claude $WS", Code: 125, Stderr: "unknown shorthand flag: 'e' in -e\nSee 'docker sandbox create --help'.\n"},
			{Args: "sandbox create claude", Code: 1,
				Stderr: "\"docker sandbox create\" requires at least 2 arguments.\nSee 'docker sandbox create --help'.\n\nUsage:  docker sandbox create [OPTIONS] AGENT WORKSPACE\n"},
			{Args: createAPI, Code: 1, Stderr: "sandbox with name \"api\" already exists\n"},
			{Args: "--context desktop-linux sandbox create -q codex $WS"},
			{Args: "sandbox stop codex-proj", Stdout: "codex-proj\n"},
			{Args: "sandbox ls", Stdout: `VM ID       NAME         STATUS    WORKSPACE   SOCKET PATH                                                    SANDBOXES   AGENTS
16d226b28   api          running   $WS         $HOME/.docker/sandboxes/vm/api/docker-1794398400000.sock   1           claude
1b05e5510   codex-proj   stopped   $WS
`, Fields: true},
			{Args: "sandbox ls -q", Stdout: "api\ncodex-proj\n"},
			{Args: "sandbox ls --json", Stdout: `{
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
			{Args: "sandbox ls --json", Env: map[string]string{"FAKE_DOCKER_LS_SHAPE": "sandboxes", "FAKE_DOCKER_NOISE": "before"},
				Stdout: "Starting sandboxd...\n{\n  \"sandboxes\": [\n    {\n      \"name\": \"api\",\n      \"agent\": \"claude\",\n      \"status\": \"running\",\n      \"socket_path\": \"$HOME/.docker/sandboxes/vm/api/docker-1794398400000.sock\",\n      \"sandbox_count\": 1,\n      \"workspaces\": [\n        \"$WS\",\n        \"$DIR:ro\"\n      ]\n    },\n    {\n      \"name\": \"codex-proj\",\n      \"agent\": \"codex\",\n      \"status\": \"stopped\",\n      \"sandbox_count\": 0\n    }\n  ]\n}\n"},
		}},
		{"network", []step{
			created,
			{Args: "sandbox network proxy api --policy deny --allow-host api.anthropic.com --allow-host github.com --block-host pastebin.com --allow-cidr 10.0.0.0/8"},
			{Args: "sandbox network proxy api --policy maybe", Code: 125,
				Stderr: "invalid argument \"maybe\" for \"--policy\" flag: must be allow or deny\nSee 'docker sandbox network proxy --help'.\n"},
			{Args: "sandbox stop api", Stdout: "api\n"},
			{Args: "sandbox network proxy api --allow-host x.com", Code: 1,
				Stderr: "sandbox \"api\" is not running: start it before changing its network policy\n"},
			{Args: "sandbox fake-add-log api GET https://api.example.com/data allowed --time 2026-01-29T10:15:23Z"},
			{Args: "sandbox fake-add-log api GET https://blocked.example.com/ denied --time 2026-01-29T10:15:25Z"},
			{Args: "sandbox network log", Stdout: "2026-01-29T10:15:23Z sandbox=api request GET https://api.example.com/data allowed\n2026-01-29T10:15:25Z sandbox=api request GET https://blocked.example.com/ denied\n"},
			{Args: "sandbox network log --json --limit 1", Stdout: "{\n  \"entries\": [\n    {\n      \"timestamp\": \"2026-01-29T10:15:25Z\",\n      \"sandbox\": \"api\",\n      \"type\": \"request\",\n      \"method\": \"GET\",\n      \"url\": \"https://blocked.example.com/\",\n      \"action\": \"denied\"\n    }\n  ]\n}\n"},
		}},
		{"exec", []step{
			created,
			{Args: "sandbox exec api pwd", Stdout: "$WS\n"},
			{Args: "sandbox exec -e X=1 -w $DIR api sh -c echo\\ $X\\ $(pwd)", Stdout: "1 $DIR\n"},
			{Args: "sandbox exec api sh -c exit\\ 4", Code: 4},
			{Args: "sandbox exec -i api cat", Stdin: "in", Stdout: "in"},
			{Args: "sandbox exec nope true", Code: 1, Stderr: "sandbox \"nope\" not found\n"},
		}},
		{"rm", []step{
			created,
			{Args: "sandbox rm api nope", Code: 1, Stderr: "sandbox \"nope\" not found\n"},
			{Args: "sandbox remove api", Stdout: "api\n"},
			{Args: "sandbox rm api", Code: 1, Stderr: "sandbox \"api\" not found\n"},
		}},
		{"failure injection", []step{
			{Args: createAPI, Env: map[string]string{"FAKE_DOCKER_FAIL": "create:1"}, Code: 1,
				Stderr: "create: request failed: 500 Internal Server Error: injected by FAKE_DOCKER_FAIL\n"},
			{Args: createAPI, Env: map[string]string{"FAKE_DOCKER_FAIL": "create:1"}, Stdout: "✓ Created sandbox api in VM api\n"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			newWorld(t).Steps(t, tt.steps)
		})
	}
}

func TestNetworkState(t *testing.T) {
	w := newWorld(t)
	w.Steps(t, []step{
		{Args: createAPI, Stdout: "✓ Created sandbox api in VM api\n"},
		{Args: "sandbox network proxy api --policy deny --allow-host a.com --block-host b.com --allow-cidr 10.0.0.0/8 --bypass-cidr 10.1.0.0/16"},
		{Args: "sandbox network proxy api --allow-host a.com --allow-host b.com"},
	})
	got := w.Load(t).Find("api").Network
	var rules []string
	for _, r := range got.Rules {
		rules = append(rules, r.Decision+" "+strings.Join(r.Resources, ","))
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
