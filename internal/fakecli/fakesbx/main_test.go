package fakesbx

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sbxhq/sbx/internal/fakecli/fakeclitest"
	"github.com/sbxhq/sbx/internal/fakecli/fakestate"
)

type step = fakeclitest.Step

func newWorld(t *testing.T) *fakeclitest.World {
	return fakeclitest.New(t, "sbx", "FAKE_SBX", Main)
}

func at(v string) map[string]string { return map[string]string{"FAKE_SBX_VERSION": v} }

// TestVersionSurface: what differs between 0.42.0, 0.47.0 and 0.53.0, as
// the evidence records it (docker-sbx-evidence.md §0, §2.1).
func TestVersionSurface(t *testing.T) {
	w := newWorld(t)
	w.Steps(t, []step{
		// --no-input: unknown before 0.53 (v0.47.0 root help); error
		// prefix "ERROR:" (issue #290), "error:" in the v0.47.0 captures.
		{Args: "--no-input ls -q", Env: at("0.42.0"), Code: 1, Stderr: "ERROR: unknown flag: --no-input\n"},
		{Args: "ls --no-input -q", Env: at("0.47.0"), Code: 1, Stderr: "error: unknown flag: --no-input\n"},
		{Args: "--no-input ls -q", Env: at("0.53.0")},
		// policy rm network -f/--force from 0.45.0.
		{Args: "policy rm network --id x --force", Env: at("0.42.0"), Code: 1, Stderr: "ERROR: unknown flag: --force\n"},
		{Args: "policy rm network --id x --force", Env: at("0.47.0"), Code: 1, Stderr: "error: rule \"x\" not found\n"},
		// --json on read-only commands from 0.42.0 (issue #290).
		{Args: "policy ls --json", Env: at("0.41.0"), Code: 1, Stderr: "ERROR: unknown flag: --json\n"},
		{Args: "version", Env: at("0.42.0"), Stdout: "v0.42.0 " + commit("0.42.0") + "\n"},
		{Args: "version --json", Env: map[string]string{"FAKE_SBX_SERVER_STATE": "unavailable"},
			Stdout: "{\n  \"client\": {\n    \"commit\": \"" + commit("0.53.0") + "\",\n    \"version\": \"v0.53.0\"\n  },\n  \"server\": {\n    \"state\": \"unavailable\"\n  }\n}\n"},
		// Not found: the 0.42.0 sentence; with the "try:" hint at 0.47.0.
		{Args: "stop nope", Env: at("0.42.0"), Code: 1, Stderr: "ERROR: sandbox 'nope' not found\n"},
		{Args: "stop nope", Env: at("0.47.0"), Code: 1, Stderr: "error: sandbox 'nope' not found\n  try: sbx ls\n"},
		{Args: "stop nope", Env: at("0.39.0"), Code: 1, Stderr: "ERROR: no sandbox named 'nope'\n\nTo create one:\n  sbx create AGENT WORKSPACE\n"},
		// policy ls MISSING answers with the global rules at 0.47.0.
		{Args: "policy ls nope --json", Env: at("0.42.0"), Code: 1, Stderr: "ERROR: sandbox 'nope' not found\n"},
		{Args: "policy ls nope --json", Env: at("0.47.0"), Stdout: "{\n  \"rules\": []\n}\n"},
	})
	for _, tt := range []struct {
		version string
		noInput bool
	}{{"0.42.0", false}, {"0.47.0", false}, {"0.53.0", true}} {
		_, stdout, _ := w.Run(t, step{Args: "--help", Env: at(tt.version)})
		if got := strings.Contains(stdout, "      --no-input   Never prompt"); got != tt.noInput || !strings.Contains(stdout, "  -h, --help       help for sbx\n") {
			t.Errorf("%s: root help lists --no-input: %v, want %v:\n%s", tt.version, got, tt.noInput, stdout)
		}
	}
}

