package schema

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
)

// Reference renders the file reference (docs/sandbox-yaml.md) from the
// schema's descriptions, defaults and examples, so the document cannot drift
// from what the validator enforces.
func (s *Schema) Reference() string {
	var b strings.Builder
	b.WriteString("# sandbox.yaml reference\n\n")
	b.WriteString("<!-- Generated from schema/sandbox.schema.json by `go test ./schema -update`; do not edit. -->\n\n")
	if d, ok := s.raw["description"].(string); ok {
		b.WriteString(d + "\n\n")
	}
	b.WriteString("| Field | Type | Default | Description | Examples |\n|---|---|---|---|---|\n")
	s.rows(&b, "", s.raw, map[string]bool{})
	return b.String()
}

func (s *Schema) rows(b *strings.Builder, path string, obj map[string]any, seen map[string]bool) {
	props, _ := obj["properties"].(map[string]any)
	names := make([]string, 0, len(props))
	for k := range props {
		names = append(names, k)
	}
	sort.Strings(names)
	if order, ok := obj["x-order"].([]any); ok {
		// x-order first; a property it leaves out still gets its row.
		var ordered []string
		listed := map[string]bool{}
		for _, o := range order {
			ordered = append(ordered, fmt.Sprint(o))
			listed[fmt.Sprint(o)] = true
		}
		for _, n := range names {
			if !listed[n] {
				ordered = append(ordered, n)
			}
		}
		names = ordered
	}
	required := map[string]bool{}
	if rs, ok := obj["required"].([]any); ok {
		for _, r := range rs {
			required[fmt.Sprint(r)] = true
		}
	}
	for _, name := range names {
		p, _ := props[name].(map[string]any)
		p = s.deref(p)
		field := name
		if path != "" {
			field = path + "." + name
		}
		desc := oneLine(str(p["description"]))
		if required[name] {
			desc = "**Required.** " + desc
		}
		fmt.Fprintf(b, "| `%s` | %s | %s | %s | %s |\n", field, s.typeOf(p), code(p["default"]), desc, examples(p["examples"]))
		if seen[field] {
			continue
		}
		seen[field] = true
		// Recurse into object forms, including the object branch of a
		// string-or-object field, and into list items that are objects.
		for _, sub := range s.objectForms(p) {
			s.rows(b, field, sub, seen)
		}
		if items, ok := p["items"].(map[string]any); ok {
			for _, sub := range s.objectForms(s.deref(items)) {
				s.rows(b, field+"[]", sub, seen)
			}
		}
		if ap, ok := p["additionalProperties"].(map[string]any); ok {
			for _, sub := range s.objectForms(s.deref(ap)) {
				s.rows(b, field+".NAME", sub, seen)
			}
		}
	}
}

// objectForms returns the object schemas a property may take.
func (s *Schema) objectForms(p map[string]any) []map[string]any {
	var out []map[string]any
	if _, ok := p["properties"]; ok {
		out = append(out, p)
	}
	for _, key := range []string{"oneOf", "anyOf"} {
		alts, _ := p[key].([]any)
		for _, a := range alts {
			m, _ := a.(map[string]any)
			m = s.deref(m)
			if _, ok := m["properties"]; ok {
				out = append(out, m)
			}
		}
	}
	return out
}

func (s *Schema) typeOf(p map[string]any) string {
	if e, ok := p["enum"].([]any); ok {
		var vs []string
		for _, v := range e {
			vs = append(vs, fmt.Sprintf("`%v`", v))
		}
		return strings.Join(vs, " \\| ")
	}
	if c, ok := p["const"]; ok {
		return fmt.Sprintf("`%v`", c)
	}
	var types []string
	switch t := p["type"].(type) {
	case string:
		types = append(types, t)
	case []any:
		for _, x := range t {
			types = append(types, fmt.Sprint(x))
		}
	}
	for _, key := range []string{"oneOf", "anyOf"} {
		alts, _ := p[key].([]any)
		for _, a := range alts {
			m, _ := a.(map[string]any)
			if t := s.typeOf(s.deref(m)); t != "" && !strings.Contains(strings.Join(types, " or "), t) {
				types = append(types, t)
			}
		}
	}
	if len(types) == 1 && types[0] == "array" {
		if items, ok := p["items"].(map[string]any); ok {
			if it := s.typeOf(s.deref(items)); it != "" {
				return "list of " + it
			}
		}
	}
	return strings.Join(types, " or ")
}

func str(v any) string {
	s, _ := v.(string)
	return s
}

func oneLine(s string) string {
	return strings.ReplaceAll(strings.Join(strings.Fields(s), " "), "|", "\\|")
}

func code(v any) string {
	if v == nil {
		return ""
	}
	j, _ := json.Marshal(v)
	return "`" + strings.ReplaceAll(string(j), "|", "\\|") + "`"
}

func examples(v any) string {
	list, _ := v.([]any)
	var out []string
	for i, e := range list {
		if i == 3 {
			break
		}
		out = append(out, code(e))
	}
	return strings.Join(out, "<br>")
}
