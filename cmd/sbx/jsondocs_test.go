package main

import (
	"os"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sbxhq/sbx/loop"
	"github.com/sbxhq/sbx/netlog"
	"github.com/sbxhq/sbx/session"
	"github.com/sbxhq/sbx/spec"
)

// TestJSONDocs keeps each documented JSON format and its Go types in step:
// every field the type marshals has a row in the doc, and every row names
// a field of one of the types, so neither can change alone.
func TestJSONDocs(t *testing.T) {
	tests := []struct {
		doc   string
		types []any
	}{
		{"status-json.md", []any{session.StatusReport{}, session.Status{}}},
		{"ls-json.md", []any{session.Listing{}, session.Listed{}}},
		{"checkpoint-json.md", []any{checkpointsDoc{}, session.SavedCheckpoint{}}},
		{"netlog-json.md", []any{netlogLine{}}},
		{"loop-status-json.md", []any{loop.Status{}, loop.Record{}, netlog.Denial{}}},
		{"validate-json.md", []any{validateReport{}, validatedSandbox{}, spec.Diagnostic{}}},
	}
	for _, tt := range tests {
		t.Run(tt.doc, func(t *testing.T) {
			data, err := os.ReadFile("../../docs/" + tt.doc)
			if err != nil {
				t.Fatal(err)
			}
			var fields []string
			for _, v := range tt.types {
				fields = append(fields, jsonFields(reflect.TypeOf(v))...)
			}
			sort.Strings(fields)
			if diff := cmp.Diff(fields, documentedFields(string(data))); diff != "" {
				t.Errorf("docs/%s rows vs the Go types' JSON fields (-types +doc):\n%s", tt.doc, diff)
			}
		})
	}
}

// jsonFields lists the JSON names a struct type marshals (unexported and
// embedded-pointer subtleties aside, which these types do not use).
func jsonFields(t reflect.Type) []string {
	var out []string
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if f.Anonymous && name == "" && f.Type.Kind() == reflect.Struct {
			out = append(out, jsonFields(f.Type)...) // promoted, as encoding/json does
			continue
		}
		switch name {
		case "-":
			continue
		case "":
			name = f.Name
		}
		out = append(out, name)
	}
	return out
}

var docRow = regexp.MustCompile("^\\| (`[^|]+) \\|")

// documentedFields lists the field names in the first cell of the rows of
// a doc's field tables (those headed "| field |"): "| `a`, `b` | type |
// meaning |", sorted.
func documentedFields(doc string) []string {
	var out []string
	inTable := false
	for _, line := range strings.Split(doc, "\n") {
		switch {
		case strings.HasPrefix(line, "| field |"):
			inTable = true
			continue
		case !strings.HasPrefix(line, "|"):
			inTable = false
		}
		m := docRow.FindStringSubmatch(line)
		if !inTable || m == nil {
			continue
		}
		for _, name := range strings.Split(m[1], ",") {
			out = append(out, strings.Trim(strings.TrimSpace(name), "`"))
		}
	}
	sort.Strings(out)
	return out
}
