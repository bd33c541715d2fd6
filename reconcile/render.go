package reconcile

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strings"
	"unicode/utf8"
)

// ANSI colours, used only when the caller asks (a terminal without
// NO_COLOR).
const (
	ansiReset  = "\x1b[0m"
	ansiBold   = "\x1b[1m"
	ansiRed    = "\x1b[31m"
	ansiGreen  = "\x1b[32m"
	ansiYellow = "\x1b[33m"
)

// replaceNote is printed under every replaced sandbox.
const replaceNote = "note: replacing deletes what was installed inside the sandbox; the workspace on the host stays"

const destroyNote = "note: destroying deletes what was installed inside the sandbox; the workspace on the host stays"

// Render writes the plan for people: drift first ("Changed outside sbx"),
// then each sandbox's action with its field changes, then the summary line.
// Sensitive values show as "(sensitive)". A plan with errors is not
// rendered: Render returns p.Err() and writes nothing.
func Render(w io.Writer, p *Changes, color bool) error {
	return RenderWidth(w, p, color, Width)
}

// Width is the columns Render fits a plan to (sbx's verbs wrap to the
// terminal's width instead, and not at all for a pipe or a log).
const Width = 100

// RenderWidth is Render for an output of width columns (a terminal's); 0
// does not wrap.
// A line longer than that is wrapped at a space, never inside a word, so
// nothing is lost: a widening's or a note's text continues on the next
// line indented under its first word, a field's annotation ("# forces
// replacement") moves under the field, and a change's new value goes to
// its own line after "→". A word longer than a line (a long quoted value,
// a backend command) stays whole.
func RenderWidth(w io.Writer, p *Changes, color bool, width int) error {
	if err := p.Err(); err != nil {
		return err
	}
	if width <= 0 {
		width = math.MaxInt32
	}
	r := &renderer{color: color, width: max(width, minWidth)}
	r.render(p)
	_, err := io.WriteString(w, r.b.String())
	return err
}

// minWidth is the narrowest a plan is wrapped to, whatever the terminal
// says.
const minWidth = 60

type renderer struct {
	b     strings.Builder
	color bool
	width int
}

// wrapped writes text after prefix (which may hold colour codes; visible
// is how many columns it takes), folding it at spaces to the renderer's
// width; continuation lines start with cont.
func (r *renderer) wrapped(prefix string, visible int, text string, cont string) {
	for i, line := range wrap(text, r.width-visible, r.width-utf8.RuneCountInString(cont)) {
		if i == 0 {
			r.printf("%s%s\n", prefix, line)
		} else {
			r.printf("%s%s\n", cont, line)
		}
	}
}

// bold writes a heading, wrapped, each line painted.
func (r *renderer) bold(text string) {
	for i, line := range wrap(text, r.width, r.width-2) {
		if i > 0 {
			line = "  " + line
		}
		r.printf("%s\n", r.paint(ansiBold, line))
	}
}

// wrap folds text at spaces into lines of at most first columns, then
// rest columns; a word longer than a line is kept whole on a line of its
// own.
func wrap(text string, first, rest int) []string {
	return wrapWords(strings.Split(text, " "), first, rest)
}

// wrapWords is wrap for text already split into words at spaces.
func wrapWords(words []string, first, rest int) []string {
	var lines []string
	line, limit := "", first
	for _, word := range words {
		switch {
		case line == "":
			line = word
		case utf8.RuneCountInString(line)+1+utf8.RuneCountInString(word) <= limit:
			line += " " + word
		default:
			lines = append(lines, line)
			line, limit = word, rest
		}
	}
	return append(lines, line)
}

func (r *renderer) paint(code, s string) string {
	if !r.color {
		return s
	}
	return code + s + ansiReset
}

func (r *renderer) symbol(sym string) string {
	switch strings.TrimSpace(sym) {
	case "+":
		return r.paint(ansiGreen, sym)
	case "-":
		return r.paint(ansiRed, sym)
	case "~":
		return r.paint(ansiYellow, sym)
	case "-/+":
		return r.paint(ansiRed, "-") + r.paint(ansiYellow, "/") + r.paint(ansiGreen, "+")
	}
	return sym
}

func (r *renderer) printf(format string, args ...any) { fmt.Fprintf(&r.b, format, args...) }

