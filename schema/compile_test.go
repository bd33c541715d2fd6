package schema

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"

	"github.com/sbxhq/sbx/internal/dfa/dfagen"
)

// The compiler of sandbox.schema.json into the validator's nodes. It runs
// in tests only: TestCompiledInSync compares what it builds with
// compiled.go, which `go test ./schema -update` rewrites from it, so sbx
// itself never parses the schema to validate.

// rawNode is a schema object as the document writes it. Annotations are
// read and dropped; any other keyword is refused (DisallowUnknownFields).
type rawNode struct {
	Ref              string              `json:"$ref"`
	Type             json.RawMessage     `json:"type"`
	Const            json.RawMessage     `json:"const"`
	Enum             []any               `json:"enum"`
	MinLength        *int                `json:"minLength"`
	MaxLength        *int                `json:"maxLength"`
	MinItems         *int                `json:"minItems"`
	Pattern          *string             `json:"pattern"`
	Minimum          *json.Number        `json:"minimum"`
	Maximum          *json.Number        `json:"maximum"`
	ExclusiveMinimum *json.Number        `json:"exclusiveMinimum"`
	Items            *rawNode            `json:"items"`
	Properties       map[string]*rawNode `json:"properties"`
	Additional       json.RawMessage     `json:"additionalProperties"`
	Required         []string            `json:"required"`
	PropertyNames    *rawNode            `json:"propertyNames"`
	AllOf            []*rawNode          `json:"allOf"`
	AnyOf            []*rawNode          `json:"anyOf"`
	OneOf            []*rawNode          `json:"oneOf"`
	Definitions      map[string]*rawNode `json:"definitions"`

	PatternHint string     `json:"x-patternHint"`
	Schema      annotation `json:"$schema"`
	ID          annotation `json:"$id"`
	Title       annotation `json:"title"`
	Description annotation `json:"description"`
	Examples    annotation `json:"examples"`
	Default     annotation `json:"default"`
	Order       annotation `json:"x-order"`
}

// annotation is a keyword that does not validate: skipped unread.
type annotation struct{}

func (*annotation) UnmarshalJSON([]byte) error { return nil }

// compile builds the validator of the schema document data.
func compile(data []byte) (*node, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	dec.DisallowUnknownFields()
	var root rawNode
	if err := dec.Decode(&root); err != nil {
		return nil, err
	}
	c := &compiler{defs: map[string]*node{}}
	for name := range root.Definitions {
		c.defs["#/definitions/"+name] = &node{}
	}
	for name, def := range root.Definitions {
		if err := c.fill(c.defs["#/definitions/"+name], def, "#/definitions/"+name); err != nil {
			return nil, err
		}
	}
	n := &node{}
	if err := c.fill(n, &root, "#"); err != nil {
		return nil, err
	}
	for loc, d := range c.defs {
		seen := map[*node]bool{}
		for r := d; r.ref != nil; r = r.ref {
			if seen[r] {
				return nil, fmt.Errorf("%s: $ref cycle", loc)
			}
			seen[r] = true
		}
	}
	return n, nil
}

type compiler struct {
	defs map[string]*node // by location, "#/definitions/NAME"
}

func (c *compiler) sub(r *rawNode, loc string) (*node, error) {
	if r == nil {
		return nil, nil
	}
	n := &node{}
	return n, c.fill(n, r, loc)
}

func (c *compiler) subs(rs []*rawNode, loc string) ([]*node, error) {
	var out []*node
	for i, r := range rs {
		n, err := c.sub(r, loc+"/"+strconv.Itoa(i))
		if err != nil {
			return nil, err
		}
		out = append(out, n)
	}
	return out, nil
}

