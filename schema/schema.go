// Package schema holds the JSON Schema of sandbox.yaml (draft-07, embedded so
// that `sbx schema` prints exactly what the validator enforces) and turns the
// validator's errors into short messages anchored at a location in the
// document.
//
// The validator is github.com/santhosh-tekuri/jsonschema/v6 (draft-07),
// compiled once per process and only by a process that validates; sbx's
// own part is the mapping of the library's error tree (its kind package)
// onto sbx's messages, and the reference generated from the schema.
package schema

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"math/big"
	"sort"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
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
	compiled *jsonschema.Schema
	raw      map[string]any
}

// schemaURL is the name the library compiles the schema under.
const schemaURL = "sandbox.schema.json"

// compiled is the embedded schema, compiled by the first Compile of the
// process: only processes that validate compile it.
var compiled = sync.OnceValues(func() (*Schema, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(JSON))
	if err != nil {
		return nil, fmt.Errorf("embedded schema: %v", err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft7)
	if err := c.AddResource(schemaURL, doc); err != nil {
		return nil, fmt.Errorf("embedded schema: %v", err)
	}
	sch, err := c.Compile(schemaURL)
	if err != nil {
		return nil, fmt.Errorf("embedded schema: %v", err)
	}
	var raw map[string]any
	if err := json.Unmarshal(JSON, &raw); err != nil {
		return nil, fmt.Errorf("embedded schema: %v", err)
	}
	return &Schema{compiled: sch, raw: raw}, nil
})

// Compile returns the validator of the embedded schema, compiled once per
// process.
func Compile() (*Schema, error) { return compiled() }

// Raw returns the decoded schema document (shared; do not modify).
func (s *Schema) Raw() map[string]any { return s.raw }

