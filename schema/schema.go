// Package schema holds the JSON Schema of sandbox.yaml (draft-07, embedded so
// that `sbx schema` prints exactly what the validator enforces) and turns the
// validator's errors into short messages anchored at a location in the
// document.
package schema

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"math/big"
	"sort"
	"strings"
	"sync"
)

// JSON is the schema document, as printed by `sbx schema`.
//
//go:embed sandbox.schema.json
var JSON []byte

// Anchor says which part of the document an error points at.
type Anchor int

const (
	// AtValue points at the value found at Location.
	AtValue Anchor = iota
	// AtKey points at the key whose name is the last element of Location.
	AtKey
	// AtParent points at the mapping found at Location (a key is missing).
	AtParent
)

// Error is one schema violation. Location holds the keys and indexes from the
// document root to the offending value, unescaped.
type Error struct {
	Location []string
	Anchor   Anchor
	Message  string
}

// Schema is the compiled schema. It is safe for concurrent use.
type Schema struct {
	root *node
	// raw is the decoded document, decoded when first asked for: only the
	// reference and the tests read it, and decoding it costs as much as
	// compiling.
	raw func() map[string]any
}

// Compile returns the validator of the embedded schema: compiled.go,
// which `go test ./schema -update` generates from it (TestCompiledInSync),
// so that it costs no parsing. Compile it once per process, and only in
// one that validates: nothing else in sbx needs it.
func Compile() (*Schema, error) {
	root := compiled()
	raw := sync.OnceValue(func() map[string]any {
		var raw map[string]any
		if err := json.Unmarshal(JSON, &raw); err != nil {
			// TestCompiledInSync decodes the same bytes.
			panic(fmt.Sprintf("embedded schema: %v", err))
		}
		return raw
	})
	return &Schema{root: root, raw: raw}, nil
}

// Raw returns the decoded schema document (shared; do not modify).
func (s *Schema) Raw() map[string]any { return s.raw() }

// Validate checks v, a document decoded to maps with string keys, slices,
// strings, bools, ints and float64s. It returns every violation, most
// specific first and de-duplicated, or nil.
func (s *Schema) Validate(v any) []Error {
	f := s.root.validate(v, nil)
	if f == nil {
		return nil
	}
	var out []Error
	collect(f, &out)
	seen := map[string]bool{}
	uniq := out[:0]
	for _, e := range out {
		k := strings.Join(e.Location, "\x00") + "\x01" + fmt.Sprint(e.Anchor) + "\x01" + e.Message
		if !seen[k] {
			seen[k] = true
			uniq = append(uniq, e)
		}
	}
	return uniq
}

// collect flattens the failure tree into leaf errors with readable
// messages.
func collect(f *failure, out *[]Error) {
	switch f.kind {
	case kindGroup, kindAllOf, kindRef:
		for _, c := range f.causes {
			collect(c, out)
		}
		return
	case kindOneOf, kindAnyOf:
		collectAlternatives(f, out)
		return
	case kindAdditional:
		allowed := f.at.deref().propNames
		for _, p := range f.names {
			msg := fmt.Sprintf("unknown key %q", p)
			if m := SuggestKey(p, allowed); m != "" {
				msg += fmt.Sprintf(" (did you mean %q?)", m)
			}
			*out = append(*out, Error{Location: appendLoc(f.loc, p), Anchor: AtKey, Message: msg})
		}
		return
	case kindRequired:
		for _, m := range f.names {
			*out = append(*out, Error{Location: appendLoc(f.loc, m), Anchor: AtParent, Message: "required key is missing"})
		}
		return
	case kindPropertyNames:
		*out = append(*out, Error{
			Location: appendLoc(f.loc, f.key),
			Anchor:   AtKey,
			Message:  fmt.Sprintf("invalid name %q: %s", f.key, patternHint(f.at)),
		})
		return
	}
	*out = append(*out, Error{Location: f.loc, Anchor: AtValue, Message: leafMessage(f)})
}

// collectAlternatives reports a failed oneOf/anyOf. When the value's type
// matches some branches, those branches' own errors are the useful ones;
// when the branches differ only in which keys are required, the message
// names the keys; otherwise it lists the accepted types.
func collectAlternatives(f *failure, out *[]Error) {
	exactly := f.kind == kindOneOf
	if f.both {
		if keys := f.at.requiredOnly; keys != nil {
			*out = append(*out, Error{Location: f.loc, Anchor: AtValue, Message: "set exactly one of: " + strings.Join(keys, ", ")})
			return
		}
		*out = append(*out, Error{Location: f.loc, Anchor: AtValue, Message: "matches more than one accepted form"})
		return
	}
	var typed []*failure
	var wants []string
	var required []string
	for _, c := range f.causes {
		leaf := leaf(c)
		here := sameLoc(leaf.loc, f.loc)
		switch leaf.kind {
		case kindType:
			if here {
				wants = append(wants, leaf.names...)
				continue
			}
		case kindRequired:
			if here && f.at.requiredOnly != nil {
				required = append(required, leaf.names...)
				continue
			}
		}
		typed = append(typed, c)
	}
	switch {
	case len(typed) > 0:
		for _, c := range typed {
			collect(c, out)
		}
	case len(required) > 0:
		sort.Strings(required)
		word := "at least"
		if exactly {
			word = "exactly"
		}
		*out = append(*out, Error{Location: f.loc, Anchor: AtValue, Message: "set " + word + " one of: " + strings.Join(uniqStrings(required), ", ")})
	default:
		sort.Strings(wants)
		*out = append(*out, Error{Location: f.loc, Anchor: AtValue,
			Message: fmt.Sprintf("expected %s, got %s", strings.Join(uniqStrings(wants), " or "), describe(f.got))})
	}
}

