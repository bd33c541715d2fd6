package reconcile

import (
	"slices"
	"testing"

	"github.com/sbxhq/sbx/spec"
)

// TestPlanChange compares two revisions' declarations with the planner
// that compares files with a live sandbox: the same diffs and
// replacements, widenings from the base's declaration (from the defaults
// without the agent's hosts for a new sandbox), a destroy for a sandbox
// the head drops, no steps, and nothing for an unchanged one.
func TestPlanChange(t *testing.T) {
	key := make(Key, KeySize)
	parse := func(doc string) Desired {
		t.Helper()
		res, err := spec.Parse("sandbox.yaml", "/src", []byte(doc), spec.Options{NoHostFiles: true})
		if err != nil || len(res.Specs) != 1 {
			t.Fatalf("parse: %v", err)
		}
		d, err := NewDesired(res.Specs[0], key, "")
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	const api = "version: 1\nname: api\nagent: shell\nnetwork: {agentHosts: false, allow: [a.example.com]}\n"
	const same = "version: 1\nname: same\nagent: shell\n"
	const gone = "version: 1\nname: gone\nagent: shell\n"
	base := []Desired{parse(api), parse(same), parse(gone)}
	head := []Desired{
		parse("version: 1\nname: api\nagent: shell\nnetwork: {agentHosts: false, allow: [a.example.com, b.example.com]}\nenv: {X: \"1\"}\n"),
		parse(same),
		parse("version: 1\nname: new\nagent: claude\nmounts: [\"/data:/data\"]\n"),
	}
	p := PlanChange(base, head, dockerCaps(), Options{})
	if p.Kind != KindChange || len(p.Errors) > 0 {
		t.Fatalf("kind %q, errors %v", p.Kind, p.Errors)
	}
	by := map[string]*SandboxChange{}
	var names []string
	for _, c := range p.Sandboxes {
		by[c.Sandbox] = c
		names = append(names, c.Sandbox)
		if len(c.Steps) != 0 {
			t.Errorf("%s: steps %v, want none", c.Sandbox, c.Steps)
		}
	}
	if want := []string{"api", "gone", "new", "same"}; !slices.Equal(names, want) {
		t.Fatalf("sandboxes %v, want %v", names, want)
	}
	if c := by["same"]; c.Action != ActionNoOp || len(c.Changes) != 0 {
		t.Errorf("same: %s %v", c.Action, c.Changes)
	}
	if c := by["gone"]; c.Action != ActionDestroy {
		t.Errorf("gone: %s", c.Action)
	}
	var got []string
	for _, d := range by["api"].Changes {
		got = append(got, d.String())
		if d.Path == "network.allow" && !d.WidensEgress {
			t.Errorf("api: %s not marked widens egress", d)
		}
	}
	if want := []string{`+ env.X: "1"`, `+ network.allow: "b.example.com"`}; !slices.Equal(got, want) || by["api"].Action != ActionReplace {
		t.Errorf("api: %s %v, want replace %v", by["api"].Action, got, want)
	}
	var widens []string
	for _, w := range by["api"].Widenings {
		widens = append(widens, w.What)
	}
	if want := []string{"egress to b.example.com"}; !slices.Equal(widens, want) {
		t.Errorf("api widenings %v, want %v", widens, want)
	}
	widens = nil
	for _, w := range by["new"].Widenings {
		widens = append(widens, w.What)
	}
	if by["new"].Action != ActionCreate || !slices.Contains(widens, "egress to api.anthropic.com (agent claude)") ||
		!slices.Contains(widens, "host path /data mounted at /data, read-write") {
		t.Errorf("new: %s, widenings %v", by["new"].Action, widens)
	}
}
