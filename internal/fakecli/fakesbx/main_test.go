package fakesbx

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync"
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

func (w *world) argv(t *testing.T) [][]string {
	t.Helper()
	f, err := os.Open(w.log)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out [][]string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var a []string
		if err := json.Unmarshal(sc.Bytes(), &a); err != nil {
			t.Fatal(err)
		}
		out = append(out, a)
	}
	return out
}

const lsJSON = `{
  "sandboxes": [
    {
      "name": "api",
      "id": "4fa55889-9eeb-471b-9cae-3baf534f840c",
      "agent": "claude",
      "status": "running",
      "workspaces": [
        "$WS",
        "$DIR:ro"
      ],
      "workspace_missing": false,
      "ports": [
        {
          "host_ip": "127.0.0.1",
          "host_port": 8080,
          "sandbox_port": 3000,
          "protocol": "tcp4"
        }
      ],
      "cpus": 4,
      "memory": "8g",
      "last_used_at": "2026-11-11T12:00:00Z",
      "created_at": "2026-11-11T12:00:00Z"
    }
  ]
}
`

func TestVerbs(t *testing.T) {
	setup := []step{
		{args: "--no-input policy init deny-all"},
		{args: "create --no-input --name api --cpus 4 -m 8g -p 8080:3000 claude $WS $DIR:ro", stdout: "✓ Created sandbox api\n"},
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"version", []step{
			{args: "version", stdout: "v0.53.0 b7e54f268fe870c3e794ae405b048b91a82c2675\n"},
			{args: "version", env: map[string]string{"FAKE_SBX_VERSION": "0.39.0"}, stdout: "v0.39.0 def8cb0523a77e757bdd6ef52b459fe374f3783e\n"},
			{args: "version --json", env: map[string]string{"FAKE_SBX_SERVER_STATE": "unavailable"},
				stdout: "{\n  \"client\": {\n    \"commit\": \"b7e54f268fe870c3e794ae405b048b91a82c2675\",\n    \"version\": \"v0.53.0\"\n  },\n  \"server\": {\n    \"state\": \"unavailable\"\n  }\n}\n"},
			{args: "version --json", env: map[string]string{"FAKE_SBX_VERSION": "0.41.0"}, code: 1, stderr: "ERROR: unknown flag: --json\n"},
		}},
		{"policy must be initialised", []step{
			{args: "create --no-input claude $WS", code: 1,
				stderr: "ERROR: the global network policy is not initialized; run: sbx policy init allow-all|balanced|deny-all\n"},
			{args: "create claude $WS", stdin: "3\n",
				stdout: "Initialize the global network policy for your sandboxes:\n     1. Open         — All network traffic allowed, no restrictions.\n  ❯  2. Balanced     — Default deny, with common dev sites allowed.\n     3. Locked Down  — All network traffic blocked unless you allow it.\n✓ Created sandbox claude-proj\n"},
			{args: "policy init balanced", code: 1, stderr: "ERROR: the global network policy is already initialized; use \"sbx policy reset\" to start over\n"},
		}},
		{"ls table and json", append(setup[:2:2],
			step{args: "ls --no-input", stdout: "SANDBOX   AGENT    STATUS    PORTS                       WORKSPACE\napi       claude   running   127.0.0.1:8080->3000/tcp4   ~/proj\n"},
			step{args: "ls -q", stdout: "api\n"},
			step{args: "ls --json", stdout: lsJSON},
			step{args: "ls --format json", stdout: lsJSON},
			step{args: "ls --json", env: map[string]string{"FAKE_SBX_LS_SHAPE": "array", "FAKE_SBX_VERSION": "0.32.0"},
				stdout: "[\n  {\n    \"name\": \"api\",\n    \"agent\": \"claude\",\n    \"status\": \"running\",\n    \"workspaces\": [\n      \"$WS\",\n      \"$DIR:ro\"\n    ],\n    \"ports\": [\n      {\n        \"host_ip\": \"127.0.0.1\",\n        \"host_port\": 8080,\n        \"sandbox_port\": 3000,\n        \"protocol\": \"tcp4\"\n      }\n    ]\n  }\n]\n"},
		)},
		{"noise", append(setup[:2:2],
			step{args: "ls --json", env: map[string]string{"FAKE_SBX_NOISE": "1"},
				stdout: "Starting sandboxd daemon...\nDaemon started (PID: 55276, socket: \\\\.\\pipe\\docker_kaname_sandboxd)\nLogs: C:\\Users\\user\\AppData\\Local\\DockerSandboxes\\sandboxes\\state\\sandboxd\\daemon.log\n" +
					lsJSON + "A new version of sbx is available: v99.0.0 (you have v0.53.0). Run 'brew upgrade docker/tap/sbx' to update.\n"},
		)},
		{"inspect", append(setup[:2:2],
			step{args: "inspect api", stdout: `  Name:           api
  Agent:            claude
  Kits:           none
  State:          running (0s)
  Image:          docker/sandbox-templates:claude-code-docker
  Image digest:   sha256:4fc263d05de3c01324348339a8fa904531ecb019a139d4bacbefa80b289ee30d
  Auth mode:      none
  Workspace:      $WS
  Mounts:         $DIR:ro
  Network Policy: global (local policy)
  Mount Policy:   allowed
  Proxy:          172.17.0.2:3128
  Secrets:        none
  MCP gateway:    configured
  Ports:          127.0.0.1:8080->3000/tcp4
  Sessions:       0

  Daemon:         v0.53.0   uptime 1d
`},
			step{args: "inspect nope", code: 1, stderr: "ERROR: sandbox 'nope' not found\n"},
			step{args: "inspect nope", env: map[string]string{"FAKE_SBX_VERSION": "0.39.0"}, code: 1,
				stderr: "ERROR: no sandbox named 'nope'\n\nTo create one:\n  sbx create AGENT WORKSPACE\n"},
		)},
		{"create errors", append(setup[:2:2],
			step{args: "create --no-input --name api claude $WS", code: 1, stderr: "ERROR: sandbox already exists with this name\n"},
			step{args: "create --no-input --branch x claude $WS", code: 1, stderr: "ERROR: --branch is no longer supported; use --clone instead\n"},
			step{args: "create --no-input --label a=b claude $WS", code: 1, stderr: "ERROR: unknown flag: --label\n"},
			step{args: "create --no-input -e A=b claude $WS", env: map[string]string{"FAKE_SBX_VERSION": "0.38.0"}, code: 1,
				stderr: "ERROR: unknown shorthand flag: 'e' in -e\n"},
			step{args: "create --no-input --name default claude $WS", code: 1, stderr: "ERROR: invalid sandbox name \"default\": 'default' is reserved\n"},
			step{args: "create --no-input gemini $WS", code: 1, stderr: "ERROR: agent 'gemini' not found\n"},
			step{args: "create --no-input -m 100m claude $WS", code: 1, stderr: "ERROR: invalid --memory \"100m\": minimum is 512 MiB\n"},
		)},
		{"stop rm", append(setup[:2:2],
			step{args: "stop api"},
			step{args: "ls -q", stdout: "api\n"},
			step{args: "rm --no-input api", code: 1, stderr: "ERROR: confirmation required; run: sbx rm --force api\n"},
			step{args: "rm api", stdin: "n\n", code: 1, stdout: "Remove sandbox(es) api? [y/N]: \n", stderr: "ERROR: cancelled\n"},
			step{args: "rm --no-input --force nope", code: 1, stderr: "ERROR: sandbox 'nope' not found\n"},
			step{args: "rm --no-input -f api"},
			step{args: "ls -q"},
		)},
		{"policy", append(setup[:2:2],
			step{args: "policy allow network --sandbox api api.example.com,*.npmjs.org"},
			step{args: "policy deny network pastebin.com"},
			step{args: "policy allow network --sandbox nope x.com", code: 1, stderr: "ERROR: sandbox 'nope' not found\n"},
			step{args: "policy ls", stdout: "NAME    TYPE      ORIGIN        DECISION   RESOURCES\nlocal   network   local         deny       pastebin.com\nlocal   network   sandbox:api   allow      api.example.com,*.npmjs.org\n"},
			step{args: "policy ls", env: map[string]string{"FAKE_SBX_VERSION": "0.31.0"},
				stdout: "NAME    TYPE      ORIGIN        DECISION   STATUS   RESOURCES\nlocal   network   local         deny       active   pastebin.com\nlocal   network   sandbox:api   allow      active   api.example.com,*.npmjs.org\n"},
			step{args: "policy ls --json", env: map[string]string{"FAKE_SBX_VERSION": "0.34.0"}, code: 1, stderr: "ERROR: unknown flag: --json\n"},
			step{args: "policy check network --sandbox api registry.npmjs.org", stdout: "Allowed: registry.npmjs.org\n"},
			step{args: "policy check network --sandbox api pastebin.com", code: 1, stdout: "Denied: pastebin.com\n"},
			step{args: "policy rm network --sandbox api --resource *.npmjs.org"},
			step{args: "policy rm network --resource nothere.com", code: 1, stderr: "ERROR: no matching rule found\n"},
			step{args: "policy ls api --json", stdout: `{
  "default": "deny",
  "preset": "deny-all",
  "rules": [
    {
      "id": "rule-160cf15e26bc",
      "policy": "local",
      "type": "network",
      "origin": "local",
      "decision": "deny",
      "resource": "pastebin.com"
    },
    {
      "id": "rule-375bdfb27633",
      "policy": "local",
      "type": "network",
      "origin": "sandbox:api",
      "decision": "allow",
      "resource": "api.example.com"
    }
  ]
}
`},
			step{args: "policy rm network --id rule-160cf15e26bc"},
			step{args: "policy ls --decision deny", stdout: "NAME   TYPE   ORIGIN   DECISION   RESOURCES\n"},
		)},
		{"policy log", append(setup[:2:2],
			step{args: "fake-add-log api blocked.example.com blocked --proxy transparent --time 2026-01-29T10:15:25Z"},
			step{args: "fake-add-log api api.anthropic.com allowed --count 42 --time 2026-01-29T10:15:23Z"},
			step{args: "policy log", stdout: `Blocked requests:
SANDBOX   TYPE      HOST                  PROXY         RULE             REASON         LAST SEEN         COUNT
api       network   blocked.example.com   transparent   domain-blocked   default-deny   10:15:25 29-Jan   1

Allowed requests:
SANDBOX   TYPE      HOST                PROXY     RULE             REASON   LAST SEEN         COUNT
api       network   api.anthropic.com   forward   domain-allowed            10:15:23 29-Jan   42
`},
			step{args: "policy log api --json --limit 1", stdout: "{\n  \"entries\": [\n    {\n      \"sandbox\": \"api\",\n      \"type\": \"network\",\n      \"host\": \"api.anthropic.com\",\n      \"proxy\": \"forward\",\n      \"rule\": \"domain-allowed\",\n      \"reason\": \"\",\n      \"last_seen\": \"2026-01-29T10:15:23Z\",\n      \"count\": 42,\n      \"action\": \"allowed\"\n    }\n  ]\n}\n"},
		)},
		{"ports", append(setup[:2:2],
			step{args: "stop api"},
			step{args: "ports api --publish 3001 --publish 127.0.0.1:9090:9000/udp"},
			step{args: "ls -q --json", stdout: "api\n"},
			step{args: "ports api", stdout: "127.0.0.1:8080->3000/tcp4\n127.0.0.1:49152->3001/tcp4\n127.0.0.1:9090->9000/udp\n"},
			step{args: "ports api --unpublish 8080:3000/tcp4 --unpublish 9090:9000/udp"},
			step{args: "ports api --json", stdout: "[\n  {\n    \"host_ip\": \"127.0.0.1\",\n    \"host_port\": 49152,\n    \"sandbox_port\": 3001,\n    \"protocol\": \"tcp4\"\n  }\n]\n"},
			step{args: "ports api --publish 3000/sctp", code: 1, stderr: "ERROR: invalid protocol \"sctp\" in \"3000/sctp\": supported protocols are tcp, tcp4, tcp6, udp, udp4, udp6\n"},
			step{args: "ports api --unpublish 1:2", code: 1, stderr: "ERROR: port 1:2 is not published by sandbox 'api'\n"},
		)},
		{"secrets", append(setup[:2:2],
			step{args: "secret set anthropic --sandbox api --password-stdin", stdin: "sk-ant-secret\n"},
			step{args: "secret set --no-input github", code: 1, stderr: "ERROR: a value for github is required; pipe it with --password-stdin\n"},
			step{args: "secret set anthropic --sandbox api --password-stdin --no-input", stdin: "x", code: 1,
				stderr: "ERROR: confirmation required; run: sbx secret set --force ...\n"},
			step{args: "secret set anthropic --sandbox api --password-stdin --no-input -f", stdin: "sk-ant-other"},
			step{args: "secret set-custom --host api.example.com --env MY_TOKEN --password-stdin", stdin: "tok"},
			step{args: "secret ls", stdout: "SCOPE      TYPE      NAME        SECRET\napi        service   anthropic   ****...****\n(global)   custom    MY_TOKEN    ****...****\n"},
			step{args: "secret rm github", code: 1, stderr: "ERROR: secret 'github' not found\n"},
			step{args: "rm -f api"},
			step{args: "secret ls --json", stdout: "{\n  \"secrets\": [\n    {\n      \"name\": \"MY_TOKEN\",\n      \"scope\": \"(global)\",\n      \"type\": \"custom\"\n    }\n  ]\n}\n"},
		)},
		{"exec", append(setup[:2:2],
			step{args: "exec api pwd", stdout: "$WS\n"},
			step{args: "exec -w $DIR api pwd", stdout: "$DIR\n"},
			step{args: "exec api sh -c exit\\ 3", code: 3},
			step{args: "exec api no-such-binary-xyz", code: 127, stderr: "ERROR: exec: \"no-such-binary-xyz\": executable file not found in $PATH\n"},
			step{args: "exec -d api true", code: 1, stderr: "ERROR: detached execution (-d/--detach) is not supported\n"},
			step{args: "exec api cat", stdin: "ignored"},
			step{args: "exec -i api cat", stdin: "piped", stdout: "piped"},
			step{args: "exec nope true", code: 1, stderr: "ERROR: sandbox 'nope' not found\n"},
		)},
		{"unknown", []step{
			{args: "bogus", code: 1, stderr: "ERROR: unknown command \"bogus\" for \"sbx\"\nRun 'sbx --help' for usage.\n"},
			{args: "policy bogus", code: 1, stderr: "ERROR: unknown command \"bogus\" for \"sbx policy\"\nRun 'sbx policy --help' for usage.\n"},
			{args: "template ls", code: 1, stderr: "ERROR: fake sbx: \"sbx template\" is not implemented\n"},
			{args: "ls --bogus", code: 1, stderr: "ERROR: unknown flag: --bogus\n"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			newWorld(t).steps(t, tt.steps)
		})
	}
}