// leaf looks through wrapper failures ($ref, groups) with a single cause.
func leaf(f *failure) *failure {
	for {
		switch f.kind {
		case kindGroup, kindAllOf, kindRef:
			if len(f.causes) != 1 {
				return f
			}
			f = f.causes[0]
		default:
			return f
		}
	}
}

func leafMessage(f *failure) string {
	got := f.got
	switch f.kind {
	case kindType:
		return fmt.Sprintf("expected %s, got %s", strings.Join(f.names, " or "), describe(got))
	case kindEnum:
		var want []string
		for _, w := range f.at.enum {
			want = append(want, fmt.Sprint(w))
		}
		msg := fmt.Sprintf("%s is not one of: %s", describe(got), strings.Join(want, ", "))
		if g, ok := got.(string); ok {
			if m := Suggest(g, want); m != "" {
				msg += fmt.Sprintf(" (did you mean %q?)", m)
			}
		}
		return msg
	case kindConst:
		return fmt.Sprintf("must be %v, got %s", f.at.constVal, describe(got))
	case kindPattern:
		return fmt.Sprintf("invalid value %q: %s", got, patternHint(f.at))
	case kindMinLength:
		return fmt.Sprintf("must be at least %d characters long", f.n)
	case kindMaxLength:
		return fmt.Sprintf("must be at most %d characters long", f.n)
	case kindMinimum:
		return fmt.Sprintf("must be at least %s, got %s", ratString(ratOf(f.at.minimum)), ratString(f.num))
	case kindMaximum:
		return fmt.Sprintf("must be at most %s, got %s", ratString(ratOf(f.at.maximum)), ratString(f.num))
	case kindExclusiveMinimum:
		return fmt.Sprintf("must be greater than %s, got %s", ratString(ratOf(f.at.exclusiveMinimum)), ratString(f.num))
	case kindMinItems:
		return fmt.Sprintf("must have at least %d item(s)", f.n)
	}
	// kindInvalid: a value JSON cannot hold (spec never passes one), in
	// the library's words.
	var ptr strings.Builder
	for _, tok := range f.loc {
		ptr.WriteString("/" + escape(tok))
	}
	return fmt.Sprintf("at '%s': invalid jsonType %T", ptr.String(), got)
}

// patternHint explains a pattern in words: the schema object's
// "x-patternHint", else the pattern itself.
func patternHint(n *node) string {
	n = n.deref()
	if n.hint != "" {
		return n.hint
	}
	if n.pattern != "" {
		return "must match " + n.pattern
	}
	return "has the wrong form"
}

// at returns the schema object a validator SchemaURL points to.
func (s *Schema) at(schemaURL string) map[string]any {
	m, _ := s.atAny(schemaURL).(map[string]any)
	return s.deref(m)
}

// atAny returns the schema value at a SchemaURL's fragment (a JSON
// pointer).
func (s *Schema) atAny(schemaURL string) any {
	_, frag, _ := strings.Cut(schemaURL, "#")
	var toks []string
	for _, tok := range strings.Split(strings.TrimPrefix(frag, "/"), "/") {
		if tok != "" {
			toks = append(toks, strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~"))
		}
	}
	return lookup(s.raw(), toks)
}

func (s *Schema) deref(m map[string]any) map[string]any {
	for i := 0; i < 8 && m != nil; i++ {
		ref, ok := m["$ref"].(string)
		if !ok {
			return m
		}
		m = s.at(ref)
	}
	return m
}

func appendLoc(loc []string, s string) []string {
	out := make([]string, len(loc), len(loc)+1)
	copy(out, loc)
	return append(out, s)
}

func sameLoc(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func uniqStrings(ss []string) []string {
	var out []string
	for i, s := range ss {
		if i == 0 || s != ss[i-1] {
			out = append(out, s)
		}
	}
	return out
}

// lookup walks a decoded JSON document by keys and indexes.
func lookup(doc any, loc []string) any {
	cur := doc
	for _, tok := range loc {
		switch c := cur.(type) {
		case map[string]any:
			cur = c[tok]
		case []any:
			var i int
			if _, err := fmt.Sscan(tok, &i); err != nil || i < 0 || i >= len(c) {
				return nil
			}
			cur = c[i]
		default:
			return nil
		}
	}
	return cur
}

// describe names a value's type, with the value when it is short.
func describe(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case string:
		if len(x) > 40 {
			return "string"
		}
		return fmt.Sprintf("string %q", x)
	case bool:
		return fmt.Sprintf("boolean %v", x)
	case int, int64, uint64:
		return fmt.Sprintf("integer %v", x)
	case float64:
		return fmt.Sprintf("number %v", x)
	case []any:
		return "list"
	case map[string]any:
		return "mapping"
	}
	return fmt.Sprintf("%T", v)
}

func ratString(r *big.Rat) string {
	if r == nil {
		return "?"
	}
	if r.IsInt() {
		return r.Num().String()
	}
	return r.FloatString(3)
}
