package dfagen

import (
	"go/format"
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/sbxhq/sbx/internal/dfa"
)

// patterns exercise what Build supports: anchors at either end or
// neither, alternations whose branches share prefixes, bounded and
// unbounded repetition, classes with Unicode ranges and negations,
// case folding, dot with and without s, and the patterns sbx holds.
var patterns = []string{
	``, `a`, `^`, `$`, `^$`, `^a`, `a$`, `^a$`, `\Aab\z`, `a|b`, `a$|^b`, `^(a|ab)(c|bcd)$`,
	`x*`, `^x*$`, `x+y`, `^x?y{2,4}$`, `^(ab){0,3}$`, `[^a]`, `^[^a-c]+$`, `.`, `^.$`, `(?s)^.$`, `^.*$`, `(?s).+x`,
	`^\pL+$`, `^[\p{Greek}\d]{1,3}$`, `^[^\p{Lu}]$`, `(?i)^k$`, `(?i)straße`, `(?i)^[a-fσ]+$`, `(?U)^a+?b$`,
	`^\s*$`, `^\w+\W`, `\x{10FFFF}`, `^\x{FFFD}$`, `^[\x{80}-\x{10FFFF}]+$`, `^µs$`, `[a-z]{0,61}[0-9]$`, `a^b`, `$a`,
	// sbx's own.
	`^[A-Za-z_][A-Za-z0-9_]*$`,
	`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`,
	`^[a-z0-9]([-a-z0-9.:]*[a-z0-9])?(/[a-z0-9]([-a-z0-9._]*[a-z0-9])?)*$`,
	`^[0-9]+(\.[0-9]+)?(Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E)?$`,
	`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`,
	`^((\[[0-9a-fA-F:.]+\]|[0-9.]+):)?([0-9]{0,5}:)?[0-9]{1,5}(/(tcp|udp))?$`,
	`^[0-9]+(\.[0-9]+)?\s*([kKmMgGtT]([iI]?[bB])?|[bB])?$`,
	`^(host|([a-z_][a-z0-9_.-]*|[0-9]+)(:([a-z_][a-z0-9_.-]*|[0-9]+))?)$`,
	`^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$`,
	`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`,
	`^[-+]?[0-9][0-9_]*$`,
}

// TestAgreesWithRegexp holds every automaton to regexp's MatchString on
// thousands of inputs.
func TestAgreesWithRegexp(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, p := range patterns {
		d, err := Build(p)
		if err != nil {
			t.Errorf("Build(%q): %v", p, err)
			continue
		}
		inputs, err := Inputs(p, rng, 3000)
		if err != nil {
			t.Fatal(err)
		}
		agree(t, d, inputs)
	}
}

// agree compares d with the regexp of its pattern, and fails unless
// the inputs have both outcomes (where the pattern has both).
func agree(t *testing.T, d *dfa.DFA, inputs []string) {
	t.Helper()
	disagree, yes := Compare(d, inputs)
	for _, s := range disagree {
		t.Errorf("%q: Match(%q) = %v, regexp says the opposite", d.Pattern, s, d.Match(s))
	}
	if !oneOutcome[d.Pattern] && (yes == 0 || yes == len(inputs)) {
		t.Errorf("%q: %d of %d inputs match: they test one outcome only", d.Pattern, yes, len(inputs))
	}
}

// oneOutcome are the patterns that match everything or nothing.
var oneOutcome = map[string]bool{``: true, `^`: true, `$`: true, `x*`: true, `a^b`: true, `$a`: true}

// TestEdgeCases pins answers the random inputs may miss, each worked out
// from regexp's documentation rather than by running it.
func TestEdgeCases(t *testing.T) {
	for _, tc := range []struct {
		pattern, s string
		want       bool
	}{
		{`^a$`, "a\n", false}, // $ is \z outside multi-line mode
		{`^a$`, "a", true},
		{`^.$`, "\xff", true}, // an invalid byte is one rune, U+FFFD
		{`^.$`, "\xc3", true},
		{`^..$`, "\xe2\x82", true}, // a cut sequence is one rune per byte
		{`^.$`, "\xe2\x82\xac", true},
		{`^\x{FFFD}$`, "\xff", true},
		{`^\x{FFFD}$`, "\xed\xa0\x80", false}, // a surrogate is three errors
		{`^.$`, "\n", false},
		{`(?s)^.$`, "\n", true},
		{`(?i)^k$`, "\u212a", true}, // Kelvin sign folds to k
		{`(?i)^[a-fσ]+$`, "ς", true},
		{`^µs$`, "μs", false}, // micro sign, not Greek mu
		{`a|b`, "xxb", true},
		{`a$|^b`, "ba", true},
		{`a$|^b`, "ab", false},
		{`^(a|ab)(c|bcd)$`, "abcd", true},
		{`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`, strings.Repeat("a", 63), true},
		{`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`, strings.Repeat("a", 64), false},
		{`^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$`, strings.Repeat("a", 128), true},
		{`^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$`, strings.Repeat("a", 129), false},
		{`a^b`, "a^b", false},
		{``, "", true},
	} {
		d, err := Build(tc.pattern)
		if err != nil {
			t.Errorf("Build(%q): %v", tc.pattern, err)
			continue
		}
		if got := d.Match(tc.s); got != tc.want {
			t.Errorf("%q: Match(%q) = %v, want %v", tc.pattern, tc.s, got, tc.want)
		}
		if regexp.MustCompile(tc.pattern).MatchString(tc.s) != tc.want {
			t.Errorf("%q on %q: the regexp package disagrees with the table", tc.pattern, tc.s)
		}
	}
}

