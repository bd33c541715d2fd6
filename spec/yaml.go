package spec

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"

	"github.com/sbxhq/sbx/internal/untrusted"
)

// MaxFileSize is the largest sandbox file sbx reads. Real files are a few
// kilobytes; the bound keeps a mistaken or hostile input from costing memory.
const MaxFileSize = 1 << 20

// tooLarge is the problem with a file over MaxFileSize.
func tooLarge() string {
	return fmt.Sprintf("file is larger than %d bytes (1 MiB); sandbox files are small, is this the right file?", MaxFileSize)
}

// document is one parsed file.
type document struct {
	name   string     // as the user named it, used in messages
	dir    string     // absolute directory, for resolving relative paths
	abs    string     // absolute path of the file
	digest string     // SHA-256 of the content, hex
	root   *yaml.Node // the top-level mapping
}

// readDocument reads and parses one file. It returns problems rather than
// errors for anything wrong with the content.
func readDocument(name, dir string, data []byte) (*document, Diagnostics) {
	at := func(line, col int, format string, args ...any) Diagnostics {
		return Diagnostics{{File: name, Line: line, Col: col, Message: fmt.Sprintf(format, args...)}}
	}
	if len(data) > MaxFileSize {
		return nil, at(0, 0, "%s", tooLarge())
	}
	if !utf8.Valid(data) {
		line, col := invalidUTF8(data)
		return nil, at(line, col, "file is not valid UTF-8")
	}
	if line, col, ok := tabIndent(data); ok {
		return nil, at(line, col, "tab character in indentation; YAML indents with spaces only")
	}
	root, second, err := decodeYAML(data)
	switch {
	case errors.Is(err, io.EOF):
		return nil, at(1, 1, "file is empty; a sandbox file needs at least \"version: 1\" and \"agent\"")
	case err != nil:
		line, msg := yamlError(err)
		return nil, at(line, 0, "%s", msg)
	case second != nil:
		return nil, at(second.Line, second.Column, "file holds more than one YAML document; put each sandbox in its own file")
	}
	if root.Kind == yaml.DocumentNode {
		if len(root.Content) == 0 {
			return nil, at(1, 1, "file is empty; a sandbox file needs at least \"version: 1\" and \"agent\"")
		}
		root = root.Content[0]
	}
	if root.Kind == yaml.ScalarNode && root.ShortTag() == "!!null" {
		return nil, at(root.Line, root.Column, "file is empty; a sandbox file needs at least \"version: 1\" and \"agent\"")
	}
	if root.Kind != yaml.MappingNode {
		return nil, at(root.Line, root.Column, "the top level must be a mapping of keys such as \"version\" and \"agent\", got %s", nodeKind(root))
	}
	sum := sha256.Sum256(data)
	doc := &document{name: name, dir: dir, abs: filepath.Join(dir, filepath.Base(name)), digest: hex.EncodeToString(sum[:]), root: root}
	return doc, checkKeys(doc)
}

// decodeYAML parses data with go-yaml: its first document, and the start
// of a second if there is one. An empty input is io.EOF.
func decodeYAML(data []byte) (first, second *yaml.Node, err error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	first = new(yaml.Node)
	if err := dec.Decode(first); err != nil {
		return nil, nil, err
	}
	second = new(yaml.Node)
	switch err := dec.Decode(second); {
	case errors.Is(err, io.EOF):
		return first, nil, nil
	case err != nil:
		return nil, nil, err
	}
	return first, second, nil
}

