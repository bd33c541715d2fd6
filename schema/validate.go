package schema

import (
	"cmp"
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/sbxhq/sbx/internal/dfa"
)

// The validator implements the draft-07 keywords sandbox.schema.json uses,
// with the semantics, and the shape of its errors, of the validator the
// schema was written against (github.com/santhosh-tekuri/jsonschema/v6,
// draft-07: validator.go). compile (compile_test.go) builds it from the
// document, refusing a keyword it does not know, never ignoring one; `go
// test ./schema -update` writes the result as Go (compiled.go), which
// Compile returns.
// It exists because that library compiles the metaschemas of every draft
// when its package is initialised, which every sbx process paid (about 3
// ms and 1.7 MB of garbage, for `sbx version` and the egress proxy too),
// and compiling the schema cost as much again; the generated validator
// costs a few hundred allocations, and only when sbx validates. Its
// patterns are automata generated with it (package dfa), which cost no
// compiling either: regexp.MustCompile of the schema's patterns was a
// tenth of `sbx validate FILE`'s CPU time. TestPatternsAgree holds them
// to the regexp package, TestAgreesWithLibrary compares the two on every test file and thousands
// of variations of them.

// jsonType is a set of JSON types, as "type" names them.
type jsonType uint8

const (
	typeNull jsonType = 1 << iota
	typeBoolean
	typeNumber
	typeInteger
	typeString
	typeArray
	typeObject
)

// typeNames are the names of the types, in the order the library lists
// the types an error wants.
var typeNames = [...]struct {
	t    jsonType
	name string
}{{typeNull, "null"}, {typeBoolean, "boolean"}, {typeNumber, "number"}, {typeInteger, "integer"}, {typeString, "string"}, {typeArray, "array"}, {typeObject, "object"}}

func (t jsonType) names() []string {
	var out []string
	for _, tn := range typeNames {
		if t&tn.t != 0 {
			out = append(out, tn.name)
		}
	}
	return out
}

// typeOf is the JSON type of a decoded value (a number is typeNumber; an
// integral one is also accepted as an integer), 0 for what JSON cannot
// hold.
func typeOf(v any) jsonType {
	switch v := v.(type) {
	case nil:
		return typeNull
	case bool:
		return typeBoolean
	case int, int64, uint64, json.Number:
		return typeNumber
	case float64:
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return 0
		}
		return typeNumber
	case string:
		return typeString
	case []any:
		return typeArray
	case map[string]any:
		return typeObject
	}
	return 0
}

// rat is a number as an exact rational, as the library compares numbers.
func rat(v any) *big.Rat {
	r, _ := new(big.Rat).SetString(fmt.Sprint(v))
	return r
}

// compareInts compares v with the bound s (big.Rat's RatString of it)
// when both are integers Go holds exactly, as YAML's are: as r.Cmp(ratOf(s))
// would, without parsing s into a big.Rat for every comparison.
func compareInts(v any, s string) (int, bool) {
	var x int64
	switch v := v.(type) {
	case int:
		x = int64(v)
	case int64:
		x = v
	default:
		return 0, false
	}
	b, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, false
	}
	return cmp.Compare(x, b), true
}

// ratOf is the number s, as big.Rat's String writes it ("1/2").
func ratOf(s string) *big.Rat {
	r, ok := new(big.Rat).SetString(s)
	if !ok {
		panic("schema: invalid number " + s)
	}
	return r
}

func isInteger(v any) bool {
	switch v := v.(type) {
	case int, int64, uint64:
		return true
	case float64:
		return v == math.Trunc(v)
	}
	r := rat(v)
	return r != nil && r.IsInt()
}

// equal compares two JSON values, numbers by value.
func equal(a, b any) bool {
	switch a := a.(type) {
	case map[string]any:
		b, ok := b.(map[string]any)
		if !ok || len(a) != len(b) {
			return false
		}
		for k, va := range a {
			vb, ok := b[k]
			if !ok || !equal(va, vb) {
				return false
			}
		}
		return true
	case []any:
		b, ok := b.([]any)
		if !ok || len(a) != len(b) {
			return false
		}
		for i := range a {
			if !equal(a[i], b[i]) {
				return false
			}
		}
		return true
	case nil:
		return b == nil
	case bool:
		b, ok := b.(bool)
		return ok && a == b
	case string:
		b, ok := b.(string)
		return ok && a == b
	}
	if typeOf(a) != typeNumber || typeOf(b) != typeNumber {
		return false
	}
	ra, rb := rat(a), rat(b)
	return ra != nil && rb != nil && ra.Cmp(rb) == 0
}