// Validate checks v, a document decoded to maps with string keys, slices,
// strings, bools, ints and float64s. It returns every violation, most
// specific first and de-duplicated, or nil.
func (s *Schema) Validate(v any) []Error {
	err := s.compiled.Validate(v)
	if err == nil {
		return nil
	}
	ve, ok := err.(*jsonschema.ValidationError)
	if !ok {
		return []Error{{Message: err.Error()}}
	}
	var out []Error
	s.collect(ve, v, &out)
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

// collect flattens the error tree into leaf errors with readable messages.
func (s *Schema) collect(ve *jsonschema.ValidationError, doc any, out *[]Error) {
	switch k := ve.ErrorKind.(type) {
	case *kind.Schema, *kind.Group, *kind.AllOf, *kind.Reference:
		for _, c := range ve.Causes {
			s.collect(c, doc, out)
		}
		return
	case *kind.OneOf, *kind.AnyOf:
		s.collectAlternatives(ve, doc, out)
		return
	case *kind.AdditionalProperties:
		allowed := s.propertiesAt(ve.SchemaURL)
		for _, p := range k.Properties {
			msg := fmt.Sprintf("unknown key %q", p)
			if m := SuggestKey(p, allowed); m != "" {
				msg += fmt.Sprintf(" (did you mean %q?)", m)
			}
			*out = append(*out, Error{Location: appendLoc(ve.InstanceLocation, p), Anchor: AtKey, Message: msg})
		}
		return
	case *kind.Required:
		for _, m := range k.Missing {
			*out = append(*out, Error{Location: appendLoc(ve.InstanceLocation, m), Anchor: AtParent, Message: "required key is missing"})
		}
		return
	case *kind.PropertyNames:
		// jsonschema v6.0.3 reuses the slice behind InstanceLocation for
		// propertyNames errors, so it can name another key by the time it
		// is read; the schema path says which object it is.
		*out = append(*out, Error{
			Location: appendLoc(instanceOf(ve.SchemaURL), k.Property),
			Anchor:   AtKey,
			Message:  fmt.Sprintf("invalid name %q: %s", k.Property, s.patternHint(ve)),
		})
		return
	}
	*out = append(*out, Error{Location: ve.InstanceLocation, Anchor: AtValue, Message: s.leafMessage(ve, lookup(doc, ve.InstanceLocation))})
}

// collectAlternatives reports a failed oneOf/anyOf. When the value's type
// matches some branches, those branches' own errors are the useful ones;
// when the branches differ only in which keys are required, the message
// names the keys; otherwise it lists the accepted types.
func (s *Schema) collectAlternatives(ve *jsonschema.ValidationError, doc any, out *[]Error) {
	exactly := false
	if k, ok := ve.ErrorKind.(*kind.OneOf); ok {
		exactly = true
		if len(k.Subschemas) > 1 {
			if keys := s.requiredOnly(ve.SchemaURL); keys != nil {
				*out = append(*out, Error{Location: ve.InstanceLocation, Anchor: AtValue, Message: "set exactly one of: " + strings.Join(keys, ", ")})
				return
			}
			*out = append(*out, Error{Location: ve.InstanceLocation, Anchor: AtValue, Message: "matches more than one accepted form"})
			return
		}
	}
	var typed []*jsonschema.ValidationError
	var wants []string
	var required []string
	for _, c := range ve.Causes {
		leaf := leaf(c)
		here := sameLoc(leaf.InstanceLocation, ve.InstanceLocation)
		switch k := leaf.ErrorKind.(type) {
		case *kind.Type:
			if here {
				wants = append(wants, k.Want...)
				continue
			}
		case *kind.Required:
			if here && len(leaf.Causes) == 0 && s.requiredOnly(ve.SchemaURL) != nil {
				required = append(required, k.Missing...)
				continue
			}
		}
		typed = append(typed, c)
	}
	switch {
	case len(typed) > 0:
		for _, c := range typed {
			s.collect(c, doc, out)
		}
	case len(required) > 0:
		sort.Strings(required)
		word := "at least"
		if exactly {
			word = "exactly"
		}
		*out = append(*out, Error{Location: ve.InstanceLocation, Anchor: AtValue, Message: "set " + word + " one of: " + strings.Join(uniqStrings(required), ", ")})
	default:
		sort.Strings(wants)
		*out = append(*out, Error{Location: ve.InstanceLocation, Anchor: AtValue,
			Message: fmt.Sprintf("expected %s, got %s", strings.Join(uniqStrings(wants), " or "), describe(lookup(doc, ve.InstanceLocation)))})
	}
}

// requiredOnly returns the keys named by a oneOf/anyOf whose branches only
// require keys, as in {"oneOf": [{"required": ["env"]}, {"required":
// ["command"]}]}, sorted; nil for any other alternatives.
func (s *Schema) requiredOnly(schemaURL string) []string {
	obj := s.at(schemaURL)
	var alts []any
	for _, key := range []string{"oneOf", "anyOf"} {
		if a, ok := obj[key].([]any); ok {
			alts = a
		}
	}
	if strings.HasSuffix(schemaURL, "/oneOf") || strings.HasSuffix(schemaURL, "/anyOf") {
		alts, _ = s.atAny(schemaURL).([]any)
	}
	var keys []string
	for _, a := range alts {
		m, _ := a.(map[string]any)
		req, ok := m["required"].([]any)
		if !ok || len(m) != 1 {
			return nil
		}
		for _, r := range req {
			keys = append(keys, fmt.Sprint(r))
		}
	}
	sort.Strings(keys)
	return keys
}

// leaf looks through wrapper errors ($ref, groups) with a single cause.
func leaf(ve *jsonschema.ValidationError) *jsonschema.ValidationError {
	for {
		switch ve.ErrorKind.(type) {
		case *kind.Schema, *kind.Group, *kind.AllOf, *kind.Reference:
			if len(ve.Causes) != 1 {
				return ve
			}
			ve = ve.Causes[0]
		default:
			return ve
		}
	}
}

func (s *Schema) leafMessage(ve *jsonschema.ValidationError, got any) string {
	switch k := ve.ErrorKind.(type) {
	case *kind.Type:
		return fmt.Sprintf("expected %s, got %s", strings.Join(k.Want, " or "), describe(got))
	case *kind.Enum:
		var want []string
		for _, w := range k.Want {
			want = append(want, fmt.Sprint(w))
		}
		msg := fmt.Sprintf("%s is not one of: %s", describe(got), strings.Join(want, ", "))
		if g, ok := got.(string); ok {
			if m := Suggest(g, want); m != "" {
				msg += fmt.Sprintf(" (did you mean %q?)", m)
			}
		}
		return msg
	case *kind.Const:
		return fmt.Sprintf("must be %v, got %s", k.Want, describe(got))
	case *kind.Pattern:
		return fmt.Sprintf("invalid value %q: %s", k.Got, s.patternHint(ve))
	case *kind.MinLength:
		return fmt.Sprintf("must be at least %d characters long", k.Want)
	case *kind.MaxLength:
		return fmt.Sprintf("must be at most %d characters long", k.Want)
	case *kind.Minimum:
		return fmt.Sprintf("must be at least %s, got %s", ratString(k.Want), ratString(k.Got))
	case *kind.Maximum:
		return fmt.Sprintf("must be at most %s, got %s", ratString(k.Want), ratString(k.Got))
	case *kind.ExclusiveMinimum:
		return fmt.Sprintf("must be greater than %s, got %s", ratString(k.Want), ratString(k.Got))
	case *kind.ExclusiveMaximum:
		return fmt.Sprintf("must be less than %s, got %s", ratString(k.Want), ratString(k.Got))
	case *kind.MinItems:
		return fmt.Sprintf("must have at least %d item(s)", k.Want)
	case *kind.MaxItems:
		return fmt.Sprintf("must have at most %d item(s)", k.Want)
	case *kind.MinProperties:
		return fmt.Sprintf("must have at least %d key(s)", k.Want)
	case *kind.UniqueItems:
		return fmt.Sprintf("items %d and %d are the same", k.Duplicates[0], k.Duplicates[1])
	case *kind.FalseSchema:
		return "is not allowed here"
	}
	return ve.Error()
}

// patternHint explains a pattern in words: the schema's "x-patternHint" on
// the failing schema object, else the pattern itself.
func (s *Schema) patternHint(ve *jsonschema.ValidationError) string {
	obj := s.at(ve.SchemaURL)
	if pn, ok := obj["propertyNames"].(map[string]any); ok {
		obj = s.deref(pn)
	}
	if h, ok := obj["x-patternHint"].(string); ok {
		return h
	}
	if p, ok := obj["pattern"].(string); ok {
		return "must match " + p
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
	return lookup(s.raw, toks)
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

// propertiesAt lists the property names a schema object declares.
func (s *Schema) propertiesAt(schemaURL string) []string {
	props, _ := s.at(schemaURL)["properties"].(map[string]any)
	names := make([]string, 0, len(props))
	for k := range props {
		names = append(names, k)
	}
	sort.Strings(names)
	return names
}

// instanceOf derives the instance location of an object from the location
// of its schema, by the "properties" steps along it (#/properties/template/
// oneOf/1/properties/build/properties/args is template.build.args). It
// serves objects reached only through properties, which is where sbx's
// schema uses propertyNames.
func instanceOf(schemaURL string) []string {
	_, frag, _ := strings.Cut(schemaURL, "#")
	toks := strings.Split(strings.TrimPrefix(frag, "/"), "/")
	var loc []string
	for i := 0; i+1 < len(toks); i++ {
		if toks[i] == "properties" {
			loc = append(loc, toks[i+1])
			i++
		}
	}
	return loc
}