// TestAgents: devin since 0.42.0, gemini retired in 0.53.0.
func TestAgents(t *testing.T) {
	w := newWorld(t)
	w.Steps(t, []step{
		{Args: "policy init deny-all"},
		{Args: "create -q --name dv devin $WS", Env: at("0.41.0"), Code: 1, Stderr: "ERROR: unknown agent \"devin\"\n"},
		{Args: "create -q --name dv devin $WS", Env: at("0.42.0")},
		{Args: "create -q --name gm gemini $WS", Env: at("0.47.0")},
		{Args: "create -q --name gm2 gemini $WS", Code: 1, Stderr: "error: agent 'gemini' not found\n"},
	})
}

// TestPolicyListing: a sandbox's listing holds its own rules, its kit's
// rule and the global preset's, but not the global fallback; rules carry
// resources[], scope and origin "scoped" (evidence §1.2).
func TestPolicyListing(t *testing.T) {
	w := newWorld(t)
	w.Steps(t, []step{
		{Args: "policy init balanced"},
		{Args: "create -q --name api claude $WS"},
		{Args: "policy allow network --sandbox api example.com",
			Stdout: "Rule added to policy local (scope: sandbox:api): d952c3e0-f120-4a60-933a-4a6fd6f2ded7 (example.com [tcp])\n"},
	})
	type rule struct {
		ID, Name, Scope, AppliesTo, Origin, Decision, CreatedVia string
		Resources                                                []string
		Editable                                                 bool
		Layer                                                    bool
	}
	list := func(args, version string) []rule {
		_, stdout, stderr := w.Run(t, step{Args: args, Env: at(version)})
		var doc struct {
			Rules []map[string]any `json:"rules"`
		}
		if err := json.Unmarshal([]byte(stdout), &doc); err != nil {
			t.Fatalf("%s: %v: %s", args, err, stderr)
		}
		var out []rule
		for _, r := range doc.Rules {
			if r["resource_type"] != "network" {
				continue
			}
			x := rule{ID: r["id"].(string), Name: r["name"].(string), Scope: r["scope"].(string), AppliesTo: r["applies_to"].(string),
				Origin: r["origin"].(string), Decision: r["decision"].(string), Editable: r["editable"].(bool), Layer: r["layer"] != nil}
			for _, res := range r["resources"].([]any) {
				x.Resources = append(x.Resources, res.(string))
			}
			if p, ok := r["provenance"].(map[string]any); ok {
				x.CreatedVia = p["created_via"].(string)
			}
			if strings.HasPrefix(x.ID, "default-") && x.ID != "default-deny-all" {
				x.Resources = x.Resources[:1]
			}
			out = append(out, x)
		}
		return out
	}
	kit := rule{ID: "67fc226b-b3f7-49fc-a8cb-beb2748e39e1", Name: "kit:api", Scope: "sandbox:api", AppliesTo: "sandbox:api", Origin: "scoped",
		Decision: "allow", Resources: []string{"openrouter.ai"}, CreatedVia: "provisioned", Layer: true}
	added := rule{ID: "d952c3e0-f120-4a60-933a-4a6fd6f2ded7", Name: "d952c3e0-f120-4a60-933a-4a6fd6f2ded7", Scope: "sandbox:api", AppliesTo: "sandbox:api",
		Origin: "scoped", Decision: "allow", Resources: []string{"example.com"}, CreatedVia: "added", Editable: true, Layer: true}
	preset := func(id, first string) rule {
		return rule{ID: id, Name: id, Scope: "global", AppliesTo: "all", Origin: "local", Decision: "allow", Resources: []string{first},
			CreatedVia: "default", Editable: true, Layer: true}
	}
	presets := []rule{preset("default-ai-services", "api.anthropic.com:443"), preset("default-package-managers", "registry.npmjs.org:443"),
		preset("default-code-and-containers", "github.com:443"), preset("default-os-packages", "deb.debian.org:443"),
		preset("default-cloud-infrastructure", "**.amazonaws.com:443"), preset("default-cert-validation", "ocsp.digicert.com:80")}
	fallback := rule{ID: "default-deny-all", Name: "default-deny-all", Scope: "global", AppliesTo: "all", Origin: "local", Decision: "deny",
		Resources: []string{"**"}, CreatedVia: "default", Editable: true, Layer: true}
	if diff := cmp.Diff(append([]rule{kit, added}, presets...), list("policy ls api --json", "0.47.0")); diff != "" {
		t.Errorf("policy ls api (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(append(append([]rule{kit, added}, presets...), fallback), list("policy ls --json", "0.47.0")); diff != "" {
		t.Errorf("policy ls (-want +got):\n%s", diff)
	}
	// Before 0.47.0: no provenance, layer or actions.
	old := list("policy ls api --json", "0.42.0")
	if old[0].CreatedVia != "" || old[0].Layer {
		t.Errorf("0.42.0 rule has provenance or layer: %+v", old[0])
	}
}

// TestPolicyChanges: a deny conflicting with an allow of the same scope is
// refused; removal by ID asks first from 0.45.0; a kit's rule cannot be
// removed; policy check answers in JSON and exits 1 on a denial (evidence
// §2.1, §3.11).
func TestPolicyChanges(t *testing.T) {
	w := newWorld(t)
	w.Steps(t, []step{
		{Args: "policy init deny-all"},
		{Args: "create -q --name api shell $WS"},
		{Args: "policy allow network --sandbox api a.com,b.com", Stdout: "Rule added to policy local (scope: sandbox:api): d952c3e0-f120-4a60-933a-4a6fd6f2ded7 (a.com, b.com [tcp])\n"},
		{Args: "policy deny network --sandbox api b.com", Code: 1,
			Stderr: "error: deny: \"b.com\" conflicts with existing allow rule \"d952c3e0-f120-4a60-933a-4a6fd6f2ded7\"\n"},
		{Args: "policy deny network b.com", Stdout: "Rule added to policy local (scope: global): 3b38df2d-14d9-4ec7-94c8-9775c7b20f91 (b.com [tcp,udp])\n"},
		{Args: "policy rm network --sandbox api --id d952c3e0-f120-4a60-933a-4a6fd6f2ded7", Code: 1,
			Stdout: "Remove rule d952c3e0-f120-4a60-933a-4a6fd6f2ded7? (y/N): ", Stderr: "error: cancelled\n"},
		{Args: "--no-input policy rm network --sandbox api --id d952c3e0-f120-4a60-933a-4a6fd6f2ded7", Code: 1,
			Stderr: "error: confirmation required; run: sbx policy rm network ... --force\n"},
		{Args: "policy rm network --sandbox api --id 67fc226b-b3f7-49fc-a8cb-beb2748e39e1 --force", Code: 1,
			Stderr: "error: rule \"67fc226b-b3f7-49fc-a8cb-beb2748e39e1\" is provisioned by a kit and cannot be removed\n"},
		{Args: "policy check network --sandbox api a.com --json", Stdout: `{
  "action": "net:connect:tcp",
  "allowed": true,
  "context": "sandbox:api",
  "governance": {
    "active": false
  },
  "resource_type": "net:domain",
  "resource_value": "a.com:443",
  "target": "a.com:443",
  "type": "network"
}
`},
		{Args: "policy check network --sandbox api b.com --json", Code: 1, Stdout: `{
  "action": "net:connect:tcp",
  "allowed": false,
  "context": "sandbox:api",
  "deny_kind": "explicit",
  "governance": {
    "active": false
  },
  "origin": "local",
  "reason": "Denied by local rule",
  "resource_type": "net:domain",
  "resource_value": "b.com:443",
  "rule": "local:3b38df2d-14d9-4ec7-94c8-9775c7b20f91",
  "target": "b.com:443",
  "type": "network"
}
`},
		{Args: "policy check network --sandbox api c.com:8080", Code: 1, Stdout: "Denied: c.com:8080\n"},
		{Args: "policy rm network --sandbox api --id d952c3e0-f120-4a60-933a-4a6fd6f2ded7 --force"},
		{Args: "policy check network --sandbox api a.com", Code: 1, Stdout: "Denied: a.com\n"},
		// Before 0.45.0 removal does not ask.
		{Args: "policy rm network --id 3b38df2d-14d9-4ec7-94c8-9775c7b20f91", Env: at("0.42.0")},
	})
}

// TestPorts: tcp binds both loopbacks, each with its own ephemeral port;
// no protocol is tcp4; unpublish needs the host port (evidence §1.3, §3.7).
func TestPorts(t *testing.T) {
	w := newWorld(t)
	w.Steps(t, []step{
		{Args: "policy init deny-all"},
		{Args: "create -q --name api shell $WS -p 8080:3000"},
		{Args: "ports api --publish 3001/tcp", Stdout: "Published 127.0.0.1:49152 -> 3001/tcp\nPublished [::1]:49153 -> 3001/tcp\n"},
		{Args: "ports api --publish 9000/udp6", Stdout: "Published [::1]:49154 -> 9000/udp6\n"},
		{Args: "ports api", Stdout: "HOST IP     HOST PORT   SANDBOX PORT   PROTOCOL\n127.0.0.1   8080        3000           tcp4\n127.0.0.1   49152       3001           tcp\n::1         49153       3001           tcp\n::1         49154       9000           udp6\n"},
		{Args: "ports api --unpublish 3001/tcp", Code: 1, Stderr: "error: invalid port specification \"3001/tcp\": HOST_PORT is required ([HOST_IP:]HOST_PORT:SANDBOX_PORT[/PROTOCOL])\n"},
		{Args: "ports api --unpublish [::1]:49153:3001/tcp --unpublish 8080:3000"},
		{Args: "ports api --json", Stdout: "[\n  {\n    \"host_ip\": \"127.0.0.1\",\n    \"host_port\": 49152,\n    \"sandbox_port\": 3001,\n    \"protocol\": \"tcp\"\n  },\n  {\n    \"host_ip\": \"::1\",\n    \"host_port\": 49154,\n    \"sandbox_port\": 9000,\n    \"protocol\": \"udp6\"\n  }\n]\n"},
		{Args: "ports api --publish 3000/sctp", Code: 1, Stderr: "error: invalid protocol \"sctp\" in \"3000/sctp\": supported protocols are tcp, tcp4, tcp6, udp, udp4, udp6\n"},
		// Before 0.42.0 no protocol meant tcp.
		{Args: "ports api --publish 4000", Env: at("0.41.0"), Stdout: "Published 127.0.0.1:49155 -> 4000/tcp\nPublished [::1]:49156 -> 4000/tcp\n"},
	})
}

// TestAutoStop: a sandbox without a session stops itself (since 0.43.0);
// `run -d` keeps it running (evidence §3.2).
func TestAutoStop(t *testing.T) {
	w := newWorld(t)
	status := func(version string) string {
		_, stdout, _ := w.Run(t, step{Args: "ls --json", Env: at(version)})
		var doc struct {
			Sandboxes []struct{ Name, Status string }
		}
		if err := json.Unmarshal([]byte(stdout), &doc); err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, s := range doc.Sandboxes {
			out = append(out, s.Name+"="+s.Status)
		}
		return strings.Join(out, " ")
	}
	w.Steps(t, []step{
		{Args: "policy init deny-all"},
		{Args: "create -q --name aa shell $WS"},
		{Args: "create -q --name bb shell $WS", Env: at("0.42.0")},
		{Args: "create -q --name cc shell $WS", Env: map[string]string{"FAKE_SBX_AUTO_STOP": "0"}},
	})
	if got := status(""); got != "aa=stopped bb=running cc=running" {
		t.Errorf("after create: %s", got)
	}
	w.Steps(t, []step{
		{Args: "exec aa true"},
		{Args: "run -d --name bb", Stdout: "c3648c21-623d-400e-a496-ad7e53e2c8e8\n"},
		{Args: "exec bb true"},
		{Args: "stop cc", Stdout: "Sandbox 'cc' stopped; state preserved. Restart with: sbx run --name cc\n"},
	})
	if got := status(""); got != "aa=stopped bb=running cc=stopped" {
		t.Errorf("after exec, run -d and stop: %s", got)
	}
	// run -d --name of an existing sandbox keeps it running from 0.47.0
	// (evidence §3.2); before, it stops itself again when idle (where idle
	// sandboxes stop, 0.43.0 on).
	w.Steps(t, []step{
		{Args: "stop aa", Stdout: "Sandbox 'aa' stopped; state preserved. Restart with: sbx run --name aa\n"},
		{Args: "run -d --name aa", Env: at("0.45.0"), Stdout: "0540ff68-afd1-435b-a6d4-f15510a13fd7\n"},
	})
	if got := status(""); got != "aa=stopped bb=running cc=stopped" {
		t.Errorf("after run -d of an existing sandbox at 0.45.0: %s", got)
	}
	w.Steps(t, []step{{Args: "run -d --name aa", Env: at("0.47.0"), Stdout: "0540ff68-afd1-435b-a6d4-f15510a13fd7\n"}})
	if got := status(""); got != "aa=running bb=running cc=stopped" {
		t.Errorf("after run -d of an existing sandbox at 0.47.0: %s", got)
	}
}

// TestTemplates: save needs a stopped sandbox; the image is listed and can
// be loaded back from its tar (evidence §1.8, §3.1).
func TestTemplates(t *testing.T) {
	w := newWorld(t)
	w.Steps(t, []step{
		{Args: "policy init deny-all"},
		{Args: "run -d --name api shell $WS", Stdout: "4fa55889-9eeb-471b-9cae-3baf534f840c\n"},
		{Args: "template save api tpl:v1", Code: 1,
			Stdout: "Sandbox api is running and must be stopped before saving. Stop it now? (y/N): ",
			Stderr: "error: cannot save a running sandbox; stop it first with:\n  try: sbx stop api\n"},
		{Args: "stop api", Stdout: "Sandbox 'api' stopped; state preserved. Restart with: sbx run --name api\n"},
		{Args: "template save api tpl:v1 -o $DIR/tpl.tar",
			Stdout: "Snapshotting image in sandbox ...\nExporting image to $DIR/tpl.tar ...\nExported to $DIR/tpl.tar\n\nSave complete. To use the image as a template:\n    sbx run --pull never -t docker.io/library/tpl:v1 AGENT [WORKSPACE]\n"},
		{Args: "template load $DIR/tpl.tar copy:v2", Stdout: "Loaded docker.io/library/copy:v2\n"},
		{Args: "template ls --json", Stdout: `{
  "images": [
    {
      "id": "0c836c2a7f3d",
      "repository": "docker.io/library/tpl",
      "tag": "v1",
      "flavor": "shell",
      "created_at": "2026-11-11T12:00:00Z",
      "size": "536870912"
    },
    {
      "id": "f21393b4d21b",
      "repository": "docker.io/library/copy",
      "tag": "v2",
      "created_at": "2026-11-11T12:00:00Z",
      "size": "536870912"
    }
  ]
}
`},
		{Args: "create -q --name bb --pull never -t copy:v2 shell $WS"},
		{Args: "create -q --name cc --pull never -t gone:v1 shell $WS", Code: 1, Stderr: "error: template 'gone:v1' not found\n"},
		{Args: "template rm tpl:v1", Stdout: "Removed: tpl:v1\n"},
		{Args: "template rm tpl:v1", Code: 1, Stderr: "error: template 'tpl:v1' not found\n"},
	})
}

// TestLogAndSecrets: the JSON of policy log (evidence §1.6) and secret ls
// (§1.4).
func TestLogAndSecrets(t *testing.T) {
	w := newWorld(t)
	w.Steps(t, []step{
		{Args: "policy init deny-all"},
		{Args: "create -q --name api shell $WS"},
		{Args: "fake-add-log api example.com blocked --time 2026-10-08T10:00:00Z"},
		{Args: "fake-add-log api api.anthropic.com:443 allowed --count 42 --rule domain-allowed"},
		{Args: "policy log api --json", Stdout: `{
  "allowed_hosts": [
    {
      "host": "api.anthropic.com:443",
      "vm_name": "api",
      "proxy_type": "forward",
      "rule": "domain-allowed",
      "since": "2026-11-11T12:00:00Z",
      "last_seen": "2026-11-11T12:00:00Z",
      "count_since": 42
    }
  ],
  "blocked_hosts": [
    {
      "host": "example.com:443",
      "vm_name": "api",
      "proxy_type": "forward",
      "rule": "domain-blocked",
      "since": "2026-10-08T10:00:00Z",
      "last_seen": "2026-10-08T10:00:00Z",
      "count_since": 1,
      "reason": "No matching allow rule (default deny)"
    }
  ]
}
`},
		{Args: "secret set anthropic --sandbox api", Stdin: "sk-ant-secret\n"},
		{Args: "secret set-custom --host api.example.com --env MY_TOKEN --value tok", Stdout: "Saved custom secret placeholder \"sbx-cs-5f9c42f55d47cfb70aa4\"\n"},
		{Args: "secret ls --json", Stdout: `{
  "secrets": [
    {
      "scope": "api",
      "type": "service",
      "name": "anthropic",
      "secret": "****...****"
    }
  ],
  "custom_secrets": [
    {
      "scope": "global",
      "targets": [
        "api.example.com"
      ],
      "env": "MY_TOKEN",
      "placeholder": "sbx-cs-5f9c42f55d47cfb70aa4",
      "secret": "****...****"
    }
  ]
}
`},
		{Args: "secret ls", Stdout: "SCOPE      TYPE      NAME        SECRET\napi        service   anthropic   ****...****\n(global)   custom    MY_TOKEN    ****...****\n"},
	})
}

// TestMutateAndNoise: the knobs that feed a driver shapes no release
// printed, and notices around the JSON.
func TestMutateAndNoise(t *testing.T) {
	w := newWorld(t)
	w.Steps(t, []step{
		{Args: "ls --json", Env: map[string]string{"FAKE_SBX_MUTATE": "ls /sandboxes=5; policy ls /rules=1"}, Stdout: "{\n  \"sandboxes\": 5\n}\n"},
		{Args: "ls --json", Env: map[string]string{"FAKE_SBX_MUTATE": "ls /sandboxes"}, Stdout: "{}\n"},
		{Args: "ls --json", Env: map[string]string{"FAKE_SBX_MUTATE": "ls /nope/x=1"}, Code: 1, Stderr: "error: fake: MUTATE \"ls /nope/x=1\": no key \"nope\"\n"},
		{Args: "ls --json", Env: map[string]string{"FAKE_SBX_NOISE": "1"},
			Stdout: "Starting sandboxd daemon...\nDaemon started (PID: 55276, socket: \\\\.\\pipe\\docker_kaname_sandboxd)\nLogs: C:\\Users\\user\\AppData\\Local\\DockerSandboxes\\sandboxes\\state\\sandboxd\\daemon.log\n{\n  \"sandboxes\": []\n}\nA new version of sbx is available: v99.0.0 (you have v0.53.0). Run 'brew upgrade docker/tap/sbx' to update.\n"},
	})
}

func TestExecEnv(t *testing.T) {
	w := newWorld(t)
	w.Env["HOST_SECRET"] = "from-host"
	w.Steps(t, []step{
		{Args: "policy init allow-all"},
		{Args: "create --name api --no-progress -e BAKED=1 -e HOST_SECRET shell $WS"},
		{Args: "exec -e HOST_SECRET -e EXTRA=x api sh -c echo\\ $BAKED-$HOST_SECRET-$EXTRA-$SANDBOX_NAME", Stdout: "1-from-host-x-api\n"},
		{Args: "exec api pwd", Stdout: "$WS\n"},
		{Args: "exec -w $DIR api pwd", Stdout: "$DIR\n"},
		{Args: "exec api sh -c exit\\ 3", Code: 3},
		{Args: "exec api no-such-binary-xyz", Code: 127, Stderr: "error: exec: \"no-such-binary-xyz\": executable file not found in $PATH\n"},
		{Args: "exec -d api true", Code: 1, Stderr: "error: detached exec (-d/--detach) is not supported\n"},
		{Args: "exec api cat", Stdin: "ignored"},
		{Args: "exec -i api cat", Stdin: "piped", Stdout: "piped"},
	})
	if diff := cmp.Diff(map[string]string{"BAKED": "1", "HOST_SECRET": "from-host"}, w.Load(t).Find("api").Env); diff != "" {
		t.Errorf("stored env (-want +got):\n%s", diff)
	}
}

func TestSecretsNeverStored(t *testing.T) {
	w := newWorld(t)
	w.Steps(t, []step{
		{Args: "policy init allow-all"},
		{Args: "create -q --name api shell $WS"},
		{Args: "secret set anthropic --sandbox api --password-stdin", Stdin: "sk-ant-SUPERSECRET\n"},
	})
	b, err := os.ReadFile(w.State)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), "SUPERSECRET") {
		t.Fatal("state file contains the secret value")
	}
	want := []fakestate.Secret{{Scope: "api", Type: "service", Name: "anthropic", SHA256: fakestate.Fingerprint("sk-ant-SUPERSECRET")}}
	if diff := cmp.Diff(want, w.Load(t).Secrets); diff != "" {
		t.Errorf("secrets (-want +got):\n%s", diff)
	}
	wantArgv := [][]string{
		{"policy", "init", "allow-all"},
		{"create", "-q", "--name", "api", "shell", w.WS},
		{"secret", "set", "anthropic", "--sandbox", "api", "--password-stdin"},
	}
	if diff := cmp.Diff(wantArgv, w.Argv(t)); diff != "" {
		t.Errorf("argv log (-want +got):\n%s", diff)
	}
}