// node is one compiled schema object.
type node struct {
	loc string // its JSON pointer in the document, as "#/properties/env"
	// ref is the target of $ref: in draft-07 it replaces the object's
	// other keywords.
	ref   *node
	types jsonType // 0: any

	hasConst bool
	constVal any
	enum     []any

	minLength, maxLength, minItems int // -1: absent
	pattern                        string
	re                             *dfa.DFA // pattern's automaton, generated with the rest
	hint                           string   // x-patternHint

	// The bounds, as big.Rat's RatString writes them; "" when absent.
	minimum, maximum, exclusiveMinimum string

	items         *node
	propNames     []string // sorted
	properties    []*node  // the schema of each of propNames
	noAdditional  bool     // additionalProperties: false
	additional    *node
	required      []string
	propertyNames *node

	allOf, anyOf, oneOf []*node
	// requiredOnly lists, sorted, the keys named by the object's oneOf (or
	// anyOf) when each of its alternatives only requires keys, as in
	// {"oneOf": [{"required": ["env"]}, {"required": ["command"]}]}.
	requiredOnly []string
}

// property returns the schema of an object's key k, nil if it has none.
func (n *node) property(k string) *node {
	if i, ok := slices.BinarySearch(n.propNames, k); ok {
		return n.properties[i]
	}
	return nil
}

// deref follows $ref.
func (n *node) deref() *node {
	for i := 0; i < 8 && n.ref != nil; i++ {
		n = n.ref
	}
	return n
}

// escape escapes a JSON pointer token (RFC 6901).
func escape(tok string) string {
	return strings.ReplaceAll(strings.ReplaceAll(tok, "~", "~0"), "/", "~1")
}

// failKind is what a failure is: a keyword that failed, or a group of
// failures.
type failKind int

const (
	kindGroup failKind = iota // several failures of one schema object
	kindAllOf
	kindAnyOf
	kindOneOf
	kindRef
	kindType
	kindConst
	kindEnum
	kindMinLength
	kindMaxLength
	kindPattern
	kindMinimum
	kindMaximum
	kindExclusiveMinimum
	kindMinItems
	kindRequired
	kindAdditional
	kindPropertyNames
	kindInvalid // a value JSON cannot hold
)

// failure is one node of the tree of a failed validation, shaped as the
// library's ValidationError: a schema object (at), where in the document
// (loc), what failed, and the failures it consists of.
type failure struct {
	kind   failKind
	at     *node
	loc    []string
	causes []*failure

	got   any      // the value that failed
	names []string // kindType: the types wanted; kindRequired: the keys missing; kindAdditional: the keys not allowed
	n     int      // kindMinLength, kindMaxLength, kindMinItems: the bound
	num   *big.Rat // kindMinimum, kindMaximum, kindExclusiveMinimum: the value
	key   string   // kindPropertyNames: the key
	both  bool     // kindOneOf: two alternatives matched
}

