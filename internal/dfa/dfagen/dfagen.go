// Package dfagen builds the automata of package dfa from regular
// expressions and writes them as Go source. Only tests import it: they
// regenerate the files that hold a package's automata (and fail when one
// is stale), and compare every automaton with the regexp package on the
// inputs Inputs makes.
package dfagen

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"regexp"
	"regexp/syntax"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/sbxhq/sbx/internal/dfa"
)

// maxStates and maxWork bound the automaton of one pattern, and the
// work of building it (threads followed): a larger one is a pattern to
// simplify, or one to leave to the regexp package.
const (
	maxStates = 4096
	maxWork   = 1 << 24
)

// Build makes the automaton that accepts what
// regexp.MustCompile(pattern).MatchString accepts. Of the empty-width
// assertions it supports those at the beginning and end of the text (^
// and $ outside multi-line mode, \A, \z); any other is an error, never an
// approximation.
func Build(pattern string) (*dfa.DFA, error) {
	// As regexp.Compile parses and compiles (regexp.go: compile).
	re, err := syntax.Parse(pattern, syntax.Perl)
	if err != nil {
		return nil, err
	}
	prog, err := syntax.Compile(re.Simplify())
	if err != nil {
		return nil, err
	}
	for _, in := range prog.Inst {
		if in.Op == syntax.InstEmptyWidth && syntax.EmptyOp(in.Arg)&^(syntax.EmptyBeginText|syntax.EmptyEndText) != 0 {
			return nil, fmt.Errorf("pattern %q: an assertion other than ^ and $ at the ends of the text (multi-line ^ or $, \\b, \\B) has no DFA here", pattern)
		}
	}
	b := &builder{prog: prog, seen: make([]bool, len(prog.Inst))}
	b.partition()
	if len(b.reps) > 255 {
		return nil, fmt.Errorf("pattern %q: too large: %d classes of runes, at most 255", pattern, len(b.reps))
	}
	if err := b.subsets(); err != nil {
		return nil, fmt.Errorf("pattern %q: %w", pattern, err)
	}
	d := b.minimize()
	d.Pattern = pattern
	return d, nil
}

type builder struct {
	prog *syntax.Prog
	seen []bool // scratch of closure

	// The classes of runes: runes in one class are matched by the same
	// instructions. reps holds a rune of each class; bounds and boundClass
	// the class of each run of runes from bounds[i] to bounds[i+1].
	reps       []rune
	bounds     []rune
	boundClass []int

	// The subset construction's states: the NFA threads waiting to read
	// a rune (kernel), whether at the start of the text.
	states []subset
	index  map[string]int
	work   int
}

type subset struct {
	kernel []uint32
	start  bool
	// Filled as the state is expanded.
	next   []int
	atEnd  bool
	always bool // a match has ended: accepts whatever follows
}

// consumes reports whether an instruction reads a rune.
func consumes(in *syntax.Inst) bool {
	switch in.Op {
	case syntax.InstRune, syntax.InstRune1, syntax.InstRuneAny, syntax.InstRuneAnyNotNL:
		return true
	}
	return false
}

// matches reports whether a rune-reading instruction takes r, as
// regexp's NFA steps it (exec.go: step).
func matches(in *syntax.Inst, r rune) bool {
	switch in.Op {
	case syntax.InstRune:
		return in.MatchRune(r)
	case syntax.InstRune1:
		return r == in.Rune[0]
	case syntax.InstRuneAny:
		return true
	case syntax.InstRuneAnyNotNL:
		return r != '\n'
	}
	return false
}

// partition splits the runes into classes, cutting at every bound of a
// range an instruction matches.
func (b *builder) partition() {
	cuts := map[rune]bool{0: true, unicode.MaxRune + 1: true}
	cut := func(lo, hi rune) { cuts[lo], cuts[hi+1] = true, true }
	for i := range b.prog.Inst {
		in := &b.prog.Inst[i]
		switch in.Op {
		case syntax.InstRune1:
			cut(in.Rune[0], in.Rune[0])
		case syntax.InstRuneAnyNotNL:
			cut('\n', '\n')
		case syntax.InstRune:
			if len(in.Rune) == 1 {
				// A literal, which may match its case variants.
				r0 := in.Rune[0]
				cut(r0, r0)
				if syntax.Flags(in.Arg)&syntax.FoldCase != 0 {
					for r := unicode.SimpleFold(r0); r != r0; r = unicode.SimpleFold(r) {
						cut(r, r)
					}
				}
				continue
			}
			for j := 0; j+1 < len(in.Rune); j += 2 {
				cut(in.Rune[j], in.Rune[j+1])
			}
		}
	}
	var bounds []rune
	for r := range cuts {
		bounds = append(bounds, r)
	}
	slices.Sort(bounds)
	bounds = bounds[:len(bounds)-1] // MaxRune+1 ends the last run
	classOf := map[string]int{}
	for _, lo := range bounds {
		var sig []byte
		for i := range b.prog.Inst {
			if in := &b.prog.Inst[i]; consumes(in) {
				if matches(in, lo) {
					sig = append(sig, '1')
				} else {
					sig = append(sig, '0')
				}
			}
		}
		c, ok := classOf[string(sig)]
		if !ok {
			c = len(b.reps)
			classOf[string(sig)] = c
			b.reps = append(b.reps, lo)
		}
		b.bounds = append(b.bounds, lo)
		b.boundClass = append(b.boundClass, c)
	}
}

