package cliutil

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// Source names a backend output in error messages: the command as typed
// ("sbx policy ls api --json") and a function giving the backend and its
// version ("sbx 0.47.0"), called only when there is an error to report.
type Source struct {
	Command string
	Version func() string
}

func (s Source) String() string {
	if s.Version != nil {
		if v := s.Version(); v != "" {
			return fmt.Sprintf("%s (%s)", s.Command, v)
		}
	}
	return s.Command
}

// Doc reads one JSON document of a backend strictly: every accessor checks
// the type of what it reads, and the first field that is missing or of an
// unexpected type becomes the document's error, naming the command, the
// backend version and the field:
//
//	sbx policy ls api --json (sbx 0.47.0): rule 2: field "resources": expected an array of strings, got a number
//
// Fields no accessor asks for are ignored, so a backend may add fields;
// accessors called after the first error return zero values. Leading
// non-JSON lines (daemon start-up notices) and anything after the document
// (an update banner) are skipped, as the evidence shows both
// (docker-sbx-evidence.md §1.1).
type Doc struct {
	src Source
	err error
}

// Err is the first problem found, or nil.
func (d *Doc) Err() error { return d.err }

func (d *Doc) fail(where, format string, args ...any) {
	if d.err != nil {
		return
	}
	msg := fmt.Sprintf(format, args...)
	if where != "" {
		msg = where + ": " + msg
	}
	d.err = fmt.Errorf("%s: %s", d.src, msg)
}

// Value is one JSON value of a Doc and where it was found.
type Value struct {
	d     *Doc
	where string
	v     any
}

// Decode reads the first JSON document in out.
func Decode(src Source, out []byte) (*Doc, Value) {
	d := &Doc{src: src}
	var v any
	if err := decodeFirst(out, &v); err != nil {
		d.err = fmt.Errorf("%s: %v", src, err)
	}
	return d, Value{d: d, v: v}
}

// decodeFirst decodes the first JSON document in out, skipping any lines
// before it that do not start a document, with numbers kept as
// json.Number.
func decodeFirst(out []byte, v any) error {
	start := -1
	for i := 0; i < len(out); {
		line := out[i:]
		if j := bytes.IndexByte(line, '\n'); j >= 0 {
			line = line[:j]
		}
		if t := bytes.TrimSpace(line); len(t) > 0 && (t[0] == '{' || t[0] == '[') {
			start = i
			break
		}
		i += len(line) + 1
	}
	if start < 0 {
		return fmt.Errorf("no JSON in output %q", truncate(out))
	}
	dec := json.NewDecoder(bytes.NewReader(out[start:]))
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("cannot parse JSON output: %v", err)
	}
	return nil
}

func truncate(b []byte) string {
	s := strings.TrimSpace(string(b))
	if len(s) > 200 {
		s = s[:200] + "..."
	}
	return s
}

// kind names a JSON value's type for messages.
func kind(v any) string {
	switch v := v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case json.Number:
		return "a number"
	case string:
		return "a string"
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	default:
		return fmt.Sprintf("%T", v)
	}
}

func (v Value) ok() bool { return v.d.err == nil }

func (v Value) expected(what string) {
	v.d.fail(v.where, "expected %s, got %s", what, kind(v.v))
}

// String reads a string.
func (v Value) String() string {
	s, isString := v.v.(string)
	if !isString && v.ok() {
		v.expected("a string")
	}
	return s
}

// OneOf reads a string that must be one of values.
func (v Value) OneOf(values ...string) string {
	s := v.String()
	for _, x := range values {
		if s == x {
			return s
		}
	}
	if v.ok() {
		v.d.fail(v.where, "unknown value %q (known: %s)", s, strings.Join(values, ", "))
	}
	return ""
}

// Bool reads a boolean.
func (v Value) Bool() bool {
	b, isBool := v.v.(bool)
	if !isBool && v.ok() {
		v.expected("a boolean")
	}
	return b
}

// Int reads an integer.
func (v Value) Int() int {
	n, isNumber := v.v.(json.Number)
	if !isNumber {
		if v.ok() {
			v.expected("an integer")
		}
		return 0
	}
	i, err := n.Int64()
	if err != nil && v.ok() {
		v.d.fail(v.where, "expected an integer, got %s", n)
	}
	return int(i)
}

// Strings reads an array of strings.
func (v Value) Strings() []string {
	a, isArray := v.v.([]any)
	if !isArray {
		if v.ok() {
			v.expected("an array of strings")
		}
		return nil
	}
	out := make([]string, 0, len(a))
	for i, e := range a {
		s, isString := e.(string)
		if !isString {
			if v.ok() {
				v.d.fail(v.where, "expected an array of strings, got %s at index %d", kind(e), i)
			}
			return nil
		}
		out = append(out, s)
	}
	return out
}

// Array reads an array; each element's place is named by label(i) in
// messages ("rule 2").
func (v Value) Array(label func(i int) string) []Value {
	a, isArray := v.v.([]any)
	if !isArray {
		if v.ok() {
			v.expected("an array")
		}
		return nil
	}
	out := make([]Value, len(a))
	for i, e := range a {
		out[i] = Value{d: v.d, where: label(i), v: e}
	}
	return out
}

// Object reads an object.
func (v Value) Object() Object {
	m, isObject := v.v.(map[string]any)
	if !isObject && v.ok() {
		v.expected("an object")
	}
	o := Object{d: v.d, m: m, where: v.where}
	// A field's own fields are named "provenance.created_via".
	if f, ok := strings.CutSuffix(v.where, `"`); ok {
		if i := strings.LastIndex(f, `field "`); i >= 0 {
			o.where, o.prefix = strings.TrimSuffix(f[:i], ": "), f[i+len(`field "`):]+"."
		}
	}
	return o
}

// Object is a JSON object of a Doc.
type Object struct {
	d      *Doc
	m      map[string]any
	where  string
	prefix string
}

func (o Object) fieldWhere(name string) string {
	w := fmt.Sprintf("field %q", o.prefix+name)
	if o.where != "" {
		w = o.where + ": " + w
	}
	return w
}

// Has reports whether the object has the field with a non-null value.
func (o Object) Has(name string) bool { return o.m[name] != nil }

// Field returns a required field; a missing one is an error.
func (o Object) Field(name string) Value {
	v, present := o.m[name]
	if !present && o.d.err == nil && o.m != nil {
		o.d.fail(o.fieldWhere(name), "missing")
	}
	return Value{d: o.d, where: o.fieldWhere(name), v: v}
}

// Opt returns an optional field and whether it is present and not null.
func (o Object) Opt(name string) (Value, bool) {
	v := o.m[name]
	return Value{d: o.d, where: o.fieldWhere(name), v: v}, v != nil
}
