package spec

import (
	"bytes"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// parseFast parses the plain YAML that sandbox files are written in (block
// mappings and lists, flow lists and mappings, scalars that end on their
// line, all ASCII) into the tree go-yaml's Decoder gives for the same
// bytes, in a seventh of its time: go-yaml was most of what `sbx validate
// FILE` spent beyond starting the process (BENCHMARKS.md). The tree is the same in
// every field spec reads (kind, style, tag, value, line, column and
// content); comments are left out, since spec reads none.
//
// Anything outside that subset, and anything that could be an error,
// returns ok false, and the caller parses with go-yaml, which then gives
// its own tree or its own error: this parser never decides that a file is
// wrong. TestFastYAML and FuzzFastYAML hold it to go-yaml on every file in
// the repository, thousands of edits of them and the fuzzer's inputs. Its
// work is linear in the file and its recursion bounded, since the file may
// be sandbox.local.yaml, which the agent can write.
func parseFast(data []byte) (doc *yaml.Node, ok bool) {
	p := &fastParser{data: data, text: string(data)}
	if !p.split() || len(p.lines) == 0 || p.lines[0].indent != 0 {
		return nil, false
	}
	root, ok := p.mapping(0, p.lines[0].start)
	if !ok || p.i != len(p.lines) {
		return nil, false
	}
	doc = p.node(yaml.DocumentNode, "", "", root.Line, root.Column)
	doc.Content = []*yaml.Node{root}
	return doc, true
}

// Bounds of the fast path; beyond them go-yaml parses.
const (
	fastMaxDepth  = 32  // nested collections
	fastMaxKeyLen = 128 // go-yaml's own limit for a key is 1,024
)

type fastParser struct {
	data  []byte
	text  string     // data, whose substrings are the scalars' values
	lines []fastLine // the lines with content, in order
	i     int        // the next line to parse
	depth int
	// Nodes, and the collections' contents, are allocated from slabs a
	// few at a time; a collection's children are stacked until it ends.
	slab     []yaml.Node
	children []*yaml.Node
	stack    []*yaml.Node
}

type fastLine struct {
	start, end int // offsets of the line's first byte and its end (before '\n')
	indent     int // leading spaces
	num        int // 1-based
}

func (l fastLine) col(off int) int { return off - l.start + 1 }

// split finds the lines with content, and refuses input outside the
// subset's alphabet (printable ASCII, spaces, line feeds: no tabs, no CR,
// no byte order mark) and document markers and directives.
func (p *fastParser) split() bool {
	d := p.data
	p.lines = make([]fastLine, 0, bytes.Count(d, []byte("\n"))+1)
	start, num := 0, 1
	for i := 0; i <= len(d); i++ {
		if i < len(d) && d[i] != '\n' {
			if d[i]-0x20 > 0x7e-0x20 {
				return false
			}
			continue
		}
		l := fastLine{start: start, end: i, num: num}
		for l.start+l.indent < l.end && d[l.start+l.indent] == ' ' {
			l.indent++
		}
		if c := l.start + l.indent; c < l.end && d[c] != '#' {
			if l.indent == 0 && (d[c] == '%' || bytes.HasPrefix(d[c:], []byte("---")) || bytes.HasPrefix(d[c:], []byte("..."))) {
				return false
			}
			p.lines = append(p.lines, l)
		}
		start, num = i+1, num+1
	}
	return true
}

func (p *fastParser) node(kind yaml.Kind, tag, value string, line, col int) *yaml.Node {
	if len(p.slab) == 0 {
		p.slab = make([]yaml.Node, 32)
	}
	n := &p.slab[0]
	p.slab = p.slab[1:]
	n.Kind, n.Tag, n.Value, n.Line, n.Column = kind, tag, value, line, col
	return n
}

// content sets n's children to those stacked since base. Its capacity is
// its length, so that appending to it (spec's merge does) copies it rather
// than overwriting its neighbour in the slab.
func (p *fastParser) content(n *yaml.Node, base int) {
	k := len(p.stack) - base
	if len(p.children) < k {
		p.children = make([]*yaml.Node, max(k, 64))
	}
	n.Content = p.children[:k:k]
	p.children = p.children[k:]
	copy(n.Content, p.stack[base:])
	p.stack = p.stack[:base]
}

// enter and leave bound the nesting.
func (p *fastParser) enter() bool { p.depth++; return p.depth <= fastMaxDepth }
func (p *fastParser) leave()      { p.depth-- }

// mapping parses a block mapping whose keys are at column col (0-based),
// the first at offset pos of the current line.
func (p *fastParser) mapping(col, pos int) (*yaml.Node, bool) {
	defer p.leave()
	if !p.enter() {
		return nil, false
	}
	l := p.lines[p.i]
	m := p.node(yaml.MappingNode, "!!map", "", l.num, col+1)
	base := len(p.stack)
	for {
		k, after, ok := p.key(l, pos, false)
		if !ok {
			return nil, false
		}
		var v *yaml.Node
		if rest := p.skipSpaces(after, l.end); rest == l.end || p.data[rest] == '#' {
			p.i++
			v, ok = p.blockValue(col, l, after)
		} else {
			v, ok = p.inline(l, rest, col)
		}
		if !ok {
			return nil, false
		}
		p.stack = append(p.stack, k, v)
		more, ok := p.next(col)
		if !ok {
			return nil, false
		}
		if !more {
			p.content(m, base)
			return m, true
		}
		l = p.lines[p.i]
		pos = l.start + col
	}
}

// next tells how a block collection at column col goes on after an entry:
// with the next line (more), or not, or ok is false for a line indented
// past col, which go-yaml would read as a continuation or an error.
func (p *fastParser) next(col int) (more, ok bool) {
	if p.i == len(p.lines) {
		return false, true
	}
	switch l := p.lines[p.i]; {
	case l.indent < col:
		return false, true
	case l.indent > col:
		return false, false
	}
	return true, true
}

// blockValue parses what follows a key with nothing after its colon: a
// more indented collection, a list at the key's own column, or nothing (a
// null where the colon ends, as go-yaml places it).
func (p *fastParser) blockValue(col int, keyLine fastLine, after int) (*yaml.Node, bool) {
	if p.i < len(p.lines) {
		switch l := p.lines[p.i]; {
		case l.indent > col:
			if p.isEntry(l) {
				return p.sequence(l.indent, false)
			}
			return p.mapping(l.indent, l.start+l.indent)
		case l.indent == col && p.isEntry(l):
			return p.sequence(col, true)
		}
	}
	return p.node(yaml.ScalarNode, "!!null", "", keyLine.num, keyLine.col(after)), true
}

// isEntry reports whether a line starts a list entry ("- ").
func (p *fastParser) isEntry(l fastLine) bool {
	c := l.start + l.indent
	return p.data[c] == '-' && (c+1 == l.end || p.data[c+1] == ' ')
}

// sequence parses a block list whose dashes are at column col. An
// indentless one (a mapping's value, at the mapping's own column) ends at
// the first line there that is not an entry.
func (p *fastParser) sequence(col int, indentless bool) (*yaml.Node, bool) {
	defer p.leave()
	if !p.enter() {
		return nil, false
	}
	l := p.lines[p.i]
	s := p.node(yaml.SequenceNode, "!!seq", "", l.num, col+1)
	base := len(p.stack)
	for {
		rest := p.skipSpaces(l.start+col+1, l.end)
		if rest == l.end || p.data[rest] == '#' || p.data[rest] == '-' {
			return nil, false // an entry on the next lines, or a list in a list
		}
		var item *yaml.Node
		var ok bool
		if _, isKey := p.keyEnd(l, rest, false); isKey {
			item, ok = p.mapping(rest-l.start, rest)
		} else {
			item, ok = p.inline(l, rest, col)
		}
		if !ok {
			return nil, false
		}
		p.stack = append(p.stack, item)
		more, ok := p.next(col)
		if !ok {
			return nil, false
		}
		if more && !p.isEntry(p.lines[p.i]) {
			if !indentless {
				return nil, false
			}
			more = false
		}
		if !more {
			p.content(s, base)
			return s, true
		}
		l = p.lines[p.i]
	}
}

// key parses a key at offset pos of line l and returns the offset after
// its colon.
func (p *fastParser) key(l fastLine, pos int, flow bool) (*yaml.Node, int, bool) {
	i, ok := p.keyEnd(l, pos, flow)
	if !ok {
		return nil, 0, false
	}
	v := p.text[pos:i]
	tag, ok := fastTag(v)
	if !ok {
		return nil, 0, false
	}
	return p.node(yaml.ScalarNode, tag, v, l.num, l.col(pos)), i + 1, true
}

// keyEnd finds the colon of a key at offset pos of line l: letters, digits
// and "_./-", not starting with one of ".-/", then a colon and a space or
// the line's end (in a flow mapping, a space).
func (p *fastParser) keyEnd(l fastLine, pos int, flow bool) (int, bool) {
	d := p.data
	i := pos
	for i < l.end && i-pos <= fastMaxKeyLen {
		c := d[i]
		if !(isNameChar(c) || i > pos && (c == '.' || c == '-' || c == '/')) {
			break
		}
		i++
	}
	if i == pos || i-pos > fastMaxKeyLen || i == l.end || d[i] != ':' {
		return 0, false
	}
	if i+1 < l.end && d[i+1] != ' ' || flow && i+1 == l.end {
		return 0, false
	}
	return i, true
}

// inline parses a value that starts at offset pos of line l, and moves
// past the line it ends on (a flow collection may span lines). That line's
// rest may only be a comment, and the next line may not be indented past
// col (the column of the collection the value is in): go-yaml would read
// it as a continuation or an error.
func (p *fastParser) inline(l fastLine, pos, col int) (*yaml.Node, bool) {
	var n *yaml.Node
	var end int
	var ok bool
	switch p.data[pos] {
	case '[', '{':
		var li int
		n, li, end, ok = p.flow(p.i, pos, col, 0)
		l, p.i = p.lines[li], li
	case '"', '\'':
		n, end, ok = p.quoted(l, pos)
	default:
		n, end, ok = p.plain(l, pos, false)
	}
	if !ok {
		return nil, false
	}
	if t := p.skipSpaces(end, l.end); t != l.end && (p.data[t] != '#' || t == end) {
		return nil, false
	}
	p.i++
	if p.i < len(p.lines) && p.lines[p.i].indent > col {
		return nil, false
	}
	return n, true
}

func (p *fastParser) skipSpaces(i, end int) int {
	for i < end && p.data[i] == ' ' {
		i++
	}
	return i
}

// flowSkip moves from offset i of line li past spaces, comments and line
// ends to the next token of a flow collection in a block collection at
// column col. Its lines must be indented past col.
func (p *fastParser) flowSkip(li, i, col int) (int, int, bool) {
	for {
		l := p.lines[li]
		if i = p.skipSpaces(i, l.end); i < l.end && (p.data[i] != '#' || p.data[i-1] != ' ') {
			return li, i, true
		}
		if li++; li == len(p.lines) || p.lines[li].indent <= col {
			return 0, 0, false
		}
		i = p.lines[li].start
	}
}

// flow parses a flow list or mapping that starts at offset pos of line
// li, in a block collection at column col, and returns the line and the
// offset where it ends.
func (p *fastParser) flow(li, pos, col, depth int) (*yaml.Node, int, int, bool) {
	if depth >= fastMaxDepth {
		return nil, 0, 0, false
	}
	d := p.data
	kind, tag, closer := yaml.SequenceNode, "!!seq", byte(']')
	if d[pos] == '{' {
		kind, tag, closer = yaml.MappingNode, "!!map", '}'
	}
	n := p.node(kind, tag, "", p.lines[li].num, p.lines[li].col(pos))
	n.Style = yaml.FlowStyle
	base := len(p.stack)
	li, i, ok := p.flowSkip(li, pos+1, col)
	if ok && d[i] == closer {
		p.content(n, base)
		return n, li, i + 1, true
	}
	for ok {
		l := p.lines[li]
		if kind == yaml.MappingNode {
			var k *yaml.Node
			var after int
			if k, after, ok = p.key(l, i, true); !ok {
				break
			}
			p.stack = append(p.stack, k)
			if i = p.skipSpaces(after, l.end); i == l.end || d[i] == '#' {
				break // the value on the next line
			}
		}
		var item *yaml.Node
		switch d[i] {
		case '[', '{':
			item, li, i, ok = p.flow(li, i, col, depth+1)
		case '"', '\'':
			item, i, ok = p.quoted(l, i)
		default:
			item, i, ok = p.plain(l, i, true)
		}
		if !ok {
			break
		}
		p.stack = append(p.stack, item)
		if li, i, ok = p.flowSkip(li, i, col); !ok {
			break
		}
		switch d[i] {
		case closer:
			p.content(n, base)
			return n, li, i + 1, true
		case ',':
			if li, i, ok = p.flowSkip(li, i+1, col); ok && d[i] == closer {
				ok = false // a trailing comma
			}
		default:
			ok = false
		}
	}
	return nil, 0, 0, false
}

// quoted parses a single- or double-quoted scalar that closes on its line;
// a double-quoted one may have no escapes.
func (p *fastParser) quoted(l fastLine, pos int) (*yaml.Node, int, bool) {
	d := p.data
	q := d[pos]
	style := yaml.DoubleQuotedStyle
	if q == '\'' {
		style = yaml.SingleQuotedStyle
	}
	var b []byte // set once a '' appears
	from := pos + 1
	for i := pos + 1; i < l.end; i++ {
		switch {
		case q == '"' && d[i] == '\\':
			return nil, 0, false
		case d[i] != q:
		case q == '\'' && i+1 < l.end && d[i+1] == '\'':
			b = append(append(b, d[from:i]...), '\'')
			i++
			from = i + 1
		default:
			v := p.text[from:i]
			if b != nil {
				v = string(append(b, d[from:i]...))
			}
			n := p.node(yaml.ScalarNode, "!!str", v, l.num, l.col(pos))
			n.Style = style
			return n, i + 1, true
		}
	}
	return nil, 0, false
}

// plain parses a plain scalar at offset pos of line l, up to the line's
// end or a comment; in a flow collection, up to the next ',', ']' or '}'
// on the same line.
// It refuses what could end or continue a plain scalar differently in
// go-yaml: ": " and a trailing ':' in a block, any of ":?#" in a flow.
func (p *fastParser) plain(l fastLine, pos int, flow bool) (*yaml.Node, int, bool) {
	d := p.data
	// A plain scalar may start with '-' followed by a character that is
	// not a space (go-yaml's yaml_parser_fetch_next_token); the fast path
	// takes it before a letter, a digit or one of "_.-".
	if c := d[pos]; strings.IndexByte("-?:,[]{}#&*!|>'\"%@`", c) >= 0 &&
		!(c == '-' && pos+1 < l.end && (isNameChar(d[pos+1]) || d[pos+1] == '.' || d[pos+1] == '-')) {
		return nil, 0, false
	}
	end := pos
	for i := pos; ; i++ {
		if i == l.end {
			if flow {
				return nil, 0, false // perhaps continued on the next line
			}
			break
		}
		c := d[i]
		if flow {
			if c == ',' || c == ']' || c == '}' {
				break
			}
			if c == ':' || c == '?' || c == '#' || c == '[' || c == '{' {
				return nil, 0, false
			}
		} else {
			if c == ':' && (i+1 == l.end || d[i+1] == ' ') {
				return nil, 0, false
			}
			if c == '#' && d[i-1] == ' ' {
				break
			}
		}
		if c != ' ' {
			end = i + 1
		}
	}
	v := p.text[pos:end]
	tag, ok := fastTag(v)
	if !ok {
		return nil, 0, false
	}
	return p.node(yaml.ScalarNode, tag, v, l.num, l.col(pos)), end, true
}

// fastTag is the tag go-yaml's resolver gives a plain scalar (resolve in
// go.yaml.in/yaml/v3's resolve.go, step by step), where that takes no more
// than the checks below: ok is false for timestamps, binary and octal
// prefixes and merge keys, which go-yaml resolves.
func fastTag(v string) (string, bool) {
	switch v {
	case "true", "True", "TRUE", "false", "False", "FALSE":
		return "!!bool", true
	case "", "~", "null", "Null", "NULL":
		return "!!null", true
	case ".nan", ".NaN", ".NAN", ".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF", "-.inf", "-.Inf", "-.INF":
		return "!!float", true
	case "<<":
		return "", false
	}
	switch c := v[0]; {
	case c == '.':
		if _, err := strconv.ParseFloat(v, 64); err == nil {
			return "!!float", true
		}
		return "!!str", true
	case c == '+' || c == '-' || '0' <= c && c <= '9':
	default:
		return "!!str", true
	}
	digits := 0
	for digits < len(v) && '0' <= v[digits] && v[digits] <= '9' {
		digits++
	}
	if digits == 4 && len(v) > 4 && v[4] == '-' { // perhaps a timestamp
		return "", false
	}
	// A number has no character but these (strconv's syntax for base
	// prefixes, underscores and exponents, and go-yaml's float shape):
	// "8g", "15m" and "10.0.0.0/8" are strings without a failed parse.
	for i := 0; i < len(v); i++ {
		if c := v[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F' ||
			strings.IndexByte("_xXoO+-.", c) >= 0) {
			return "!!str", true
		}
	}
	plain := strings.ReplaceAll(v, "_", "")
	if _, err := strconv.ParseInt(plain, 0, 64); err == nil {
		return "!!int", true
	}
	if _, err := strconv.ParseUint(plain, 0, 64); err == nil {
		return "!!int", true
	}
	if yamlFloat(plain) {
		if _, err := strconv.ParseFloat(plain, 64); err == nil {
			return "!!float", true
		}
	}
	if strings.HasPrefix(plain, "0b") || strings.HasPrefix(plain, "-0b") ||
		strings.HasPrefix(plain, "0o") || strings.HasPrefix(plain, "-0o") {
		return "", false
	}
	return "!!str", true
}

// yamlFloat matches go-yaml's yamlStyleFloat,
// ^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$.
func yamlFloat(s string) bool {
	i := 0
	digits := func() int {
		j := i
		for i < len(s) && '0' <= s[i] && s[i] <= '9' {
			i++
		}
		return i - j
	}
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		i++
	}
	if i < len(s) && s[i] == '.' {
		i++
		if digits() == 0 {
			return false
		}
	} else {
		if digits() == 0 {
			return false
		}
		if i < len(s) && s[i] == '.' {
			i++
			digits()
		}
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		if digits() == 0 {
			return false
		}
	}
	return i == len(s)
}