func TestFailureInjection(t *testing.T) {
	w := newWorld(t)
	fail := map[string]string{"FAKE_SBX_FAIL": "policy allow:2,create"}
	w.Steps(t, []step{
		{Args: "policy init allow-all"},
		{Args: "create claude $WS", Env: fail, Code: 1,
			Stderr: "error: failed to create sandbox: request failed: 500 Internal Server Error: failed to create network\n"},
		{Args: "ls -q"},
		{Args: "policy allow network a.com", Env: fail, Stdout: "Rule added to policy local (scope: global): e7619df7-2654-4399-bb10-e456dc3b44f6 (a.com [tcp])\n"},
		{Args: "policy allow network b.com", Env: fail, Code: 1,
			Stderr: "error: policy allow network: request failed: 500 Internal Server Error: injected by FAKE_SBX_FAIL\n"},
		{Args: "run --name x claude $WS", Env: map[string]string{"FAKE_SBX_FAIL": "run"}, Code: 1,
			Stderr: "Failed to start sandbox \"x\": start runtime \"x\": start runtime: request failed: 500 Internal Server Error: failed to start runtime\n"},
	})
}

func TestHiddenNameStaysTaken(t *testing.T) {
	w := newWorld(t)
	w.Steps(t, []step{
		{Args: "policy init allow-all"},
		{Args: "create -q --name api shell $WS"},
		{Args: "fake-hide api"},
		{Args: "ls -q"},
		{Args: "create -q --name api shell $WS", Code: 1, Stderr: "error: sandbox already exists with this name\n"},
	})
	if got := len(w.Argv(t)); got != 4 {
		t.Errorf("argv log has %d lines, want 4 (fake-* verbs are not logged)", got)
	}
}

func TestConcurrentCreates(t *testing.T) {
	w := newWorld(t)
	w.Steps(t, []step{{Args: "policy init allow-all"}})
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if code, _, stderr := w.Run(t, step{Args: fmt.Sprintf("create -q --name sb%d shell $WS", i)}); code != 0 {
				t.Errorf("create sb%d: exit %d: %s", i, code, stderr)
			}
		}()
	}
	wg.Wait()
	st := w.Load(t)
	if len(st.Sandboxes) != 8 || st.Calls["create"] != 8 {
		t.Errorf("got %d sandboxes, %d create calls; want 8 and 8", len(st.Sandboxes), st.Calls["create"])
	}
}