func (r *renderer) render(p *Changes) {
	var changed, unchanged []string
	for _, c := range p.Sandboxes {
		if c.Action == ActionNoOp {
			unchanged = append(unchanged, fmt.Sprintf("%q", c.Sandbox))
		} else {
			changed = append(changed, c.Sandbox)
		}
	}
	if len(changed) == 0 {
		r.noChanges(p, unchanged)
		return
	}
	r.drift(p)
	driver := p.Driver
	if p.DriverVersion != "" {
		driver += " " + p.DriverVersion
	}
	if p.Kind == KindChange {
		r.bold(fmt.Sprintf("The change from %s to %s does the following (driver: %s):", p.Base, p.Head, driver))
	} else {
		r.bold(fmt.Sprintf("sbx will perform the following actions (driver: %s):", driver))
	}
	r.printf("\n")
	var widens []string
	for _, c := range p.Sandboxes {
		if c.Action == ActionNoOp {
			continue
		}
		r.sandbox(c)
		if c.WidensEgress() {
			widens = append(widens, fmt.Sprintf("%q", c.Sandbox))
		}
	}
	if len(widens) > 0 {
		what := "plan"
		if p.Kind == KindChange {
			what = "change"
		}
		r.wrapped("", 0, fmt.Sprintf("Warning: this %s widens the network egress of sandbox %s (marked \"widens egress\").", what, strings.Join(widens, ", ")), "  ")
		r.printf("\n")
	}
	r.widenings(p)
	create, update, replace, destroy := p.Count()
	what := "Plan"
	if p.Kind == KindChange {
		what = "Change"
	}
	r.bold(fmt.Sprintf("%s: %d to create, %d to update, %d to replace, %d to destroy.", what, create, update, replace, destroy))
}

// widenings lists what the plan gives each sandbox beyond what was last
// approved, and where each came from.
func (r *renderer) widenings(p *Changes) {
	if !p.Widens() {
		return
	}
	if p.Kind == KindChange {
		r.bold("This change widens what the sandbox may do, beyond " + p.Base + ":")
	} else {
		r.bold("This plan widens what the sandbox may do, beyond what you last approved:")
	}
	for _, c := range p.Sandboxes {
		if c.Action == ActionNoOp || c.Action == ActionDestroy || len(c.Widenings) == 0 {
			continue
		}
		r.printf("  # sandbox %q\n", c.Sandbox)
		for _, w := range c.Widenings {
			mark := r.paint(ansiYellow, "!")
			if w.FromSandbox || len(w.Writers) > 0 {
				mark = r.paint(ansiRed, "!")
			}
			if all := w.String(); 6+utf8.RuneCountInString(all) <= r.width || w.Origin == "" {
				r.wrapped("    "+mark+" ", 6, all, "      ")
				continue
			}
			// Too long for one line: where it came from goes on a line
			// of its own, whole where it fits.
			r.wrapped("    "+mark+" ", 6, w.What, "      ")
			r.wrapped("      ", 6, strings.TrimPrefix(w.String(), w.What+" "), "      ")
		}
	}
	if p.Kind == KindChange {
		r.printf("\n")
		return
	}
	r.wrapped("", 0, "Apply asks before it makes these changes; apply -y makes them only with --approve-widening.", "  ")
	r.printf("\n")
}

func (r *renderer) noChanges(p *Changes, names []string) {
	if p.Kind == "destroy" {
		switch len(names) {
		case 0:
			r.printf("No changes. Nothing to destroy.\n")
		case 1:
			r.printf("No changes. Sandbox %s does not exist.\n", names[0])
		default:
			r.printf("No changes. Sandboxes %s do not exist.\n", strings.Join(names, ", "))
		}
		return
	}
	if p.Kind == KindChange {
		r.printf("No changes. The sandbox files declare the same sandboxes at %s and %s.\n", p.Base, p.Head)
		return
	}
	switch len(names) {
	case 0:
		r.printf("No changes.\n")
	case 1:
		r.printf("No changes. Sandbox %s matches sandbox.yaml.\n", names[0])
	default:
		r.printf("No changes. Sandboxes %s match sandbox.yaml.\n", strings.Join(names, ", "))
	}
}

func (r *renderer) drift(p *Changes) {
	any := false
	for _, c := range p.Sandboxes {
		if len(c.Drift) > 0 || c.Deleted {
			any = true
		}
	}
	if !any {
		return
	}
	r.bold("Changed outside sbx (apply restores the values in sandbox.yaml):")
	r.printf("\n")
	for _, c := range p.Sandboxes {
		switch {
		case c.Deleted:
			r.printf("  # sandbox %q has been deleted\n\n", c.Sandbox)
		case len(c.Drift) > 0:
			r.printf("  # sandbox %q has changed\n", c.Sandbox)
			r.diffs(c.Drift, false)
			r.printf("\n")
		}
	}
}