func (c *compiler) fill(n *node, r *rawNode, loc string) error {
	n.loc = loc
	n.minLength, n.maxLength, n.minItems = -1, -1, -1
	fail := func(format string, args ...any) error {
		return fmt.Errorf("%s: %s", loc, fmt.Sprintf(format, args...))
	}
	if r.Ref != "" {
		if n.ref = c.defs[r.Ref]; n.ref == nil {
			return fail("$ref %q: only #/definitions/NAME is supported", r.Ref)
		}
	}
	if len(r.Type) > 0 {
		var names []string
		var one string
		if json.Unmarshal(r.Type, &one) == nil {
			names = []string{one}
		} else if err := json.Unmarshal(r.Type, &names); err != nil {
			return fail("type: %v", err)
		}
		for _, name := range names {
			found := false
			for _, tn := range typeNames {
				if tn.name == name {
					n.types |= tn.t
					found = true
				}
			}
			if !found {
				return fail("unknown type %q", name)
			}
		}
	}
	if len(r.Const) > 0 {
		dec := json.NewDecoder(bytes.NewReader(r.Const))
		dec.UseNumber()
		if err := dec.Decode(&n.constVal); err != nil {
			return fail("const: %v", err)
		}
		n.hasConst = true
	}
	n.enum = r.Enum
	for _, v := range []struct {
		p   *int
		dst *int
	}{{r.MinLength, &n.minLength}, {r.MaxLength, &n.maxLength}, {r.MinItems, &n.minItems}} {
		if v.p != nil {
			*v.dst = *v.p
		}
	}
	if r.Pattern != nil {
		n.pattern = *r.Pattern
		var err error
		if n.re, err = dfagen.Build(n.pattern); err != nil {
			return fail("pattern: %v", err)
		}
	}
	n.hint = r.PatternHint
	for _, v := range []struct {
		p   *json.Number
		dst *string
	}{{r.Minimum, &n.minimum}, {r.Maximum, &n.maximum}, {r.ExclusiveMinimum, &n.exclusiveMinimum}} {
		if v.p != nil {
			r := rat(*v.p)
			if r == nil {
				return fail("invalid number %s", *v.p)
			}
			*v.dst = r.RatString()
		}
	}
	var err error
	if n.items, err = c.sub(r.Items, loc+"/items"); err != nil {
		return err
	}
	if len(r.Properties) > 0 {
		for name := range r.Properties {
			n.propNames = append(n.propNames, name)
		}
		sort.Strings(n.propNames)
		for _, name := range n.propNames {
			p, err := c.sub(r.Properties[name], loc+"/properties/"+escape(name))
			if err != nil {
				return err
			}
			n.properties = append(n.properties, p)
		}
	}
	if len(r.Additional) > 0 {
		var b bool
		if json.Unmarshal(r.Additional, &b) == nil {
			n.noAdditional = !b
		} else {
			dec := json.NewDecoder(bytes.NewReader(r.Additional))
			dec.UseNumber()
			dec.DisallowUnknownFields()
			var sub rawNode
			if err := dec.Decode(&sub); err != nil {
				return fail("additionalProperties: %v", err)
			}
			if n.additional, err = c.sub(&sub, loc+"/additionalProperties"); err != nil {
				return err
			}
		}
	}
	n.required = r.Required
	if n.propertyNames, err = c.sub(r.PropertyNames, loc+"/propertyNames"); err != nil {
		return err
	}
	if n.allOf, err = c.subs(r.AllOf, loc+"/allOf"); err != nil {
		return err
	}
	if n.anyOf, err = c.subs(r.AnyOf, loc+"/anyOf"); err != nil {
		return err
	}
	if n.oneOf, err = c.subs(r.OneOf, loc+"/oneOf"); err != nil {
		return err
	}
	alts := r.OneOf
	if r.AnyOf != nil {
		alts = r.AnyOf
	}
	n.requiredOnly = requiredOnly(alts)
	return nil
}

// requiredOnly returns the keys alternatives require when each only
// requires keys (annotations aside), sorted; nil otherwise.
func requiredOnly(alts []*rawNode) []string {
	var keys []string
	for _, a := range alts {
		if len(a.Required) == 0 || !onlyRequires(a) {
			return nil
		}
		keys = append(keys, a.Required...)
	}
	sort.Strings(keys)
	return keys
}

// onlyRequires reports whether a schema object has no validating keyword
// but "required".
func onlyRequires(a *rawNode) bool {
	return a.Ref == "" && a.Type == nil && a.Const == nil && a.Enum == nil && a.MinLength == nil && a.MaxLength == nil &&
		a.MinItems == nil && a.Pattern == nil && a.Minimum == nil && a.Maximum == nil && a.ExclusiveMinimum == nil &&
		a.Items == nil && a.Properties == nil && a.Additional == nil && a.PropertyNames == nil && a.AllOf == nil &&
		a.AnyOf == nil && a.OneOf == nil && a.Definitions == nil
}
