package schema

import (
	"fmt"
	"strings"

	"github.com/google/go-cmp/cmp"
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

// TestValidate checks the mapping of the library's errors onto sbx's
// messages for each keyword the schema uses, and their locations; spec's
// golden files (spec/testdata/invalid) check them in context.
func TestValidate(t *testing.T) {
	s, err := Compile()
	if err != nil {
		t.Fatal(err)
	}
	valid := func(extra map[string]any) map[string]any {
		doc := map[string]any{"version": 1, "agent": "claude"}
		for k, v := range extra {
			doc[k] = v
		}
		return doc
	}
	tests := []struct {
		name string
		doc  any
		want []Error
	}{
		{"valid", valid(nil), nil},
		{"required", map[string]any{"version": 1}, []Error{{Location: []string{"agent"}, Anchor: AtParent, Message: "required key is missing"}}},
		{"const", valid(map[string]any{"version": 2}), []Error{{Location: []string{"version"}, Message: "must be 1, got integer 2"}}},
		{"enum, with a suggestion", valid(map[string]any{"agent": "claud"}), []Error{{Location: []string{"agent"}, Message: `string "claud" is not one of: ` + enumOf(t, s, "agent") + ` (did you mean "claude"?)`}}},
		{"type", valid(map[string]any{"name": 5}), []Error{{Location: []string{"name"}, Message: "expected string, got integer 5"}}},
		{"unknown key, Compose's word", valid(map[string]any{"environment": map[string]any{}}), []Error{{Location: []string{"environment"}, Anchor: AtKey, Message: `unknown key "environment" (did you mean "env"?)`}}},
		{"unknown key, a typo", valid(map[string]any{"tempalte": "x"}), []Error{{Location: []string{"tempalte"}, Anchor: AtKey, Message: `unknown key "tempalte" (did you mean "template"?)`}}},
		{"property name", valid(map[string]any{"env": map[string]any{"1X": "v"}}), []Error{{Location: []string{"env", "1X"}, Anchor: AtKey, Message: `invalid name "1X": ` + hintOf(t, s, "envName")}}},
		{"minLength", valid(map[string]any{"name": "a"}), []Error{{Location: []string{"name"}, Message: "must be at least 2 characters long"}}},
		{"maxLength", valid(map[string]any{"name": strings.Repeat("a", 64)}), []Error{{Location: []string{"name"}, Message: "must be at most 63 characters long"}}},
		{"minimum", valid(map[string]any{"ports": []any{0}}), []Error{{Location: []string{"ports", "0"}, Message: "must be at least 1, got 0"}}},
		{"maximum", valid(map[string]any{"resources": map[string]any{"cpus": 300}}), []Error{{Location: []string{"resources", "cpus"}, Message: "must be at most 256, got 300"}}},
		{"exclusiveMinimum", valid(map[string]any{"resources": map[string]any{"cpus": 0}}), []Error{{Location: []string{"resources", "cpus"}, Message: "must be greater than 0, got 0"}}},
		{"minItems", valid(map[string]any{"loop": map[string]any{"prompt": "P.md", "maxIterations": 3, "command": []any{}}}), []Error{{Location: []string{"loop", "command"}, Message: "must have at least 1 item(s)"}}},
		{"oneOf of required keys, both", valid(map[string]any{"secrets": map[string]any{"K": map[string]any{"env": "K", "command": []any{"x"}}}}), []Error{{Location: []string{"secrets", "K"}, Message: "set exactly one of: command, env, file"}}},
		{"oneOf of required keys, neither", valid(map[string]any{"secrets": map[string]any{"K": map[string]any{}}}), []Error{{Location: []string{"secrets", "K"}, Message: "set exactly one of: command, env, file"}}},
		{"oneOf of types, the branch of the value's type", valid(map[string]any{"workspace": map[string]any{"path": ""}}), []Error{{Location: []string{"workspace", "path"}, Message: "must be at least 1 characters long"}}},
		{"oneOf of types, none", valid(map[string]any{"workspace": true}), []Error{{Location: []string{"workspace"}, Message: "expected object or string, got boolean true"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, s.Validate(tt.doc)); diff != "" {
				t.Errorf("Validate (-want +got):\n%s", diff)
			}
		})
	}
}

// enumOf lists a top-level property's enum as a message does.
func enumOf(t *testing.T, s *Schema, prop string) string {
	t.Helper()
	var want []string
	for _, v := range s.at("#/properties/" + prop)["enum"].([]any) {
		want = append(want, fmt.Sprint(v))
	}
	return strings.Join(want, ", ")
}

// hintOf returns a definition's x-patternHint.
func hintOf(t *testing.T, s *Schema, def string) string {
	t.Helper()
	h, ok := s.at("#/definitions/" + def)["x-patternHint"].(string)
	if !ok {
		t.Fatalf("definition %s has no x-patternHint", def)
	}
	return h
}

// TestKeywordsMapped: every keyword the schema uses has its message of
// sbx's (or is an annotation), so no library wording reaches a user. A
// new keyword needs a case in collect or leafMessage, and here.
func TestKeywordsMapped(t *testing.T) {
	mapped := map[string]bool{
		// Wrappers and applicators (collect, collectAlternatives).
		"$ref": true, "allOf": true, "anyOf": true, "oneOf": true, "properties": true, "items": true, "definitions": true,
		"additionalProperties": true, "required": true, "propertyNames": true,
		// Leaves (leafMessage).
		"type": true, "enum": true, "const": true, "pattern": true, "minLength": true, "maxLength": true,
		"minimum": true, "maximum": true, "exclusiveMinimum": true, "exclusiveMaximum": true,
		"minItems": true, "maxItems": true, "minProperties": true, "uniqueItems": true,
		// Annotations.
		"$schema": true, "$id": true, "title": true, "description": true, "examples": true, "default": true,
		"x-order": true, "x-patternHint": true,
	}
	s, err := Compile()
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	var walk func(path string, v any)
	walk = func(path string, v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, e := range v {
				seen++
				if !mapped[k] {
					t.Errorf("%s: keyword %q has no message of sbx's", path, k)
				}
				switch k {
				case "properties", "definitions":
					for name, sub := range e.(map[string]any) {
						walk(path+"/"+k+"/"+name, sub)
					}
				case "enum", "const", "examples", "default", "required", "x-order":
				default:
					walk(path+"/"+k, e)
				}
			}
		case []any:
			for i, e := range v {
				walk(fmt.Sprintf("%s/%d", path, i), e)
			}
		}
	}
	walk("#", s.Raw())
	if seen < 200 {
		t.Errorf("walked only %d keywords; the walk is broken", seen)
	}
}