// closure follows the threads of kernel through the instructions that
// read nothing, with the assertions of flag true: the rune-reading
// instructions reached, sorted, and whether a match was.
func (b *builder) closure(kernel []uint32, flag syntax.EmptyOp) (reading []uint32, match bool) {
	clear(b.seen)
	var visit func(pc uint32)
	visit = func(pc uint32) {
		if b.seen[pc] {
			return
		}
		b.seen[pc] = true
		in := &b.prog.Inst[pc]
		switch in.Op {
		case syntax.InstAlt, syntax.InstAltMatch:
			visit(in.Out)
			visit(in.Arg)
		case syntax.InstCapture, syntax.InstNop:
			visit(in.Out)
		case syntax.InstEmptyWidth:
			if syntax.EmptyOp(in.Arg)&^flag == 0 {
				visit(in.Out)
			}
		case syntax.InstMatch:
			match = true
		case syntax.InstFail:
		default:
			reading = append(reading, pc)
		}
	}
	for _, pc := range kernel {
		visit(pc)
	}
	slices.Sort(reading)
	return reading, match
}

// state returns the number of the subset state, adding it if new.
func (b *builder) state(kernel []uint32, start bool) (int, error) {
	b.work += len(kernel)
	if b.work > maxWork {
		return 0, fmt.Errorf("too large: building it follows more than %d threads", maxWork)
	}
	key := make([]byte, 0, 1+4*len(kernel))
	if start {
		key = append(key, 1)
	}
	for _, pc := range kernel {
		key = binary.LittleEndian.AppendUint32(key, pc)
	}
	if i, ok := b.index[string(key)]; ok {
		return i, nil
	}
	if len(b.states) == maxStates {
		return 0, fmt.Errorf("too large: more than %d states", maxStates)
	}
	b.index[string(key)] = len(b.states)
	b.states = append(b.states, subset{kernel: kernel, start: start})
	return len(b.states) - 1, nil
}

// subsets runs the subset construction. A match may start at any
// position, as MatchString looks for one: every state has a thread at
// the program's start (whose ^ holds only at the start of the text).
func (b *builder) subsets() error {
	b.index = map[string]int{}
	start := uint32(b.prog.Start)
	if _, err := b.state([]uint32{start}, true); err != nil {
		return err
	}
	for i := 0; i < len(b.states); i++ {
		s := &b.states[i]
		var flag syntax.EmptyOp
		if s.start {
			flag = syntax.EmptyBeginText
		}
		reading, match := b.closure(s.kernel, flag)
		_, matchAtEnd := b.closure(s.kernel, flag|syntax.EmptyEndText)
		s.atEnd = match || matchAtEnd
		if match {
			s.always = true
			continue
		}
		next := make([]int, len(b.reps))
		for c, r := range b.reps {
			kernel := []uint32{start}
			for _, pc := range reading {
				if in := &b.prog.Inst[pc]; matches(in, r) {
					kernel = append(kernel, in.Out)
				}
			}
			slices.Sort(kernel)
			n, err := b.state(slices.Compact(kernel), false)
			if err != nil {
				return err
			}
			next[c] = n
		}
		b.states[i].next = next // s may have moved as states grew
	}
	return nil
}