func TestExecEnv(t *testing.T) {
	w := newWorld(t)
	w.env["HOST_SECRET"] = "from-host"
	w.steps(t, []step{
		{args: "policy init allow-all"},
		{args: "create --no-input --name api --no-progress -e BAKED=1 -e HOST_SECRET claude $WS"},
		{args: "exec -e HOST_SECRET -e EXTRA=x api sh -c echo\\ $BAKED-$HOST_SECRET-$EXTRA-$SANDBOX_NAME", stdout: "1-from-host-x-api\n"},
	})
	code, stdout, _ := w.run(t, step{args: `exec -e HOST_SECRET -e EXTRA=x api printenv BAKED HOST_SECRET EXTRA SANDBOX_NAME`})
	if diff := cmp.Diff("1\nfrom-host\nx\napi\n", stdout); diff != "" || code != 0 {
		t.Errorf("exec env (exit %d) (-want +got):\n%s", code, diff)
	}
	if diff := cmp.Diff(map[string]string{"BAKED": "1", "HOST_SECRET": "from-host"}, w.load(t).Find("api").Env); diff != "" {
		t.Errorf("stored env (-want +got):\n%s", diff)
	}
}

func TestSecretsNeverStored(t *testing.T) {
	w := newWorld(t)
	w.steps(t, []step{
		{args: "policy init allow-all"},
		{args: "create --no-input --name api --no-progress claude $WS"},
		{args: "secret set anthropic --sandbox api --password-stdin", stdin: "sk-ant-SUPERSECRET\n"},
	})
	b, err := os.ReadFile(w.state)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), "SUPERSECRET") {
		t.Fatal("state file contains the secret value")
	}
	want := []fakestate.Secret{{Scope: "api", Type: "service", Name: "anthropic", SHA256: fakestate.Fingerprint("sk-ant-SUPERSECRET")}}
	if diff := cmp.Diff(want, w.load(t).Secrets); diff != "" {
		t.Errorf("secrets (-want +got):\n%s", diff)
	}
	wantArgv := [][]string{
		{"policy", "init", "allow-all"},
		{"create", "--no-input", "--name", "api", "--no-progress", "claude", w.ws},
		{"secret", "set", "anthropic", "--sandbox", "api", "--password-stdin"},
	}
	if diff := cmp.Diff(wantArgv, w.argv(t)); diff != "" {
		t.Errorf("argv log (-want +got):\n%s", diff)
	}
}

