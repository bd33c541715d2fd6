package schema

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"go.yaml.in/yaml/v3"
)

// TestAgreesWithLibrary holds the validator to the library it replaced
// (library_test.go): on every sandbox file in the repository, and on
// thousands of variations of them (every value replaced by values of
// every type and of the wrong form, every key removed, an unknown key
// added to every mapping), both report the same errors.
func TestAgreesWithLibrary(t *testing.T) {
	s, err := Compile()
	if err != nil {
		t.Fatal(err)
	}
	lib, err := libCompile()
	if err != nil {
		t.Fatal(err)
	}
	docs := repositoryFiles(t)
	if len(docs) < 20 {
		t.Fatalf("found only %d sandbox files; the search is broken", len(docs))
	}
	cases, failing := 0, 0
	check := func(name string, v any) {
		t.Helper()
		cases++
		want, got := sorted(lib.Validate(v)), sorted(s.Validate(v))
		if len(want) > 0 {
			failing++
		}
		if diff := cmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("%s: errors differ from the library's (-library +validator):\n%s", name, diff)
		}
	}
	for name, doc := range docs {
		check(name, doc)
		for i, v := range variations(doc) {
			check(fmt.Sprintf("%s, variation %d: %s", name, i, v.what), v.doc)
		}
	}
	// The variations must exercise both outcomes, or they test nothing.
	if cases < 2000 || failing < cases/4 || failing == cases {
		t.Errorf("%d cases, %d of them invalid: the variations are too few or too alike", cases, failing)
	}
	t.Logf("%d documents, %d invalid", cases, failing)
}

// repositoryFiles decodes the YAML sandbox files of the repository (the
// examples and spec's test files) as spec hands them to Validate.
func repositoryFiles(t *testing.T) map[string]any {
	t.Helper()
	docs := map[string]any{}
	for _, dir := range []string{"../examples", "../spec/testdata"} {
		err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".yaml") {
				return err
			}
			data, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			var v any
			if yaml.Unmarshal(data, &v) != nil || !plain(v) {
				return nil // spec refuses it before the schema sees it
			}
			docs[path] = v
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return docs
}

// plain reports whether v holds only what spec passes to Validate: maps
// with string keys, slices, strings, bools, ints, float64s and nil.
func plain(v any) bool {
	switch v := v.(type) {
	case map[string]any:
		for _, e := range v {
			if !plain(e) {
				return false
			}
		}
		return true
	case []any:
		for _, e := range v {
			if !plain(e) {
				return false
			}
		}
		return true
	case nil, string, bool, int, float64:
		return true
	}
	return false
}

type variation struct {
	what string
	doc  any
}

// replacements are the values each value is replaced by: every type,
// bounds' neighbours and strings of the wrong form.
var replacements = []any{
	nil, true, false, 0, 1, -1, 2, 65536, 1.5, 0.25, -0.5, "", "x", "claude", "X Y", "a/b", "1.5", "10m", "0s",
	"https://example.com", "*.example.com", "10.0.0.0/8", "ghcr.io/a/b:1", strings.Repeat("a", 70),
	[]any{}, []any{"x"}, []any{1}, []any{map[string]any{}}, map[string]any{}, map[string]any{"x": 1},
	map[string]any{"path": "x"}, map[string]any{"env": "x", "command": "y"},
}

// variations of a document, each a fresh copy with one change.
func variations(doc any) []variation {
	var out []variation
	for _, p := range paths(doc, nil) {
		for _, r := range replacements {
			out = append(out, variation{fmt.Sprintf("%s = %#v", strings.Join(p, "."), r), set(doc, p, r)})
		}
		if len(p) > 0 {
			out = append(out, variation{"remove " + strings.Join(p, "."), set(doc, p, removed{})})
		}
	}
	for _, p := range paths(doc, nil) {
		if _, ok := get(doc, p).(map[string]any); ok {
			out = append(out, variation{"unknown key in " + strings.Join(p, "."), set(doc, append(slices.Clone(p), "tempalte"), "x")})
		}
	}
	return out
}

// removed, set at a path, removes the key or item there.
type removed struct{}

// paths lists the path of every value in v, v's own (nil) first.
func paths(v any, at []string) [][]string {
	out := [][]string{slices.Clone(at)}
	switch v := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			out = append(out, paths(v[k], append(at, k))...)
		}
	case []any:
		for i, e := range v {
			out = append(out, paths(e, append(at, fmt.Sprint(i)))...)
		}
	}
	return out
}

func get(v any, p []string) any {
	for _, tok := range p {
		switch c := v.(type) {
		case map[string]any:
			v = c[tok]
		case []any:
			var i int
			fmt.Sscan(tok, &i)
			v = c[i]
		}
	}
	return v
}

// set returns a deep copy of v with the value at p replaced by r (or
// removed); a missing last key of a mapping is added.
func set(v any, p []string, r any) any {
	if len(p) == 0 {
		return r
	}
	switch c := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(c)+1)
		for k, e := range c {
			m[k] = e
		}
		if _, ok := r.(removed); ok && len(p) == 1 {
			delete(m, p[0])
		} else {
			m[p[0]] = set(c[p[0]], p[1:], r)
		}
		return m
	case []any:
		var i int
		fmt.Sscan(p[0], &i)
		l := slices.Clone(c)
		if _, ok := r.(removed); ok && len(p) == 1 {
			return slices.Delete(l, i, i+1)
		}
		l[i] = set(c[i], p[1:], r)
		return l
	}
	return v
}

func sorted(es []Error) []Error {
	out := slices.Clone(es)
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if c := slices.Compare(a.Location, b.Location); c != 0 {
			return c < 0
		}
		if a.Anchor != b.Anchor {
			return a.Anchor < b.Anchor
		}
		return a.Message < b.Message
	})
	return out
}
