package spec

import (
	"bytes"
	"fmt"
	"maps"
	"math/rand"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/sbxhq/sbx/internal/fixture"
)

// sameTree compares two trees in every field spec reads: all but the
// comments.
func sameTree(got, want *yaml.Node, path string) error {
	switch {
	case got.Kind != want.Kind, got.Style != want.Style, got.Tag != want.Tag, got.Value != want.Value,
		got.Anchor != want.Anchor, (got.Alias == nil) != (want.Alias == nil),
		got.Line != want.Line, got.Column != want.Column, len(got.Content) != len(want.Content):
		return fmt.Errorf("%s: fast %s, go-yaml %s", path, describe(got), describe(want))
	}
	for i := range got.Content {
		if err := sameTree(got.Content[i], want.Content[i], fmt.Sprintf("%s/%d", path, i)); err != nil {
			return err
		}
	}
	return nil
}

func describe(n *yaml.Node) string {
	return fmt.Sprintf("{kind %d style %d tag %q value %q anchor %q alias %v at %d:%d, %d children}",
		n.Kind, n.Style, n.Tag, n.Value, n.Anchor, n.Alias != nil, n.Line, n.Column, len(n.Content))
}

// checkFast fails when the fast path accepts what go-yaml rejects or
// gives a different tree; it reports whether the fast path took data.
func checkFast(t testing.TB, name string, data []byte) bool {
	t.Helper()
	got, ok := parseFast(data)
	if !ok {
		return false
	}
	want, second, err := decodeYAML(data)
	if err != nil || second != nil {
		t.Fatalf("%s: the fast path accepted what go-yaml rejects (%v, a second document: %v):\n%s", name, err, second != nil, data)
	}
	if err := sameTree(got, want, ""); err != nil {
		t.Fatalf("%s: %v\n%s", name, err, data)
	}
	return true
}

