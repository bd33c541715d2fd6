package schema

import (
	"bytes"
	"encoding/json"
	"fmt"
	"go/format"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sbxhq/sbx/internal/dfa/dfagen"
)

// TestCompiledInSync keeps compiled.go, the validator Compile returns,
// the compilation of sandbox.schema.json: `go test ./schema -update`
// rewrites it after the schema changes.
func TestCompiledInSync(t *testing.T) {
	root, err := compile(JSON)
	if err != nil {
		t.Fatal(err)
	}
	got := generate(t, root)
	const path = "compiled.go"
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("compiled.go is stale; run go test ./schema -update (-want +got):\n%s", diff)
	}
}

// generate writes the Go source of the graph of nodes under root: a
// package variable for each node, and compiled(), which returns root's.
func generate(t *testing.T, root *node) []byte {
	t.Helper()
	order := nodes(root)
	index := map[*node]int{}
	for i, n := range order {
		index[n] = i
	}
	if loc := cycle(root); loc != "" {
		t.Fatalf("the schema refers to itself at %s: Go cannot initialise package variables that refer to each other in a cycle, so compiled.go cannot hold it", loc)
	}
	ref := func(n *node) string { return fmt.Sprintf("&ns%d", index[n]) }
	// automaton names the variable of a node's pattern, that of the first
	// node with the same pattern.
	firstWith := map[string]int{}
	for i, n := range order {
		if _, ok := firstWith[n.pattern]; !ok && n.re != nil {
			firstWith[n.pattern] = i
		}
	}
	automaton := func(n *node) string { return fmt.Sprintf("pattern%d", firstWith[n.pattern]) }
	refs := func(l []*node) string {
		var parts []string
		for _, n := range l {
			parts = append(parts, ref(n))
		}
		return "[]*node{" + strings.Join(parts, ", ") + "}"
	}
	strs := func(l []string) string {
		var parts []string
		for _, s := range l {
			parts = append(parts, strconv.Quote(s))
		}
		return "[]string{" + strings.Join(parts, ", ") + "}"
	}

	var b bytes.Buffer
	b.WriteString("// compiled returns the validator of sandbox.schema.json as compile (in\n")
	b.WriteString("// compile_test.go) makes it. Its nodes, and the automata of its patterns,\n")
	b.WriteString("// are package variables, which the linker lays out: a process that\n")
	b.WriteString("// validates pays for no parsing, allocating or code to build them (building\n")
	b.WriteString("// them at run time took a 28 kB stack frame, which grew the stack, and 37\n")
	b.WriteString("// kB of fresh heap). TestCompiledInSync keeps it in step with the schema.\n")
	b.WriteString("func compiled() *node { return &ns0 }\n\n")
	b.WriteString("// The nodes, numbered depth first.\n")
	b.WriteString("var (\n")
	for i, n := range order {
		var f []string
		add := func(format string, args ...any) { f = append(f, fmt.Sprintf(format, args...)) }
		add("loc: %q", n.loc)
		if n.ref != nil {
			add("ref: %s", ref(n.ref))
		}
		if n.types != 0 {
			var names []string
			for _, tn := range typeNames {
				if n.types&tn.t != 0 {
					names = append(names, "type"+strings.ToUpper(tn.name[:1])+tn.name[1:])
				}
			}
			add("types: %s", strings.Join(names, " | "))
		}
		if n.hasConst {
			add("hasConst: true")
			add("constVal: %s", goValue(t, n.constVal))
		}
		if n.enum != nil {
			add("enum: %s", goValue(t, n.enum))
		}
		add("minLength: %d, maxLength: %d, minItems: %d", n.minLength, n.maxLength, n.minItems)
		if n.re != nil {
			add("pattern: %q, re: &%s", n.pattern, automaton(n))
		}
		if n.hint != "" {
			add("hint: %q", n.hint)
		}
		for _, r := range []struct{ name, v string }{{"minimum", n.minimum}, {"maximum", n.maximum}, {"exclusiveMinimum", n.exclusiveMinimum}} {
			if r.v != "" {
				add("%s: %q", r.name, r.v)
			}
		}
		if n.items != nil {
			add("items: %s", ref(n.items))
		}
		if n.properties != nil {
			add("propNames: %s", strs(n.propNames))
			add("properties: %s", refs(n.properties))
		}
		if n.noAdditional {
			add("noAdditional: true")
		}
		if n.additional != nil {
			add("additional: %s", ref(n.additional))
		}
		if n.required != nil {
			add("required: %s", strs(n.required))
		}
		if n.propertyNames != nil {
			add("propertyNames: %s", ref(n.propertyNames))
		}
		for _, l := range []struct {
			name  string
			nodes []*node
		}{{"allOf", n.allOf}, {"anyOf", n.anyOf}, {"oneOf", n.oneOf}} {
			if l.nodes != nil {
				add("%s: %s", l.name, refs(l.nodes))
			}
		}
		if n.requiredOnly != nil {
			add("requiredOnly: %s", strs(n.requiredOnly))
		}
		fmt.Fprintf(&b, "\tns%d = node{%s}\n", i, strings.Join(f, ", "))
	}
	b.WriteString(")\n")
	// The automata of the patterns, each where the first node with its
	// pattern is: package variables, which the linker lays out, so that
	// no process builds or compiles them.
	for i, n := range order {
		if n.re == nil || automaton(n) != fmt.Sprintf("pattern%d", i) {
			continue
		}
		fmt.Fprintf(&b, "\n// pattern%d is the automaton of the pattern at %s.\n", i, n.loc)
		fmt.Fprintf(&b, "var pattern%d = %s\n", i, dfagen.Literal(n.re))
	}
	head := "// Code generated by `go test ./schema -update`; DO NOT EDIT.\n\npackage schema\n\n"
	var imports []string
	if strings.Contains(b.String(), "json.Number(") {
		imports = append(imports, "\"encoding/json\"\n")
	}
	if strings.Contains(b.String(), "dfa.DFA{") {
		imports = append(imports, "\n\"github.com/sbxhq/sbx/internal/dfa\"\n")
	}
	if imports != nil {
		head += "import (\n" + strings.Join(imports, "") + ")\n\n"
	}
	src, err := format.Source(append([]byte(head), b.Bytes()...))
	if err != nil {
		t.Fatalf("generated source: %v", err)
	}
	return src
}

