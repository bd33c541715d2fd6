package reconcile

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sbxhq/sbx/spec"
)

// TestPlanCopiesBackendNotes: notes a backend attaches to a sandbox,
// existing or not, reach the plan and its rendering.
func TestPlanCopiesBackendNotes(t *testing.T) {
	note := "Docker's global network policy also allows every sandbox default-ai-services (4 hosts)"
	tests := []struct {
		name string
		live *Live
		rec  bool
	}{
		{"create", &Live{Name: "api", Notes: []string{note}}, false},
		{"update", func() *Live {
			l := liveOf(baseSpec(), sbxCaps())
			l.Network.Allow = nil // an addition to plan
			l.Notes = []string{note}
			return l
		}(), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			records := map[string]*Record{}
			if tt.rec {
				records["api"] = recordOf(t, sbxCaps(), baseSpec())
			}
			p := Plan([]Desired{desiredOf(t, baseSpec())}, map[string]*Live{"api": tt.live}, records, sbxCaps(), Options{})
			if diff := cmp.Diff([]string{note}, p.Sandboxes[0].Notes); diff != "" {
				t.Fatalf("notes (-want +got):\n%s", diff)
			}
			var b bytes.Buffer
			if err := Render(&b, p, false); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(b.String(), "    note: "+note+"\n") {
				t.Errorf("rendered plan lacks the note:\n%s", b.String())
			}
		})
	}
}

// TestPlanRemovedEphemeralPort: a port applied without a host port has
// whatever port the OS picked when it is removed; that is no drift, and
// the unpublish says which port without guessing the host port.
func TestPlanRemovedEphemeralPort(t *testing.T) {
	applied := baseSpec()
	applied.Ports = []spec.Port{{ContainerPort: 3000, Protocol: "tcp"}}
	live := liveOf(applied, sbxCaps())
	live.Ports = []spec.Port{{HostPort: 49152, ContainerPort: 3000, Protocol: "tcp"}}
	p := Plan([]Desired{desiredOf(t, baseSpec())}, map[string]*Live{"api": live},
		map[string]*Record{"api": recordOf(t, sbxCaps(), applied)}, sbxCaps(), Options{})
	c := p.Sandboxes[0]
	if len(c.Drift) != 0 {
		t.Errorf("drift: %v", c.Drift)
	}
	var got []Diff
	var unpublish []spec.Port
	for _, d := range c.Changes {
		got = append(got, Diff{Op: d.Op, Path: d.Path, Before: d.Before})
	}
	for _, s := range c.Steps {
		if s.Ports != nil {
			unpublish = append(unpublish, s.Ports.Unpublish...)
		}
	}
	if diff := cmp.Diff([]Diff{{Op: Remove, Path: "ports", Before: "3000/tcp"}}, got); diff != "" {
		t.Errorf("changes (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]spec.Port{{ContainerPort: 3000, Protocol: "tcp"}}, unpublish); diff != "" {
		t.Errorf("unpublish (-want +got):\n%s", diff)
	}
}

func TestGroupCalls(t *testing.T) {
	rule := func(v string) string { return "sbx policy deny network --sandbox api " + v }
	tests := []struct {
		name  string
		calls []string
		want  []string
	}{
		{"short runs stay", []string{rule("a"), rule("b"), rule("c"), "sbx ls --json"},
			[]string{rule("a"), rule("b"), rule("c"), "sbx ls --json"}},
		{"a run of four is one line", []string{"sbx stop api", rule("a"), rule("b"), rule("c"), rule("d"), "sbx ls --json  # lists api"},
			[]string{"sbx stop api", "sbx policy deny network --sandbox api ARG  # 4 calls, ARG each of:\n    a b c d", "sbx ls --json  # lists api"}},
		{"annotated and multi-line calls are never grouped", []string{"x  # a", "x  # b", "x  # c", "x  # d", "a\nb", "a\nb", "a\nb", "a\nb"},
			[]string{"x  # a", "x  # b", "x  # c", "x  # d", "a\nb", "a\nb", "a\nb", "a\nb"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, groupCalls(tc.calls)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestPlanJSONDocs keeps docs/plan-json.md naming every field and step
// kind a plan may carry.
func TestPlanJSONDocs(t *testing.T) {
	data, err := os.ReadFile("../docs/plan-json.md")
	if err != nil {
		t.Fatal(err)
	}
	row := func(prefix string) string {
		i := strings.Index(string(data), prefix)
		if i < 0 {
			t.Fatalf("docs/plan-json.md has no row %q", prefix)
		}
		line, _, _ := strings.Cut(string(data[i:]), "\n")
		return line
	}
	fields, kinds := strings.Fields(row("| `field` | string | capability row:")), strings.Fields(row("| `kind` | string | `build"))
	has := func(words []string, name string) bool {
		for _, w := range words {
			if strings.Trim(w, "`") == name {
				return true
			}
		}
		return false
	}
	for f, name := range fieldNames {
		if !has(fields, name) {
			t.Errorf("field %s (%d) is not in docs/plan-json.md's Diff.field row", name, f)
		}
	}
	for k, name := range stepNames {
		if !has(kinds, name) {
			t.Errorf("step kind %s (%d) is not in docs/plan-json.md's Step.kind row", name, k)
		}
	}
}