func TestFailureInjection(t *testing.T) {
	w := newWorld(t)
	fail := map[string]string{"FAKE_SBX_FAIL": "policy allow:2,create"}
	w.steps(t, []step{
		{args: "policy init allow-all"},
		{args: "create --no-input claude $WS", env: fail, code: 1,
			stderr: "ERROR: failed to create sandbox: request failed: 500 Internal Server Error: failed to create network\n"},
		{args: "ls -q"},
		{args: "policy allow network a.com", env: fail},
		{args: "policy allow network b.com", env: fail, code: 1,
			stderr: "ERROR: policy allow network: request failed: 500 Internal Server Error: injected by FAKE_SBX_FAIL\n"},
		{args: "policy allow network c.com", env: fail},
		{args: "policy ls", stdout: "NAME    TYPE      ORIGIN   DECISION   RESOURCES\nlocal   network   local    allow      a.com,c.com\n"},
		{args: "run --name x claude $WS", env: map[string]string{"FAKE_SBX_FAIL": "run"}, code: 1,
			stderr: "Failed to start sandbox \"x\": start runtime \"x\": start runtime: request failed: 500 Internal Server Error: failed to start runtime\n"},
	})
}

func TestRun(t *testing.T) {
	w := newWorld(t)
	w.steps(t, []step{
		{args: "policy init allow-all"},
		{args: "run -d --name api claude $WS", stdout: "4fa55889-9eeb-471b-9cae-3baf534f840c\n"},
		{args: "stop api"},
		{args: "run -d --name api", stdout: "4fa55889-9eeb-471b-9cae-3baf534f840c\n"},
		{args: "run --name api codex", code: 1, stderr: "ERROR: sandbox 'api' runs agent 'claude', not 'codex'\n"},
		{args: "run --rm -d --name api", code: 1, stderr: "ERROR: --rm cannot be used with --detach\n"},
		{args: "run --rm --name api -- --continue"},
		{args: "ls -q"},
	})
}