// nodes lists the nodes under root, depth first, the properties of each
// in order.
func nodes(root *node) []*node {
	var order []*node
	seen := map[*node]bool{}
	var visit func(n *node)
	visit = func(n *node) {
		if n == nil || seen[n] {
			return
		}
		seen[n] = true
		order = append(order, n)
		for _, c := range children(n) {
			visit(c)
		}
	}
	visit(root)
	return order
}

// children are the nodes a node refers to.
func children(n *node) []*node {
	out := append([]*node{n.ref, n.items}, n.properties...)
	out = append(out, n.additional, n.propertyNames)
	for _, l := range [][]*node{n.allOf, n.anyOf, n.oneOf} {
		out = append(out, l...)
	}
	return slices.DeleteFunc(out, func(c *node) bool { return c == nil })
}

// cycle returns the location of a node that refers to itself, through
// others or not; "" if none does.
func cycle(root *node) string {
	const (
		open = 1
		done = 2
	)
	state := map[*node]int{}
	var visit func(n *node) string
	visit = func(n *node) string {
		switch state[n] {
		case open:
			return n.loc
		case done:
			return ""
		}
		state[n] = open
		for _, c := range children(n) {
			if loc := visit(c); loc != "" {
				return loc
			}
		}
		state[n] = done
		return ""
	}
	return visit(root)
}

// goValue writes a JSON value, as compile decodes it (numbers as
// json.Number), as a Go expression.
func goValue(t *testing.T, v any) string {
	switch v := v.(type) {
	case nil:
		return "nil"
	case bool:
		return strconv.FormatBool(v)
	case string:
		return strconv.Quote(v)
	case json.Number:
		return fmt.Sprintf("json.Number(%q)", string(v))
	case []any:
		var parts []string
		for _, e := range v {
			parts = append(parts, goValue(t, e))
		}
		return "[]any{" + strings.Join(parts, ", ") + "}"
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var parts []string
		for _, k := range slices.Compact(keys) {
			parts = append(parts, fmt.Sprintf("%q: %s", k, goValue(t, v[k])))
		}
		return "map[string]any{" + strings.Join(parts, ", ") + "}"
	}
	t.Fatalf("schema value of type %T", v)
	return ""
}