// yamlCorpus is every YAML file in the repository that is not generated.
func yamlCorpus(t testing.TB) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	err := filepath.WalkDir("..", func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if ext := filepath.Ext(path); !d.IsDir() && (ext == ".yaml" || ext == ".yml" || strings.HasSuffix(path, ".yaml.example")) {
			data, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			files[path] = data
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 60 {
		t.Fatalf("only %d YAML files found", len(files))
	}
	return files
}

// TestFastYAML holds the fast path to go-yaml on every YAML file in the
// repository and on edits of them (a byte inserted, deleted or replaced,
// a line dropped, doubled, swapped or re-indented), and checks that it
// takes the files people write: every example.
func TestFastYAML(t *testing.T) {
	corpus := yamlCorpus(t)
	for name, data := range corpus {
		fast := checkFast(t, name, data)
		if !fast && (strings.HasPrefix(name, "../examples/") || strings.HasSuffix(name, "sandbox.yaml.example")) {
			t.Errorf("%s: the fast path does not take an example", name)
		}
	}
	// The same edits every run, so a failure can be rerun.
	rng := rand.New(rand.NewSource(1))
	alphabet := []byte(" \n:-#\"'[]{},.0123456789aeZ_/~*&!|>?%@\\\t")
	edits, taken := 0, 0
	for _, name := range slices.Sorted(maps.Keys(corpus)) {
		data := corpus[name]
		for range 150 {
			e := edit(rng, data, alphabet)
			edits++
			if checkFast(t, name+" (edited)", e) {
				taken++
			}
		}
	}
	t.Logf("%d files, %d edits, %d taken by the fast path", len(corpus), edits, taken)
	// Most edits keep a file in the subset; a fast path that refused them
	// all would make this test prove nothing.
	if taken < edits/4 {
		t.Errorf("the fast path took only %d of %d edits", taken, edits)
	}
}

func edit(rng *rand.Rand, data []byte, alphabet []byte) []byte {
	if len(data) == 0 {
		return []byte{alphabet[rng.Intn(len(alphabet))]}
	}
	at := rng.Intn(len(data))
	switch rng.Intn(7) {
	case 0: // insert a byte
		return append(append(append([]byte{}, data[:at]...), alphabet[rng.Intn(len(alphabet))]), data[at:]...)
	case 1: // delete a byte
		return append(append([]byte{}, data[:at]...), data[at+1:]...)
	case 2: // replace a byte
		e := append([]byte{}, data...)
		e[at] = alphabet[rng.Intn(len(alphabet))]
		return e
	}
	lines := bytes.SplitAfter(data, []byte("\n"))
	i := rng.Intn(len(lines))
	var out [][]byte
	switch rng.Intn(4) {
	case 0: // drop a line
		out = append(append(out, lines[:i]...), lines[i+1:]...)
	case 1: // double it
		out = append(append(append(out, lines[:i+1]...), lines[i]), lines[i+1:]...)
	case 2: // swap it with the next
		out = append(out, lines...)
		if i+1 < len(out) {
			out[i], out[i+1] = out[i+1], out[i]
		}
	case 3: // indent or dedent it
		out = append(out, lines...)
		if rng.Intn(2) == 0 {
			out[i] = append([]byte("  "), out[i]...)
		} else {
			out[i] = bytes.TrimPrefix(out[i], []byte(" "))
		}
	}
	return bytes.Join(out, nil)
}

// TestFastYAMLCases are the subset's edges, each held to go-yaml (taken)
// or left to it (refused).
func TestFastYAMLCases(t *testing.T) {
	for _, tc := range []struct {
		in    string
		taken bool
	}{
		{"a: 1\n", true},
		{"a:\n", true},
		{"a:   # empty\nb: 2\n", true},
		{"a:\n  b: c\n  d:\n    - e\n    - f: g\n      h: i\n", true},
		{"a:\n- x\n- y\nb: z\n", true},
		{"a: [x, 'y''z', \"w\", {k: v, l: [m]}, []]\nb: {}\n", true},
		{"a: x # comment\n# comment\nb: \"q\" # c\n", true},
		{"a: 010\nb: 0999\nc: 1_000\nd: 1e3\ne: -1\nf: +2\ng: 0x1F\nh: 1.5\ni: 12:30\nj: 8g\nk: 99999999999999999999\nl: -x\n", true},
		{"a: [sh, -c, --x, -.5]\nb: - c\n", false}, // a list in a mapping value
		{"a: [sh, -c, --x, -.5]\nb: -\n", false},
		{"a: [sh, -c, --x, -.5]\n", true},
		{"a: True\nb: NULL\nc: ~\nd: yes\ne: off\nf: y\n", true},
		{"a: url://x:y/z\nb: a#b\nc: a b  c\n", true},
		{"a: ${X:-y}\nb: \"${Y}\"\n", true},
		{"key:\n  - a\n  -  b\n", true},
		{"- a\n", false},             // a list at the top
		{"a: 1\n---\nb: 2\n", false}, // two documents
		{"a: |\n  x\n", false},       // a block scalar
		{"a: &x 1\nb: *x\n", false},  // anchors and aliases
		{"a: !t x\n", false},         // a tag
		{"a: x\n  y\n", false},       // a continued plain scalar
		{"a: \"x\ny\"\n", false},     // a quoted scalar over two lines
		{"a: [x,\n  y, # c\n\n  {k: v,\n   l: w}]\n", true},
		{"a: [x\n  , y]\n", false}, // a plain scalar that may go on
		{"a: [x,\ny]\n", false},    // a flow list's line not indented
		{"a: {k:\n   v}\n", false}, // a value on the next line
		{"a: \"x\\ty\"\n", false},  // an escape
		{"a: x: y\n", false},       // a mapping value where none may be
		{"a: [x,]\n", false},       // a trailing comma
		{"a: 2001-12-14\n", false}, // a timestamp
		{"a: .inf\nb: .5\nc: .x\nd: -.INF\ne: 1.inf\n", true},
		{"a: .inf\nb: .5\nc: .x\nd: +.INF\ne: 1.inf\nf: ./x\n", true},
		{"<<: x\n", false},             // a merge key
		{"a:\tb\n", false},             // a tab
		{"a: b\r\n", false},            // a CR
		{"a: \u00e9\n", false},         // not ASCII
		{"a:\n  b: 1\n c: 2\n", false}, // a dedent to no collection's column
		{"a:\n  - x\n  b: y\n", false}, // a key after a list at its column
		{"\"a\": 1\n", false},          // a quoted key
		{deep(40), false},              // too deep
		{deep(20), true},
		{"a: " + strings.Repeat("[", 40) + strings.Repeat("]", 40) + "\n", false},
	} {
		_, ok := parseFast([]byte(tc.in))
		if ok != tc.taken {
			t.Errorf("parseFast(%q) took it: %v, want %v", tc.in, ok, tc.taken)
		}
		checkFast(t, fmt.Sprintf("%q", tc.in), []byte(tc.in))
	}
}

// TestFastTag holds fastTag to go-yaml's resolver on every string of up
// to three characters, and a sample of longer ones, drawn from what
// numbers, booleans and nulls are made of.
func TestFastTag(t *testing.T) {
	const alphabet = "019_xobeE.+-aTn:~"
	var values []string
	var gen func(prefix string, n int)
	gen = func(prefix string, n int) {
		values = append(values, prefix)
		if n > 0 {
			for _, c := range alphabet {
				gen(prefix+string(c), n-1)
			}
		}
	}
	gen("", 3)
	rng := rand.New(rand.NewSource(1))
	for range 3000 {
		b := make([]byte, 4+rng.Intn(6))
		for i := range b {
			b[i] = alphabet[rng.Intn(len(alphabet))]
		}
		values = append(values, string(b))
	}
	values = append(values, "true", "True", "TRUE", "yes", "off", "null", "NULL", ".inf", "-.Inf", ".NaN", "<<",
		"2001-12-14", "2001-12-14t21:59:43.10Z", "0b101", "-0b101", "0o17", "-0o17", "0x_1F", "1_000.5", "1e1000",
		"9223372036854775808", "18446744073709551616", "-9223372036854775809", "0777", "0999", "+0x10")
	checked := 0
	for _, v := range values[1:] {
		tag, ok := fastTag(v)
		if !ok {
			continue
		}
		first, _, err := decodeYAML([]byte("a: " + v + "\n"))
		if err != nil || len(first.Content) == 0 || len(first.Content[0].Content) != 2 {
			continue // not a plain scalar here
		}
		if n := first.Content[0].Content[1]; n.Kind == yaml.ScalarNode && n.Value == v {
			checked++
			if n.Tag != tag {
				t.Errorf("fastTag(%q) = %s, go-yaml %s", v, tag, n.Tag)
			}
		}
	}
	if checked < len(values)/2 {
		t.Errorf("only %d of %d values checked", checked, len(values))
	}
}

// TestFastYAMLHostileOverlay plays the agent, which can write
// sandbox.local.yaml: an overlay of almost 1 MiB made to be costly (60,000
// keys in one mapping with the last a duplicate of the first, a flow list
// of 10,000 entries, nesting to the fast path's bound) is taken by the
// fast path, read as go-yaml reads it, reported at the duplicate, and
// loaded within a bounded allocation (94 MiB when written); one level
// deeper goes to go-yaml.
func TestFastYAMLHostileOverlay(t *testing.T) {
	var b strings.Builder
	b.WriteString("env:\n")
	for i := range 60000 {
		fmt.Fprintf(&b, "  K%d: v\n", i)
	}
	b.WriteString("  K0: again\nmounts: [")
	for i := range 10000 {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "/m%d", i)
	}
	b.WriteString("]\n")
	b.WriteString(deep(fastMaxDepth - 1))
	data := []byte(b.String())
	if len(data) > MaxFileSize {
		t.Fatalf("overlay of %d bytes, over MaxFileSize", len(data))
	}
	if !checkFast(t, "hostile overlay", data) {
		t.Fatal("the fast path refused the hostile overlay")
	}
	if _, ok := parseFast([]byte(deep(fastMaxDepth + 1))); ok {
		t.Errorf("the fast path took nesting past its bound")
	}

	dir := t.TempDir()
	base := filepath.Join(dir, "sandbox.yaml")
	for name, content := range map[string][]byte{"sandbox.yaml": []byte("version: 1\nagent: claude\n"), "sandbox.local.yaml": data} {
		if err := os.WriteFile(filepath.Join(dir, name), content, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	var err error
	fixture.Promptly(t, func() { _, err = Load([]string{base}, Options{}) })
	runtime.ReadMemStats(&after)
	want := filepath.Join(dir, "sandbox.local.yaml") + ":60002:3: env.K0: duplicate key \"K0\" (first defined at line 2)"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("Load = %.300v, want a problem %s", err, want)
	}
	alloc := after.TotalAlloc - before.TotalAlloc
	t.Logf("loading the overlay allocated %d MiB", alloc>>20)
	if alloc > 128<<20 {
		t.Errorf("loading the overlay allocated %d MiB, want under 128 MiB", alloc>>20)
	}
}

func deep(n int) string {
	var b strings.Builder
	for i := range n {
		b.WriteString(strings.Repeat(" ", i) + "a:\n")
	}
	return b.String()
}

// FuzzFastYAML holds the fast path to go-yaml on any input. As a normal
// test it runs the seeds; fuzz longer with
// go test ./spec -run '^$' -fuzz FuzzFastYAML -fuzztime 10m
func FuzzFastYAML(f *testing.F) {
	for _, data := range yamlCorpus(f) {
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		checkFast(t, "input", data)
	})
}