var yamlLine = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^yaml: line (\d+): (.*)$`) })

// yamlError splits a go-yaml error into its line and message.
func yamlError(err error) (int, string) {
	s := err.Error()
	if m := yamlLine().FindStringSubmatch(s); m != nil {
		line, _ := strconv.Atoi(m[1])
		return line, "YAML syntax error: " + m[2]
	}
	return 0, "YAML syntax error: " + strings.TrimPrefix(s, "yaml: ")
}

func invalidUTF8(data []byte) (line, col int) {
	line, col = 1, 1
	for len(data) > 0 {
		r, size := utf8.DecodeRune(data)
		if r == utf8.RuneError && size <= 1 {
			return line, col
		}
		if r == '\n' {
			line, col = line+1, 1
		} else {
			col++
		}
		data = data[size:]
	}
	return line, col
}

// tabIndent finds a tab in the leading whitespace of a line, which YAML
// forbids and go-yaml reports obscurely.
func tabIndent(data []byte) (line, col int, found bool) {
	for i, l := range bytes.Split(data, []byte("\n")) {
		for j, c := range l {
			if c == '\t' {
				rest := bytes.TrimLeft(l[j:], " \t")
				if len(rest) == 0 || rest[0] == '#' {
					break
				}
				return i + 1, j + 1, true
			}
			if c != ' ' {
				break
			}
		}
	}
	return 0, 0, false
}

func nodeKind(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.AliasNode:
		return "an alias"
	}
	return "a " + strings.TrimPrefix(n.ShortTag(), "!!") + " value"
}

// checkKeys reports what the rest of the loader must not see: duplicate
// keys, merge keys, non-scalar keys and unknown tags.
func checkKeys(doc *document) Diagnostics {
	c := &keyChecker{doc: doc}
	c.walk(doc.root)
	return c.ds
}

type keyChecker struct {
	doc  *document
	path fieldPath
	ds   Diagnostics
}

func (c *keyChecker) report(n *yaml.Node, path, message string) {
	c.ds = append(c.ds, Diagnostic{File: c.doc.name, Line: n.Line, Col: n.Column, Path: path, Message: message})
}

// walk checks n and what is under it. A parsed tree shares no node (an
// alias is a node of its own, and is not followed), so nothing is checked
// twice.
func (c *keyChecker) walk(n *yaml.Node) {
	if n.Tag != "" && !strings.HasPrefix(n.Tag, "!!") && n.Kind != yaml.AliasNode {
		switch {
		case n.Tag == AppendTag && n.Kind == yaml.SequenceNode:
			// A layer's list that adds to the one before (merge); in a
			// sandbox's first file, resolve refuses it.
		case n.Tag == AppendTag:
			c.report(n, c.path.String(), AppendTag+" applies to a list only (a mapping merges by key without it)")
		case !strings.HasPrefix(n.Tag, "tag:yaml.org,2002:"):
			c.report(n, c.path.String(), fmt.Sprintf("unsupported YAML tag %q", n.Tag))
		}
	}
	switch n.Kind {
	case yaml.MappingNode:
		var first map[string]*yaml.Node // for a long mapping; a short one is searched
		if len(n.Content) > 32 {
			first = map[string]*yaml.Node{}
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if k.Kind != yaml.ScalarNode {
				c.report(k, c.path.String(), "keys must be plain strings")
				continue
			}
			if k.ShortTag() == "!!merge" {
				c.report(k, c.path.String(), "merge keys (<<) are not supported; write the keys out, or use sandbox.local.yaml for overrides")
				continue
			}
			c.path = append(c.path, pathStep{key: k.Value, index: -1})
			if f := firstKey(n, i, first); f != k {
				c.report(k, c.path.String(), fmt.Sprintf("duplicate key %q (first defined at line %d)", k.Value, f.Line))
			} else {
				c.walk(v)
			}
			c.path = c.path[:len(c.path)-1]
		}
	case yaml.SequenceNode:
		for i, e := range n.Content {
			c.path = append(c.path, pathStep{index: i})
			c.walk(e)
			c.path = c.path[:len(c.path)-1]
		}
	}
}

// firstKey returns the first plain key of mapping m, up to its i'th
// content node, spelled as that node's; first, when not nil, remembers
// them for a long mapping.
func firstKey(m *yaml.Node, i int, first map[string]*yaml.Node) *yaml.Node {
	k := m.Content[i]
	if first != nil {
		if f, ok := first[k.Value]; ok {
			return f
		}
		first[k.Value] = k
		return k
	}
	for j := 0; j < i; j += 2 {
		if f := m.Content[j]; f.Value == k.Value && f.Kind == yaml.ScalarNode && f.ShortTag() != "!!merge" {
			return f
		}
	}
	return k
}

// fieldPath is a field path built up during a walk, spelled out only when
// a message needs it: network.allow[2].
type fieldPath []pathStep

type pathStep struct {
	key   string
	index int // -1 for a key
}

func (fp fieldPath) String() string {
	path := ""
	for _, s := range fp {
		if s.index >= 0 {
			path += "[" + strconv.Itoa(s.index) + "]"
		} else {
			path = joinKey(path, s.key)
		}
	}
	return path
}

func joinKey(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// toValue converts a node tree into the plain values the schema validator
// takes. Aliases are expanded within a budget, so a "billion laughs"
// document fails fast instead of exhausting memory.
type converter struct {
	budget int
}

var errTooLarge = errors.New("document expands to too many values (a YAML alias bomb?); anchors and aliases may repeat only a little")

func newConverter(root *yaml.Node) *converter {
	return &converter{budget: 4*countNodes(root) + 10000}
}

func countNodes(n *yaml.Node) int {
	c := 1
	for _, k := range n.Content {
		c += countNodes(k)
	}
	return c
}

func (c *converter) value(n *yaml.Node) (any, error) {
	c.budget--
	if c.budget < 0 {
		return nil, errTooLarge
	}
	switch n.Kind {
	case yaml.AliasNode:
		if n.Alias == nil {
			return nil, nil
		}
		return c.value(n.Alias)
	case yaml.DocumentNode:
		if len(n.Content) == 0 {
			return nil, nil
		}
		return c.value(n.Content[0])
	case yaml.MappingNode:
		m := make(map[string]any, len(n.Content)/2)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i]
			if k.Kind != yaml.ScalarNode || k.ShortTag() == "!!merge" {
				continue // reported by checkKeys
			}
			if _, dup := m[k.Value]; dup {
				continue
			}
			v, err := c.value(n.Content[i+1])
			if err != nil {
				return nil, err
			}
			m[k.Value] = v
		}
		return m, nil
	case yaml.SequenceNode:
		s := make([]any, 0, len(n.Content))
		for _, e := range n.Content {
			v, err := c.value(e)
			if err != nil {
				return nil, err
			}
			s = append(s, v)
		}
		return s, nil
	}
	return scalarValue(n), nil
}

// decimalRE is an integer written in decimal, as YAML 1.2's core schema
// reads it.
var decimalRE = regexp.MustCompile(`^[-+]?[0-9][0-9_]*$`)

// scalarValue types a scalar the way a reader of the file would: YAML 1.2
// core types only. Timestamps, binary and other tags stay strings, leading
// zeros are decimal (010 is 10, never octal 8), and NaN or infinities stay
// strings so they are reported rather than compared.
func scalarValue(n *yaml.Node) any {
	switch n.ShortTag() {
	case "!!null":
		return nil
	case "!!bool":
		if b, err := strconv.ParseBool(strings.ToLower(n.Value)); err == nil {
			return b
		}
	case "!!int":
		s := strings.ReplaceAll(n.Value, "_", "")
		base := 0
		if decimalRE.MatchString(n.Value) {
			base = 10
		}
		if i, err := strconv.ParseInt(s, base, 64); err == nil {
			return int(i)
		}
	case "!!float":
		if f, err := strconv.ParseFloat(strings.ReplaceAll(n.Value, "_", ""), 64); err == nil && !math.IsNaN(f) && !math.IsInf(f, 0) {
			return f
		}
	}
	return n.Value
}

// retag gives an interpolated plain scalar the type its new text has, as if
// the text had been written in the file: cpus: ${CPUS:-4} is the number 4.
func retag(n *yaml.Node) {
	if n.Style != 0 {
		return // quoted: stays a string
	}
	v := n.Value
	switch {
	case v == "true" || v == "false":
		n.Tag = "!!bool"
	case decimalRE.MatchString(v):
		n.Tag = "!!int"
	default:
		if _, err := strconv.ParseFloat(v, 64); err == nil && strings.ContainsAny(v, "0123456789") && !strings.ContainsAny(v, "xXnN") {
			n.Tag = "!!float"
		} else {
			n.Tag = "!!str"
		}
	}
}

// deref follows an alias to its target.
func deref(n *yaml.Node) *yaml.Node {
	for i := 0; n != nil && n.Kind == yaml.AliasNode && i < 100; i++ {
		n = n.Alias
	}
	return n
}

// lookup returns the value node for key in a mapping node, and its key node.
func lookupKey(m *yaml.Node, key string) (k, v *yaml.Node) {
	m = deref(m)
	if m == nil || m.Kind != yaml.MappingNode {
		return nil, nil
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key && m.Content[i].Kind == yaml.ScalarNode {
			return m.Content[i], deref(m.Content[i+1])
		}
	}
	return nil, nil
}

// readFile reads a sandbox file of at most MaxFileSize bytes. It must be
// a regular file: the open does not block (a FIFO named sandbox.local.yaml
// is an error at once, not a hang) and what it opened is checked, not a
// stat before it.
func readFile(path string) ([]byte, error) {
	return untrusted.ReadPath(path, MaxFileSize)
}
