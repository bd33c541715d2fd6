// Package dfa matches strings with regular expressions that were turned
// into deterministic automata ahead of time (by package dfagen, when a
// test regenerates the Go source that holds them), so that a process
// pays nothing to compile them: a DFA is a statically initialised table,
// and Match costs one table lookup per rune.
//
// A DFA accepts exactly the strings regexp.MustCompile(Pattern).MatchString
// accepts, reading the input as regexp does: rune by rune, a byte that
// does not start a valid UTF-8 sequence being one utf8.RuneError.
// dfagen's tests, and those of every package holding generated DFAs, hold
// it to the regexp package.
package dfa

import "unicode/utf8"

// The two states every DFA has at these numbers; its live states follow.
const (
	// Dead is the state from which no continuation matches.
	Dead = 0
	// Matched is the state in which a match has been found, whatever
	// follows (an unanchored pattern's match ended here).
	Matched = 1
)

// DFA is a deterministic automaton over classes of runes.
type DFA struct {
	// Pattern is the regular expression, in regexp's syntax, the DFA was
	// built from.
	Pattern string
	// ASCII holds the class of each rune below utf8.RuneSelf, at its
	// index (128 bytes).
	ASCII string
	// Ranges classes the other runes: a rune's class is that of the last
	// range whose Lo is at most the rune. The first range's Lo is
	// utf8.RuneSelf.
	Ranges []Range
	// Classes is how many classes there are.
	Classes int
	// Start is the state before the first rune.
	Start uint16
	// Next is the transition table: Next[state*Classes+class].
	Next []uint16
	// AtEnd says, for each state, whether input that ends there matches.
	AtEnd []bool
}

// Range is a run of runes of one class, from Lo up to the next range's Lo.
type Range struct {
	Lo    rune
	Class uint8
}

// Match reports whether s contains a match of the DFA's pattern, as
// regexp's MatchString does.
func (d *DFA) Match(s string) bool {
	st := int(d.Start)
	for i := 0; i < len(s) && st > Matched; {
		var class int
		if c := s[i]; c < utf8.RuneSelf {
			class = int(d.ASCII[c])
			i++
		} else {
			r, size := utf8.DecodeRuneInString(s[i:])
			class = d.class(r)
			i += size
		}
		st = int(d.Next[st*d.Classes+class])
	}
	return d.AtEnd[st]
}

// class is the class of a rune at or above utf8.RuneSelf.
func (d *DFA) class(r rune) int {
	lo, hi := 0, len(d.Ranges) // the answer is in [lo, hi)
	for hi-lo > 1 {
		mid := int(uint(lo+hi) >> 1)
		if d.Ranges[mid].Lo <= r {
			lo = mid
		} else {
			hi = mid
		}
	}
	return int(d.Ranges[lo].Class)
}