func (r *renderer) sandbox(c *SandboxChange) {
	q := fmt.Sprintf("%q", c.Sandbox)
	var header, sym string
	switch c.Action {
	case ActionCreate:
		header, sym = "will be created", "  +"
		if c.FromCheckpoint != "" {
			header = fmt.Sprintf("will be created from checkpoint %q", c.FromCheckpoint)
		}
	case ActionUpdate:
		header, sym = "will be updated in-place", "  ~"
		if c.Adopt {
			header = "will be adopted and updated in-place"
			if len(c.Changes) == 0 {
				header = "will be adopted (no change to the sandbox)"
			}
		}
	case ActionReplace:
		header, sym = "must be replaced", "-/+"
		if c.FromCheckpoint != "" {
			header = fmt.Sprintf("must be replaced from checkpoint %q", c.FromCheckpoint)
		}
		if c.Adopt {
			header = "will be adopted: " + header + " by one sbx makes"
		}
	case ActionDestroy:
		header, sym = "will be destroyed", "  -"
		if c.Deleted {
			header = "no longer exists; sbx forgets it"
		}
	}
	r.printf("  %s\n", r.paint(ansiBold, "# sandbox "+q+" "+header))
	for _, reason := range c.Reasons {
		r.wrapped("  # ", 4, "(because "+reason+")", "  #  ")
	}
	r.printf("%s sandbox %s\n", r.symbol(sym), q)
	r.diffs(c.Changes, true)
	for _, n := range c.Notes {
		r.note(n)
	}
	r.steps(c)
	switch c.Action {
	case ActionReplace:
		r.note(strings.TrimPrefix(replaceNote, "note: "))
	case ActionDestroy:
		if !c.Deleted {
			r.note(strings.TrimPrefix(destroyNote, "note: "))
		}
	}
	r.printf("\n")
}

// steps lists a prepared plan's steps with the backend calls each makes.
func (r *renderer) steps(c *SandboxChange) {
	prepared := false
	for _, st := range c.Steps {
		if len(st.Calls) > 0 {
			prepared = true
		}
	}
	if !prepared {
		return
	}
	r.printf("    steps:\n")
	for i, st := range c.Steps {
		r.printf("      %d. %s\n", i+1, st)
		for _, call := range groupCalls(st.Calls) {
			lines := strings.Split(call, "\n")
			if len(lines) == 1 {
				lines = r.fold(call, len(callIndent))
			}
			for _, line := range lines {
				r.printf("%s%s\n", callIndent, line)
			}
		}
		if st.Kind == StepRecord || st.Kind == StepForget {
			r.printf("           (sbx's own state)\n")
		}
	}
}

// callIndent starts the lines of a step's calls.
const callIndent = "           "

// fold breaks a one-line call (a shell command line, as runner.Quote
// writes it) that does not fit the width after indent columns at the
// spaces between its words, never inside a quoted one, ending each line
// but the last with " \" as a shell continues a command: the lines,
// copied, still run it. Continuation lines are indented four more.
func (r *renderer) fold(call string, indent int) []string {
	if indent+utf8.RuneCountInString(call) <= r.width {
		return []string{call}
	}
	lines := wrapWords(shellWords(call), r.width-indent-2, r.width-indent-4-2)
	for i := range lines {
		if i > 0 {
			lines[i] = "    " + lines[i]
		}
		if i < len(lines)-1 {
			lines[i] += " \\"
		}
	}
	return lines
}

// shellWords splits a command line at the spaces that separate its words:
// not one inside single or double quotes, nor one a backslash escapes.
// Joined with single spaces, the words are the line again.
func shellWords(line string) []string {
	var words []string
	start := 0
	single, double, escaped := false, false, false
	for i, c := range line {
		switch {
		case escaped:
			escaped = false
		case c == '\\' && !single:
			escaped = true
		case c == '\'' && !double:
			single = !single
		case c == '"' && !single:
			double = !double
		case c == ' ' && !single && !double:
			words = append(words, line[start:i])
			start = i + 1
		}
	}
	return append(words, line[start:])
}

// groupMin is the shortest run of calls shown as one line.
const groupMin = 4

