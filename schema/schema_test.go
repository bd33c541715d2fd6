package schema

import (
	"testing"

	"github.com/sbxhq/sbx/internal/golden"
)

func TestCompile(t *testing.T) {
	s, err := Compile()
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Raw()["$schema"]; got != "http://json-schema.org/draft-07/schema#" {
		t.Errorf("$schema = %v, want draft-07", got)
	}
}

// TestEveryPropertyDocumented walks the schema: every property, at every
// level and in every alternative, has a description and examples, so an
// editor's hover always says something useful.
func TestEveryPropertyDocumented(t *testing.T) {
	s, err := Compile()
	if err != nil {
		t.Fatal(err)
	}
	count := 0
	var walk func(path string, m map[string]any)
	walk = func(path string, m map[string]any) {
		if props, ok := m["properties"].(map[string]any); ok {
			for name, p := range props {
				pm, _ := p.(map[string]any)
				field := path + "." + name
				count++
				target := s.deref(pm)
				if str(pm["description"]) == "" && str(target["description"]) == "" {
					t.Errorf("%s has no description", field)
				}
				ex, _ := pm["examples"].([]any)
				tex, _ := target["examples"].([]any)
				if len(ex) == 0 && len(tex) == 0 {
					t.Errorf("%s has no examples", field)
				}
				walk(field, target)
			}
		}
		for _, key := range []string{"items", "additionalProperties"} {
			if sub, ok := m[key].(map[string]any); ok {
				walk(path+"."+key, s.deref(sub))
			}
		}
		for _, key := range []string{"oneOf", "anyOf", "allOf"} {
			alts, _ := m[key].([]any)
			for _, a := range alts {
				am, _ := a.(map[string]any)
				walk(path, s.deref(am))
			}
		}
	}
	walk("", s.Raw())
	if count < 40 {
		t.Errorf("walked only %d properties; the walk is broken", count)
	}
}

// TestReferenceInSync keeps docs/sandbox-yaml.md generated from the schema.
func TestReferenceInSync(t *testing.T) {
	s, err := Compile()
	if err != nil {
		t.Fatal(err)
	}
	got := s.Reference()
	golden.Check(t, "../docs/sandbox-yaml.md", []byte(got))
}

func TestSuggest(t *testing.T) {
	tests := []struct {
		in   string
		want string
	}{
		{"tempalte", "template"},
		{"alow", "allow"},
		{"claud", "claude"},
		{"xyz", ""},
		{"maxIteration", "maxIterations"},
	}
	cands := []string{"template", "allow", "claude", "maxIterations", "agent"}
	for _, tt := range tests {
		if got := Suggest(tt.in, cands); got != tt.want {
			t.Errorf("Suggest(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