func TestHiddenNameStaysTaken(t *testing.T) {
	w := newWorld(t)
	w.steps(t, []step{
		{args: "policy init allow-all"},
		{args: "create --no-input --no-progress --name api claude $WS"},
		{args: "fake-hide api"},
		{args: "ls -q"},
		{args: "create --no-input --name api claude $WS", code: 1, stderr: "ERROR: sandbox already exists with this name\n"},
	})
	if got := len(w.argv(t)); got != 4 {
		t.Errorf("argv log has %d lines, want 4 (fake-* verbs are not logged)", got)
	}
}

func TestConcurrentCreates(t *testing.T) {
	w := newWorld(t)
	w.steps(t, []step{{args: "policy init allow-all"}})
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if code, _, stderr := w.run(t, step{args: fmt.Sprintf("create --no-input --no-progress --name sb%d shell $WS", i)}); code != 0 {
				t.Errorf("create sb%d: exit %d: %s", i, code, stderr)
			}
		}()
	}
	wg.Wait()
	st := w.load(t)
	if len(st.Sandboxes) != 8 || st.Calls["create"] != 8 {
		t.Errorf("got %d sandboxes, %d create calls; want 8 and 8", len(st.Sandboxes), st.Calls["create"])
	}
	if got := len(w.argv(t)); got != 9 {
		t.Errorf("argv log has %d lines, want 9", got)
	}
}