// groupCalls shows a run of one-line calls that differ only in their last
// word (a rule per range) as one line: the command with ARG for that word
// and, below it, every value it takes, in order. The plan's JSON keeps
// every call.
func groupCalls(calls []string) []string {
	var out []string
	for i := 0; i < len(calls); {
		prefix, ok := lastWordPrefix(calls[i])
		j := i + 1
		for ok && j < len(calls) {
			if p, ok2 := lastWordPrefix(calls[j]); !ok2 || p != prefix {
				break
			}
			j++
		}
		if !ok || j-i < groupMin {
			out = append(out, calls[i])
			i++
			continue
		}
		var vals []string
		for _, c := range calls[i:j] {
			vals = append(vals, c[len(prefix):])
		}
		var b strings.Builder
		fmt.Fprintf(&b, "%sARG  # %d calls, ARG each of:", prefix, j-i)
		line := 0
		for _, v := range vals {
			if line == 0 || line+len(v) > 72 {
				b.WriteString("\n    ")
				line = 0
			}
			b.WriteString(v + " ")
			line += len(v) + 1
		}
		out = append(out, strings.TrimRight(strings.ReplaceAll(b.String(), " \n", "\n"), " "))
		i = j
	}
	return out
}

// lastWordPrefix is a one-line call up to its last word.
func lastWordPrefix(call string) (string, bool) {
	if strings.Contains(call, "\n") || strings.Contains(call, "  # ") {
		return "", false
	}
	i := strings.LastIndexByte(call, ' ')
	if i < 0 {
		return "", false
	}
	return call[:i+1], true
}

// note writes a sandbox's note, wrapped under its first word.
func (r *renderer) note(text string) {
	r.wrapped("    note: ", 10, text, "          ")
}

// diffIndent is where a diff line starts.
const diffIndent = 6

// diffs writes one line per diff, annotations aligned in one column: the
// column of the longest diff whose line fits the width with its
// annotation. A diff that does not fit so gets its annotation on the next
// line, under its path; a change too long for one line shows its new
// value on a line of its own.
func (r *renderer) diffs(ds []Diff, annotate bool) {
	note := func(d Diff) string {
		if a := d.annotations(); annotate && len(a) > 0 {
			return "# " + strings.Join(a, "; ")
		}
		return ""
	}
	col := 0
	for _, d := range ds {
		n := utf8.RuneCountInString(d.String())
		if a := note(d); a == "" && diffIndent+n <= r.width || a != "" && diffIndent+n+5+utf8.RuneCountInString(a) <= r.width {
			col = max(col, n)
		}
	}
	// Two columns in from the path ("~ " comes before it).
	under := strings.Repeat(" ", diffIndent+4)
	for _, d := range ds {
		s := d.String()
		sym := d.Op.Symbol()
		a := note(d)
		n := utf8.RuneCountInString(s)
		switch {
		case a != "" && n <= col && diffIndent+col+5+utf8.RuneCountInString(a) <= r.width:
			r.printf("%s%s%s%s%s\n", strings.Repeat(" ", diffIndent), r.symbol(sym), s[len(sym):], strings.Repeat(" ", col-n+5), a)
			continue
		case d.Op == Change && !d.Sensitive && diffIndent+n > r.width:
			// The old value on the diff's line, the new one under it.
			before, after, _ := strings.Cut(s[len(sym):], " → ")
			r.printf("%s%s%s\n", strings.Repeat(" ", diffIndent), r.symbol(sym), before)
			r.printf("%s→ %s\n", under, after)
		default:
			r.printf("%s%s%s\n", strings.Repeat(" ", diffIndent), r.symbol(sym), s[len(sym):])
		}
		if a != "" {
			r.wrapped(under, len(under), a, under+"  ")
		}
	}
}

// planDoc is the JSON document: the plan plus a redundant summary, so
// consumers need not count.
type planDoc struct {
	*planFields
	Summary      summary `json:"summary"`
	Applyable    bool    `json:"applyable"`
	WidensEgress bool    `json:"widens_egress"`
	// Widens is set when some sandbox's widenings need approval.
	Widens bool `json:"widens"`
}

// planFields has Changes' fields without its methods, so encoding does not
// recurse.
type planFields Changes

type summary struct {
	Create  int `json:"create"`
	Update  int `json:"update"`
	Replace int `json:"replace"`
	Destroy int `json:"destroy"`
}

// WriteJSON writes the plan as a versioned JSON document
// ({"format_version": "1", ...}; see docs/plan-json.md). Save writes the same
// document.
func WriteJSON(w io.Writer, p *Changes) error {
	p.digest()
	d := planDoc{planFields: (*planFields)(p), Applyable: len(p.Errors) == 0 && p.Kind != KindChange, Widens: p.Widens()}
	d.Summary.Create, d.Summary.Update, d.Summary.Replace, d.Summary.Destroy = p.Count()
	for _, c := range p.Sandboxes {
		if c.WidensEgress() {
			d.WidensEgress = true
		}
	}
	b, err := json.MarshalIndent(d, "", "  ")
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}
