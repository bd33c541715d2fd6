package dockersandbox

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sbxhq/sbx/driver/cliutil"
	"github.com/sbxhq/sbx/netlog"
)

func src(cmd string) cliutil.Source {
	return cliutil.Source{Command: cmd, Version: func() string { return "docker sandbox 0.12.0" }}
}

// TestParseList: the documented shape (docker-sbx-evidence.md §1.9: "vms",
// a stopped VM without workspaces), the "sandboxes" key of [3P] parsers,
// and loud errors for what neither shows.
func TestParseList(t *testing.T) {
	want := func(n string) bool { return n == "api" || n == "stopped-vm" }
	tests := []struct {
		name, out string
		want      []vm
		err       string
	}{
		{"docs", `{"vms":[{"name":"api","agent":"claude","status":"running","socket_path":"/s","sandbox_count":1,"workspaces":["/w","/d:ro"]},
			{"name":"stopped-vm","agent":"codex","status":"stopped","sandbox_count":0},{"name":"other"}]}`,
			[]vm{{Name: "api", Agent: "claude", Status: "running", Workspaces: []string{"/w", "/d:ro"}, Reported: true},
				{Name: "stopped-vm", Agent: "codex", Status: "stopped"}}, ""},
		{"sandboxes key with notices", "Starting sandboxd...\n" + `{"sandboxes":[{"name":"api","agent":"claude","status":"running","workspaces":["/w"]}]}` + "\nupdate available\n",
			[]vm{{Name: "api", Agent: "claude", Status: "running", Workspaces: []string{"/w"}, Reported: true}}, ""},
		{"neither key", `{"items":[]}`, nil, `docker sandbox ls --json (docker sandbox 0.12.0): field "vms": missing`},
		{"bare array", `[]`, nil, `docker sandbox ls --json (docker sandbox 0.12.0): expected an object, got an array`},
		{"status missing", `{"vms":[{"name":"api","agent":"claude"}]}`, nil, `docker sandbox ls --json (docker sandbox 0.12.0): vm 1: field "status": missing`},
		{"workspaces mistyped", `{"vms":[{"name":"api","agent":"claude","status":"running","workspaces":"/w"}]}`, nil,
			`docker sandbox ls --json (docker sandbox 0.12.0): vm 1: field "workspaces": expected an array of strings, got a string`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseList(src("docker sandbox ls --json"), []byte(tt.out), want)
			msg := ""
			if err != nil {
				msg = err.Error()
			}
			if msg != tt.err {
				t.Fatalf("error:\n got %s\nwant %s", msg, tt.err)
			}
			if err == nil {
				if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(vm{})); diff != "" {
					t.Errorf("(-want +got):\n%s", diff)
				}
			}
		})
	}
}

// TestParseLog: the documented network log (docker-sbx-evidence.md §1.11).
func TestParseLog(t *testing.T) {
	out := `{"entries":[{"timestamp":"2026-01-29T10:15:23Z","sandbox":"api","type":"request","method":"GET","url":"https://a.example/x","action":"allowed"},
		{"sandbox":"other"}]}`
	got, err := parseLog(src("docker sandbox network log --json"), []byte(out), func(s string) bool { return s == "api" })
	if err != nil {
		t.Fatal(err)
	}
	want := []logEntry{{Sandbox: "api", Entry: netlog.Entry{Time: "2026-01-29T10:15:23Z", Method: "GET", Host: "a.example", Port: 443, Decision: "allow"}}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	_, err = parseLog(src("docker sandbox network log --json"), []byte(`{"entries":[{"sandbox":"api","timestamp":"t","method":"GET","url":5,"action":"denied"}]}`), func(string) bool { return true })
	if want := `docker sandbox network log --json (docker sandbox 0.12.0): entry 1: field "url": expected a string, got a number`; err == nil || err.Error() != want {
		t.Errorf("err = %v, want %s", err, want)
	}
	_, err = parseLog(src("docker sandbox network log --json"), []byte(`{"entries":[{"sandbox":"api","timestamp":"t","method":"GET","url":"http://a","action":"logged"}]}`), func(string) bool { return true })
	if want := `docker sandbox network log --json (docker sandbox 0.12.0): entry 1: field "action": unknown value "logged" (known: allowed, denied)`; err == nil || err.Error() != want {
		t.Errorf("err = %v, want %s", err, want)
	}
	_, err = parseLog(src("docker sandbox network log --json"), []byte(`{"entries":[{"sandbox":"api","timestamp":"t","method":"GET","url":5,"action":"denied"}]}`), func(string) bool { return true })
	if want := `docker sandbox network log --json (docker sandbox 0.12.0): entry 1: field "url": expected a string, got a number`; err == nil || err.Error() != want {
		t.Errorf("err = %v, want %s", err, want)
	}
	for raw, want := range map[string]struct {
		host string
		port int
	}{
		"https://api.example.com:8443/path?q": {"api.example.com", 8443},
		"http://a.example/x":                  {"a.example", 80},
		"a.example:443":                       {"a.example", 443},
		"[fd00::1]:22":                        {"fd00::1", 22},
	} {
		if h, p := urlHostPort(raw); h != want.host || p != want.port {
			t.Errorf("urlHostPort(%q) = %q, %d; want %q, %d", raw, h, p, want.host, want.port)
		}
	}
}