// minimize merges equivalent states (Moore's partition refinement) and
// numbers them as package dfa wants: dfa.Dead, dfa.Matched, then the live
// states in breadth-first order from the start.
func (b *builder) minimize() *dfa.DFA {
	n, classes := len(b.states), len(b.reps)
	next := func(s, c int) int {
		if b.states[s].always {
			return s
		}
		return b.states[s].next[c]
	}
	block := make([]int, n)
	for s := range n {
		if b.states[s].atEnd {
			block[s] = 1
		}
	}
	for count := 0; ; {
		sigs := map[string]int{}
		nb := make([]int, n)
		for s := range n {
			sig := []int{block[s]}
			for c := range classes {
				sig = append(sig, block[next(s, c)])
			}
			key := fmt.Sprint(sig)
			id, ok := sigs[key]
			if !ok {
				id = len(sigs)
				sigs[key] = id
			}
			nb[s] = id
		}
		block = nb
		if len(sigs) == count {
			break
		}
		count = len(sigs)
	}
	// A closed block accepts nothing (dead) or everything (matched).
	closed := func(s int) bool {
		for c := range classes {
			if block[next(s, c)] != block[s] {
				return false
			}
		}
		return true
	}
	number := map[int]int{}
	for s := range n {
		if closed(s) {
			if b.states[s].atEnd {
				number[block[s]] = dfa.Matched
			} else {
				number[block[s]] = dfa.Dead
			}
		}
	}
	rep := map[int]int{} // a state of each block
	for s := n - 1; s >= 0; s-- {
		rep[block[s]] = s
	}
	live := dfa.Matched + 1
	queue := []int{block[0]}
	for len(queue) > 0 {
		bl := queue[0]
		queue = queue[1:]
		if _, ok := number[bl]; ok {
			continue
		}
		number[bl] = live
		live++
		for c := range classes {
			queue = append(queue, block[next(rep[bl], c)])
		}
	}
	d := &dfa.DFA{Classes: classes, Start: uint16(number[block[0]])}
	d.Next = make([]uint16, live*classes)
	d.AtEnd = make([]bool, live)
	for c := range classes {
		d.Next[dfa.Dead*classes+c] = dfa.Dead
		d.Next[dfa.Matched*classes+c] = dfa.Matched
	}
	d.AtEnd[dfa.Matched] = true
	for bl, num := range number {
		if num <= dfa.Matched {
			continue
		}
		s := rep[bl]
		d.AtEnd[num] = b.states[s].atEnd
		for c := range classes {
			d.Next[num*classes+c] = uint16(number[block[next(s, c)]])
		}
	}
	ascii := make([]byte, utf8.RuneSelf)
	for i, lo := range b.bounds {
		hi := rune(unicode.MaxRune + 1)
		if i+1 < len(b.bounds) {
			hi = b.bounds[i+1]
		}
		c := b.boundClass[i]
		for r := lo; r < hi && r < utf8.RuneSelf; r++ {
			ascii[r] = byte(c)
		}
		if hi <= utf8.RuneSelf {
			continue
		}
		lo = max(lo, utf8.RuneSelf)
		if k := len(d.Ranges); k > 0 && int(d.Ranges[k-1].Class) == c {
			continue
		}
		d.Ranges = append(d.Ranges, dfa.Range{Lo: lo, Class: uint8(c)})
	}
	d.ASCII = string(ascii)
	return d
}

// Literal writes d as a Go composite literal of type dfa.DFA, for a file
// that imports package dfa; one line of the table per state.
func Literal(d *dfa.DFA) string {
	var b strings.Builder
	fmt.Fprintf(&b, "dfa.DFA{\n\tPattern: %s,\n\tASCII: ", strconv.Quote(d.Pattern))
	for i := 0; i < len(d.ASCII); i += 32 {
		if i > 0 {
			b.WriteString(" +\n\t\t")
		}
		b.WriteByte('"')
		for j := i; j < i+32 && j < len(d.ASCII); j++ {
			fmt.Fprintf(&b, "\\x%02x", d.ASCII[j])
		}
		b.WriteByte('"')
	}
	b.WriteString(",\n\tRanges: []dfa.Range{")
	for i, r := range d.Ranges {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "{Lo: %#x, Class: %d}", r.Lo, r.Class)
	}
	fmt.Fprintf(&b, "},\n\tClasses: %d,\n\tStart: %d,\n\tNext: []uint16{\n", d.Classes, d.Start)
	for s := range len(d.AtEnd) {
		b.WriteString("\t\t")
		for c := range d.Classes {
			fmt.Fprintf(&b, "%d, ", d.Next[s*d.Classes+c])
		}
		switch s {
		case dfa.Dead:
			b.WriteString("// dead")
		case dfa.Matched:
			b.WriteString("// matched")
		default:
			fmt.Fprintf(&b, "// %d", s)
		}
		b.WriteByte('\n')
	}
	b.WriteString("\t},\n\tAtEnd: []bool{")
	for s, a := range d.AtEnd {
		if s > 0 {
			b.WriteString(", ")
		}
		b.WriteString(strconv.FormatBool(a))
	}
	b.WriteString("},\n}")
	return b.String()
}

// Compare runs d and the regexp of its pattern on the inputs: the inputs
// on which they disagree, and how many the regexp matches.
func Compare(d *dfa.DFA, inputs []string) (disagree []string, matched int) {
	re := regexp.MustCompile(d.Pattern)
	for _, s := range inputs {
		want := re.MatchString(s)
		if d.Match(s) != want {
			disagree = append(disagree, s)
		}
		if want {
			matched++
		}
	}
	return disagree, matched
}

