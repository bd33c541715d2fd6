package sbx

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sbxhq/sbx/driver/cliutil"
	"github.com/sbxhq/sbx/internal/fakecli"
)

// The documents below are the live captures' shapes (docker-sbx-evidence.md
// §1.1, §1.2, §1.3, §1.6, §3.11; v0.47.0 where the version matters), with
// masked values filled in.
const (
	lsDoc = `{"sandboxes":[{"name":"m101-demo","id":"7d0c…","agent":"shell","status":"running","workspaces":["/w/repo","/w/docs:ro"],
		"ports":[{"host_ip":"127.0.0.1","host_port":18081,"sandbox_port":8080,"protocol":"tcp4"}],"created_at":"2026-10-08T10:00:00Z"},
		{"name":"other","status":"stopped"}]}`
	policyDoc = `{"rules":[
		{"id":"5b2c…","name":"5b2c…","policy_id":"9e1a…","scope":"sandbox:m101-policy","applies_to":"sandbox:m101-policy","resource_type":"network",
		 "decision":"allow","resources":["example.com"],"origin":"scoped","layer":"local","status":"active","editable":true,"sandbox_id":"m101-policy",
		 "provenance":{"created_via":"added"},"actions":["net:connect:tcp"]},
		{"id":"default-ai-services","name":"default-ai-services","policy_id":"local-policy","scope":"global","applies_to":"all","resource_type":"network",
		 "decision":"allow","resources":["api.anthropic.com:443","**.openai.com:443"],"status":"active","editable":true,"provenance":{"created_via":"default"}}]}`
	portsDoc = `[{"host_ip":"127.0.0.1","host_port":18081,"sandbox_port":8080,"protocol":"tcp4"},{"host_ip":"::1","host_port":40001,"sandbox_port":8080,"protocol":"tcp"}]`
	checkDoc = `{"action":"net:connect:tcp","allowed":false,"context":"sandbox:m101-policy","deny_kind":"explicit","governance":{"active":false},
		"origin":"local","reason":"Denied by local rule","resource_type":"net:domain","resource_value":"example.com:443","rule":"local:5b2c…",
		"target":"example.com:443","type":"network"}`
	logDoc = `{"blocked_hosts":[{"host":"example.com:443","vm_name":"m101-demo","proxy_type":"forward","rule":"","since":"t","last_seen":"t",
		"count_since":1,"reason":"No matching allow rule (default deny)"}],"allowed_hosts":[]}`
)

func src(cmd string) cliutil.Source {
	return cliutil.Source{Command: cmd, Version: func() string { return "sbx 0.47.0" }}
}

