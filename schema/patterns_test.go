package schema

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/sbxhq/sbx/internal/dfa/dfagen"
)

// TestPatternsAgree holds the automaton of every pattern in the
// validator (compiled.go) to the regexp package, the oracle of what a
// pattern accepts: on strings each pattern generates and edits of them,
// on every string the schema's examples hold, and on every key and
// string of the repository's sandbox files, each string against every
// pattern.
func TestPatternsAgree(t *testing.T) {
	var withPattern []*node
	for _, n := range nodes(compiled()) {
		if n.pattern != "" || n.re != nil {
			withPattern = append(withPattern, n)
		}
	}
	if len(withPattern) < 10 {
		t.Fatalf("found %d nodes with a pattern; the walk is broken", len(withPattern))
	}

	var shared []string
	var strs func(v any)
	strs = func(v any) {
		switch v := v.(type) {
		case string:
			shared = append(shared, v)
		case []any:
			for _, e := range v {
				strs(e)
			}
		case map[string]any:
			for k, e := range v {
				shared = append(shared, k)
				strs(e)
			}
		}
	}
	var examples func(v any)
	examples = func(v any) {
		switch v := v.(type) {
		case []any:
			for _, e := range v {
				examples(e)
			}
		case map[string]any:
			for k, e := range v {
				if k == "examples" {
					strs(e)
				} else {
					examples(e)
				}
			}
		}
	}
	s, err := Compile()
	if err != nil {
		t.Fatal(err)
	}
	examples(s.Raw())
	fromSchema := len(shared)
	for _, doc := range repositoryFiles(t) {
		strs(doc)
	}
	slices.Sort(shared)
	shared = slices.Compact(shared)
	if fromSchema < 20 || len(shared) < 200 {
		t.Fatalf("%d strings from the schema's examples, %d in all: the collection is broken", fromSchema, len(shared))
	}

	rng := rand.New(rand.NewPCG(7, 11))
	for _, n := range withPattern {
		if n.re == nil || n.re.Pattern != n.pattern {
			t.Errorf("%s: pattern %q has no automaton of its own", n.loc, n.pattern)
			continue
		}
		inputs, err := dfagen.Inputs(n.pattern, rng, 5000)
		if err != nil {
			t.Fatal(err)
		}
		inputs = append(inputs, shared...)
		disagree, yes := dfagen.Compare(n.re, inputs)
		for _, s := range disagree {
			t.Errorf("%s: pattern %q: automaton says %v of %q, regexp the opposite", n.loc, n.pattern, n.re.Match(s), s)
		}
		if yes == 0 || yes == len(inputs) {
			t.Errorf("%s: pattern %q: %d inputs matched: one outcome only", n.loc, n.pattern, yes)
		}
	}
}

// TestCompareInts holds the integer fast path of the bounds to big.Rat's
// comparison, which it stands for.
func TestCompareInts(t *testing.T) {
	values := []any{0, 1, -1, 15, 16, 17, 255, 256, 65535, 65536, 100000, 1048576, math.MaxInt64, math.MinInt64, int64(-7), int64(1 << 40)}
	bounds := []string{"0", "1", "-1", "16", "256", "65535", "100000", "1048576", "9223372036854775807", "-9223372036854775808", "1/2", "-3/2", "99999999999999999999"}
	for _, v := range values {
		for _, b := range bounds {
			want := rat(v).Cmp(ratOf(b))
			got, ok := compareInts(v, b)
			if !ok {
				if !strings.Contains(b, "/") && len(b) < 19 {
					t.Errorf("compareInts(%v, %s) declined an integer bound", v, b)
				}
				continue
			}
			if got != want {
				t.Errorf("compareInts(%v, %s) = %d, big.Rat says %d", v, b, got, want)
			}
		}
	}
	for _, v := range []any{0.5, float64(3), json.Number("4"), uint64(1)} {
		if _, ok := compareInts(v, "1"); ok {
			t.Errorf("compareInts(%v (%T), 1) compared; only int and int64 are exact here", v, v)
		}
	}
}