// Inputs returns about n strings on which to compare an automaton with
// the regexp it was built from: fixed edge cases, strings the pattern
// generates, and those strings edited (runes inserted, deleted, replaced,
// the string cut or doubled) with runes at the bounds of the pattern's
// classes, newlines, runes that are not ASCII and bytes that are not
// UTF-8.
func Inputs(pattern string, rng *rand.Rand, n int) ([]string, error) {
	re, err := syntax.Parse(pattern, syntax.Perl)
	if err != nil {
		return nil, err
	}
	alphabet := []string{"\x00", "\t", "\n", "\r", " ", "-", ".", "/", ":", "0", "9", "A", "Z", "_", "a", "z", "\x7f",
		"é", "µ", "μ", "ſ", "K", "\ufffd", "\U0010ffff", "\xff", "\xc2", "\xe2\x82", "\xed\xa0\x80", "\xf4\x90\x80\x80"}
	var walk func(re *syntax.Regexp)
	walk = func(re *syntax.Regexp) {
		switch re.Op {
		case syntax.OpLiteral:
			for _, r := range re.Rune {
				alphabet = append(alphabet, string(r), string(unicode.SimpleFold(r)))
			}
		case syntax.OpCharClass:
			for i := 0; i+1 < len(re.Rune); i += 2 {
				for _, r := range []rune{re.Rune[i] - 1, re.Rune[i], re.Rune[i+1], re.Rune[i+1] + 1} {
					if r >= 0 && r <= unicode.MaxRune {
						alphabet = append(alphabet, string(r))
					}
				}
			}
		}
		for _, sub := range re.Sub {
			walk(sub)
		}
	}
	walk(re)
	slices.Sort(alphabet)
	alphabet = slices.Compact(alphabet)
	pick := func() string { return alphabet[rng.IntN(len(alphabet))] }

	out := []string{""}
	out = append(out, alphabet...)
	for len(out) < n {
		s := generate(re, rng)
		out = append(out, s)
		for range rng.IntN(4) {
			s = edit(s, pick, rng)
			out = append(out, s)
		}
	}
	return out, nil
}

// edit changes s once, at random.
func edit(s string, pick func() string, rng *rand.Rand) string {
	at := 0
	if len(s) > 0 {
		at = rng.IntN(len(s) + 1)
	}
	switch rng.IntN(6) {
	case 0, 1:
		return s[:at] + pick() + s[at:]
	case 2: // delete a byte, which may split a rune
		if at < len(s) {
			return s[:at] + s[at+1:]
		}
	case 3:
		if at < len(s) {
			_, size := utf8.DecodeRuneInString(s[at:])
			return s[:at] + pick() + s[at+size:]
		}
	case 4:
		return s[:at]
	}
	return s + s
}

// generate makes a string the expression matches, choosing at random.
func generate(re *syntax.Regexp, rng *rand.Rand) string {
	var b strings.Builder
	var gen func(re *syntax.Regexp)
	repeat := func(sub *syntax.Regexp, lo, hi int) {
		if hi < 0 {
			hi = lo + 3
		}
		for range lo + rng.IntN(hi-lo+1) {
			gen(sub)
		}
	}
	gen = func(re *syntax.Regexp) {
		switch re.Op {
		case syntax.OpLiteral:
			for _, r := range re.Rune {
				if re.Flags&syntax.FoldCase != 0 && rng.IntN(2) == 0 {
					r = unicode.SimpleFold(r)
				}
				b.WriteRune(r)
			}
		case syntax.OpCharClass:
			if len(re.Rune) == 0 {
				return // matches nothing: the string will not match
			}
			i := rng.IntN(len(re.Rune)/2) * 2
			lo, hi := re.Rune[i], re.Rune[i+1]
			switch rng.IntN(3) {
			case 0:
				b.WriteRune(lo)
			case 1:
				b.WriteRune(hi)
			default:
				b.WriteRune(lo + rune(rng.IntN(int(min(hi-lo+1, 1<<16)))))
			}
		case syntax.OpAnyCharNotNL, syntax.OpAnyChar:
			b.WriteRune([]rune{'x', 'é', '\u00b5', '\ufffd'}[rng.IntN(4)])
		case syntax.OpCapture:
			gen(re.Sub[0])
		case syntax.OpStar:
			repeat(re.Sub[0], 0, -1)
		case syntax.OpPlus:
			repeat(re.Sub[0], 1, -1)
		case syntax.OpQuest:
			repeat(re.Sub[0], 0, 1)
		case syntax.OpRepeat:
			repeat(re.Sub[0], re.Min, re.Max)
		case syntax.OpConcat:
			for _, sub := range re.Sub {
				gen(sub)
			}
		case syntax.OpAlternate:
			gen(re.Sub[rng.IntN(len(re.Sub))])
		}
		// The assertions and the empty match write nothing.
	}
	gen(re)
	return b.String()
}