// TestRefuses: what Build cannot express exactly is an error.
func TestRefuses(t *testing.T) {
	for _, p := range []string{`\bx`, `x\B`, `(?m)^x`, `(?m)x$`, `(`, `x{1001}`, strings.Repeat("a", 5000), `^(a|b)*a(a|b){12}$`} {
		if d, err := Build(p); err == nil {
			t.Errorf("Build(%q) = %d states, want an error", p, len(d.AtEnd))
		}
	}
}

// TestMinimal: equivalent states are merged; an anchored pattern reaches
// the dead state and stops reading, an unanchored one the matched state.
func TestMinimal(t *testing.T) {
	for _, tc := range []struct {
		pattern string
		states  int // including dead and matched
	}{
		{`^a$`, 4},      // start, after a
		{`^(a|a)$`, 4},  // the same
		{`^a*$`, 3},     // one live state, accepting
		{`a`, 3},        // start; after an a it has matched
		{`^[ab]c$`, 5},  // start, after [ab], after c
		{`^$|^$`, 3},    // start only
		{`^(ab)+$`, 5},  // start, after a, after b (accepting)
		{`^x{0,3}$`, 6}, // start, after 1, 2, 3 x
	} {
		d, err := Build(tc.pattern)
		if err != nil {
			t.Fatal(err)
		}
		if len(d.AtEnd) != tc.states {
			t.Errorf("%q: %d states, want %d:\n%s", tc.pattern, len(d.AtEnd), tc.states, Literal(d))
		}
	}
}

// TestLiteral: the Go source is valid and says what the automaton holds.
func TestLiteral(t *testing.T) {
	d, err := Build(`^é?[a-c]$`)
	if err != nil {
		t.Fatal(err)
	}
	src := "package p\n\nvar x = " + Literal(d) + "\n"
	if _, err := format.Source([]byte(src)); err != nil {
		t.Fatalf("%v:\n%s", err, src)
	}
	for _, want := range []string{`Pattern: "^é?[a-c]$"`, `ASCII: "\x00`, "Ranges: []dfa.Range{{Lo: 0x80, Class: 0}, {Lo: 0xe9, Class: ", "// dead", "// matched"} {
		if !strings.Contains(src, want) {
			t.Errorf("source lacks %q:\n%s", want, src)
		}
	}
	if len(d.ASCII) != utf8.RuneSelf || len(d.Next) != d.Classes*len(d.AtEnd) {
		t.Errorf("ASCII is %d bytes, Next %d entries for %d classes and %d states", len(d.ASCII), len(d.Next), d.Classes, len(d.AtEnd))
	}
}

// FuzzBuild compares Build's automaton with regexp on any pattern it
// accepts and any input.
func FuzzBuild(f *testing.F) {
	for _, p := range patterns {
		f.Add(p, "")
		f.Add(p, "abc")
	}
	f.Add(`^[^\n]µ(?i:x)$`, "\xffµX")
	f.Fuzz(func(t *testing.T, pattern, s string) {
		if len(pattern) > 256 || len(s) > 1024 {
			return // the regexp package takes seconds on a long literal
		}
		re, err := regexp.Compile(pattern)
		if err != nil {
			return
		}
		d, err := Build(pattern)
		if err != nil {
			if !strings.Contains(err.Error(), "assertion") && !strings.Contains(err.Error(), "too large") {
				t.Fatalf("Build(%q): %v, which regexp compiles", pattern, err)
			}
			return
		}
		if got, want := d.Match(s), re.MatchString(s); got != want {
			t.Fatalf("%q: Match(%q) = %v, regexp says %v", pattern, s, got, want)
		}
		inputs, err := Inputs(pattern, rand.New(rand.NewPCG(uint64(len(s)), 1)), 50)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range inputs {
			if got, want := d.Match(s), re.MatchString(s); got != want {
				t.Fatalf("%q: Match(%q) = %v, regexp says %v", pattern, s, got, want)
			}
		}
	})
}