// validate checks v, found at loc, against n: nil when it is valid, else
// its one failure or a group of them.
func (n *node) validate(v any, loc []string) *failure {
	fail := func(k failKind) *failure { return &failure{kind: k, at: n, loc: loc, got: v} }
	t := typeOf(v)
	if t == 0 {
		return fail(kindInvalid)
	}
	if n.types != 0 && n.types&t == 0 && !(n.types&typeInteger != 0 && t == typeNumber && isInteger(v)) {
		f := fail(kindType)
		f.names = n.types.names()
		return f
	}
	if n.hasConst && !equal(v, n.constVal) {
		return fail(kindConst)
	}
	if n.enum != nil {
		matched := false
		for _, e := range n.enum {
			if equal(v, e) {
				matched = true
				break
			}
		}
		if !matched {
			return fail(kindEnum)
		}
	}
	if n.ref != nil {
		f := n.ref.validate(v, loc)
		if f == nil {
			return nil
		}
		r := fail(kindRef)
		if f.kind == kindGroup {
			r.causes = f.causes
		} else {
			r.causes = []*failure{f}
		}
		return r
	}
	var errs []*failure
	add := func(f *failure) {
		if f != nil {
			errs = append(errs, f)
		}
	}
	switch v := v.(type) {
	case map[string]any:
		if len(n.required) > 0 {
			var missing []string
			for _, k := range n.required {
				if _, ok := v[k]; !ok {
					missing = append(missing, k)
				}
			}
			if missing != nil {
				f := fail(kindRequired)
				f.names = missing
				add(f)
			}
		}
		var additional []string
		for k, pv := range v {
			if p := n.property(k); p != nil {
				add(p.validate(pv, appendLoc(loc, k)))
			} else if n.additional != nil {
				add(n.additional.validate(pv, appendLoc(loc, k)))
			} else if n.noAdditional {
				additional = append(additional, k)
			}
		}
		if additional != nil {
			f := fail(kindAdditional)
			f.names = additional
			add(f)
		}
		if n.propertyNames != nil {
			for k := range v {
				if n.propertyNames.validate(k, nil) != nil {
					add(&failure{kind: kindPropertyNames, at: n.propertyNames, loc: loc, got: v, key: k})
				}
			}
		}
	case []any:
		if n.minItems >= 0 && len(v) < n.minItems {
			f := fail(kindMinItems)
			f.n = n.minItems
			add(f)
		}
		if n.items != nil {
			for i, item := range v {
				add(n.items.validate(item, appendLoc(loc, strconv.Itoa(i))))
			}
		}
	case string:
		if n.minLength >= 0 || n.maxLength >= 0 {
			l := utf8.RuneCountInString(v)
			if n.minLength >= 0 && l < n.minLength {
				f := fail(kindMinLength)
				f.n = n.minLength
				add(f)
			}
			if n.maxLength >= 0 && l > n.maxLength {
				f := fail(kindMaxLength)
				f.n = n.maxLength
				add(f)
			}
		}
		if n.re != nil && !n.re.Match(v) {
			add(fail(kindPattern))
		}
	case int, int64, uint64, float64, json.Number:
		if n.minimum != "" || n.maximum != "" || n.exclusiveMinimum != "" {
			// v as an exact rational, made only when an integer
			// comparison cannot do or a bound fails.
			var r *big.Rat
			num := func() *big.Rat {
				if r == nil {
					r = rat(v)
				}
				return r
			}
			for _, b := range []struct {
				k     failKind
				limit string
				bad   func(c int) bool
			}{
				{kindMinimum, n.minimum, func(c int) bool { return c < 0 }},
				{kindMaximum, n.maximum, func(c int) bool { return c > 0 }},
				{kindExclusiveMinimum, n.exclusiveMinimum, func(c int) bool { return c <= 0 }},
			} {
				if b.limit == "" {
					continue
				}
				c, ok := compareInts(v, b.limit)
				if !ok {
					if num() == nil {
						continue
					}
					c = num().Cmp(ratOf(b.limit))
				}
				if b.bad(c) {
					f := fail(b.k)
					f.num = num()
					add(f)
				}
			}
		}
	}
	if len(n.allOf) > 0 {
		var causes []*failure
		for _, a := range n.allOf {
			if f := a.validate(v, loc); f != nil {
				causes = append(causes, f)
			}
		}
		if causes != nil {
			f := fail(kindAllOf)
			f.causes = causes
			add(f)
		}
	}
	if len(n.anyOf) > 0 {
		var causes []*failure
		for _, a := range n.anyOf {
			f := a.validate(v, loc)
			if f == nil {
				causes = nil
				break
			}
			causes = append(causes, f)
		}
		if causes != nil {
			f := fail(kindAnyOf)
			f.causes = causes
			add(f)
		}
	}
	if len(n.oneOf) > 0 {
		matched := -1
		var causes []*failure
	oneOf:
		for i, a := range n.oneOf {
			f := a.validate(v, loc)
			switch {
			case f != nil && matched == -1:
				causes = append(causes, f)
			case f == nil && matched == -1:
				matched = i
			case f == nil:
				both := fail(kindOneOf)
				both.both = true
				add(both)
				break oneOf
			}
		}
		if matched == -1 {
			f := fail(kindOneOf)
			f.causes = causes
			add(f)
		}
	}
	switch len(errs) {
	case 0:
		return nil
	case 1:
		return errs[0]
	}
	g := fail(kindGroup)
	g.causes = errs
	return g
}