// mutate applies a fakecli.Mutate spec ("/pointer=json" or "/pointer") to
// doc.
func mutate(t *testing.T, doc, spec string) []byte {
	t.Helper()
	if spec == "" {
		return []byte(doc)
	}
	var v any
	if err := json.Unmarshal([]byte(doc), &v); err != nil {
		t.Fatal(err)
	}
	m, err := fakecli.Mutate(v, []string{"x"}, "x "+spec)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// parsers runs each parser on out and returns its error.
var parsers = map[string]func([]byte) error{
	"ls": func(out []byte) error {
		_, err := parseList(src("sbx ls --json"), out, func(n string) bool { return n == "m101-demo" })
		return err
	},
	"policy": func(out []byte) error { _, err := parsePolicy(src("sbx policy ls api --json"), out); return err },
	"ports":  func(out []byte) error { _, err := parsePorts(src("sbx ports api --json"), out); return err },
	"check": func(out []byte) error {
		_, err := parseCheck(src("sbx policy check network x --json"), out)
		return err
	},
	"log": func(out []byte) error { _, err := parseLog(src("sbx policy log api --json"), out); return err },
}

// TestParsersStrict feeds each parser the captured shape and mutations of
// it: extra fields, notices and the fields of a sandbox sbx does not
// manage are fine; a missing or mistyped field the driver reads is an
// error that names the command, the version and the field.
func TestParsersStrict(t *testing.T) {
	docs := map[string]string{"ls": lsDoc, "policy": policyDoc, "ports": portsDoc, "check": checkDoc, "log": logDoc}
	tests := []struct {
		parser, mutation, want string
	}{
		{"ls", "", ""},
		{"ls", "/sandboxes/0/future={\"a\":[1]}", ""},
		{"ls", "/sandboxes/0/ports", ""},
		{"ls", "/sandboxes/1/agent=7", ""}, // not a sandbox sbx reads
		{"ls", "/sandboxes", `sbx ls --json (sbx 0.47.0): field "sandboxes": missing`},
		{"ls", "/sandboxes={}", `sbx ls --json (sbx 0.47.0): field "sandboxes": expected an array, got an object`},
		{"ls", "/sandboxes/1/name", `sbx ls --json (sbx 0.47.0): sandbox 2: field "name": missing`},
		{"ls", "/sandboxes/0/status=null", `sbx ls --json (sbx 0.47.0): sandbox 1: field "status": expected a string, got null`},
		{"ls", "/sandboxes/0/workspaces", `sbx ls --json (sbx 0.47.0): sandbox 1: field "workspaces": missing`},
		{"ls", "/sandboxes/0/workspaces/1=3", `sbx ls --json (sbx 0.47.0): sandbox 1: field "workspaces": expected an array of strings, got a number at index 1`},
		{"ls", "/sandboxes/0/ports/0/host_port=\"18081\"", `sbx ls --json (sbx 0.47.0): port 1: field "host_port": expected an integer, got a string`},
		{"ls", "/sandboxes/0/ports/0/protocol=\"sctp\"", `sbx ls --json (sbx 0.47.0): port 1: field "protocol": unknown value "sctp" (known: tcp, tcp4, tcp6, udp, udp4, udp6)`},
		{"policy", "", ""},
		{"policy", "/organization=\"acme\"", ""},
		{"policy", "/rules/0/provenance", ""}, // before 0.47
		{"policy", "/rules/0/resources=5", `sbx policy ls api --json (sbx 0.47.0): rule 1: field "resources": expected an array of strings, got a number`},
		{"policy", "/rules/1/resource=\"x\"", ""},
		{"policy", "/rules/1/resources", `sbx policy ls api --json (sbx 0.47.0): rule 2: field "resources": missing`},
		{"policy", "/rules/0/scope", `sbx policy ls api --json (sbx 0.47.0): rule 1: field "scope": missing`},
		{"policy", "/rules/0/editable=\"yes\"", `sbx policy ls api --json (sbx 0.47.0): rule 1: field "editable": expected a boolean, got a string`},
		{"policy", "/rules/0/decision=\"maybe\"", `sbx policy ls api --json (sbx 0.47.0): rule 1: field "decision": unknown value "maybe" (known: allow, deny)`},
		{"policy", "/rules/0/provenance/created_via=1", `sbx policy ls api --json (sbx 0.47.0): rule 1: field "provenance.created_via": expected a string, got a number`},
		{"policy", "/rules=null", `sbx policy ls api --json (sbx 0.47.0): field "rules": expected an array, got null`},
		{"ports", "", ""},
		{"ports", "/0/sandbox_port=8080.5", `sbx ports api --json (sbx 0.47.0): port 1: field "sandbox_port": expected an integer, got 8080.5`},
		{"ports", "/1/host_ip", `sbx ports api --json (sbx 0.47.0): port 2: field "host_ip": missing`},
		{"check", "", ""},
		{"check", "/rule", ""},
		{"check", "/allowed", `sbx policy check network x --json (sbx 0.47.0): field "allowed": missing`},
		{"check", "/allowed=\"false\"", `sbx policy check network x --json (sbx 0.47.0): field "allowed": expected a boolean, got a string`},
		{"log", "", ""},
		{"log", "/blocked_hosts/0/reason", ""},
		{"log", "/allowed_hosts", `sbx policy log api --json (sbx 0.47.0): field "allowed_hosts": missing`},
		{"log", "/blocked_hosts/0/count_since=\"1\"", `sbx policy log api --json (sbx 0.47.0): blocked entry 1: field "count_since": expected an integer, got a string`},
		{"log", "/blocked_hosts/0/vm_name", `sbx policy log api --json (sbx 0.47.0): blocked entry 1: field "vm_name": missing`},
	}
	for _, tt := range tests {
		t.Run(tt.parser+tt.mutation, func(t *testing.T) {
			err := parsers[tt.parser](mutate(t, docs[tt.parser], tt.mutation))
			got := ""
			if err != nil {
				got = err.Error()
			}
			if got != tt.want {
				t.Errorf("error:\n got %s\nwant %s", got, tt.want)
			}
		})
	}
}

// TestParsersNoise: notices before the JSON (issue #201) and a banner after
// it (evidence §1.1) are skipped; output with no JSON is an error.
func TestParsersNoise(t *testing.T) {
	out := "Starting sandboxd daemon...\nDaemon started (PID: 1)\n" + lsDoc + "\nA new version of sbx is available.\n"
	list, err := parseList(src("sbx ls --json"), []byte(out), func(string) bool { return true })
	if err == nil {
		t.Fatalf("unmanaged entry without agent passed strict parsing: %+v", list)
	}
	list, err = parseList(src("sbx ls --json"), []byte(out), func(n string) bool { return n == "m101-demo" })
	if err != nil {
		t.Fatal(err)
	}
	want := []sandbox{{Name: "m101-demo", Agent: "shell", Status: "running", Workspaces: []string{"/w/repo", "/w/docs:ro"},
		Ports: []binding{{HostIP: "127.0.0.1", HostPort: 18081, SandboxPort: 8080, Protocol: "tcp4"}}}}
	if diff := cmp.Diff(want, list); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if _, err := parsePolicy(src("sbx policy ls api --json"), []byte("Daemon is not running\n")); err == nil || !strings.Contains(err.Error(), "no JSON in output") {
		t.Errorf("no JSON: err = %v", err)
	}
}

func TestParseHelp(t *testing.T) {
	for _, tt := range []struct {
		help    string
		noInput bool
		err     bool
	}{
		{"Flags:\n      --cloud      Dispatch\n  -D, --debug      Enable debug logging\n  -h, --help       help for sbx\n", false, false},
		{"Flags:\n  -h, --help       help for sbx\n      --no-input   Never prompt; commands that need an answer fail\n", true, false},
		{"Flags:\n  -h, --help   help; see --no-input elsewhere\n", false, false},
		{"Docker Sandboxes\n\nUsage: sbx\n", false, true},
	} {
		got, err := parseHelp(src("sbx --help"), []byte(tt.help))
		if got != tt.noInput || (err != nil) != tt.err {
			t.Errorf("parseHelp(%q) = %v, %v; want %v, error %v", tt.help, got, err, tt.noInput, tt.err)
		}
	}
}

// FuzzParsers: no input makes a parser panic, and a parser that accepts an
// input returns no error text.
func FuzzParsers(f *testing.F) {
	for _, d := range []string{lsDoc, policyDoc, portsDoc, checkDoc, logDoc, "[]", "{}", "null", "x\n{"} {
		f.Add([]byte(d))
	}
	f.Fuzz(func(t *testing.T, out []byte) {
		for name, p := range parsers {
			if err := p(out); err != nil && !strings.Contains(err.Error(), "(sbx 0.47.0)") {
				t.Errorf("%s: error does not name the command and version: %v", name, err)
			}
		}
	})
}
