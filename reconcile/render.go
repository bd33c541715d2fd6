package reconcile

import (
	"encoding/json"
	"fmt"
	"io"
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
const replaceNote = "note: replacing deletes what was installed inside the sandbox; workspace files on the host are kept"

const destroyNote = "note: destroying deletes what was installed inside the sandbox; workspace files on the host are kept"

// Render writes the plan for people: drift first ("Changed outside sbx"),
// then each sandbox's action with its field changes, then the summary line.
// Sensitive values show as "(sensitive)". A plan with errors is not
// rendered: Render returns p.Err() and writes nothing.
func Render(w io.Writer, p *Changes, color bool) error {
	if err := p.Err(); err != nil {
		return err
	}
	r := &renderer{color: color}
	r.render(p)
	_, err := io.WriteString(w, r.b.String())
	return err
}

type renderer struct {
	b     strings.Builder
	color bool
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
		r.printf("%s\n\n", r.paint(ansiBold, fmt.Sprintf("The change from %s to %s does the following (driver: %s):", p.Base, p.Head, driver)))
	} else {
		r.printf("%s\n\n", r.paint(ansiBold, fmt.Sprintf("sbx will perform the following actions (driver: %s):", driver)))
	}
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
		r.printf("Warning: this %s widens the network egress of sandbox %s (marked \"widens egress\").\n\n", what, strings.Join(widens, ", "))
	}
	r.widenings(p)
	create, update, replace, destroy := p.Count()
	what := "Plan"
	if p.Kind == KindChange {
		what = "Change"
	}
	r.printf("%s\n", r.paint(ansiBold, fmt.Sprintf(what+": %d to create, %d to update, %d to replace, %d to destroy.", create, update, replace, destroy)))
}

// widenings lists what the plan gives each sandbox beyond what was last
// approved, and where each came from.
func (r *renderer) widenings(p *Changes) {
	if !p.Widens() {
		return
	}
	if p.Kind == KindChange {
		r.printf("%s\n", r.paint(ansiBold, "This change widens what the sandbox may do, beyond "+p.Base+":"))
	} else {
		r.printf("%s\n", r.paint(ansiBold, "This plan widens what the sandbox may do, beyond what you last approved:"))
	}
	for _, c := range p.Sandboxes {
		if c.Action == ActionNoOp || c.Action == ActionDestroy || len(c.Widenings) == 0 {
			continue
		}
		r.printf("  # sandbox %q\n", c.Sandbox)
		for _, w := range c.Widenings {
			line := "    " + r.paint(ansiYellow, "!") + " " + w.String()
			if w.FromSandbox || len(w.Writers) > 0 {
				line = "    " + r.paint(ansiRed, "!") + " " + w.String()
			}
			r.printf("%s\n", line)
		}
	}
	if p.Kind == KindChange {
		r.printf("\n")
		return
	}
	r.printf("Apply asks before it makes these changes; apply -y makes them only with --approve-widening.\n\n")
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
	r.printf("%s\n\n", r.paint(ansiBold, "Changed outside sbx (apply restores the values in sandbox.yaml):"))
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
	case ActionDestroy:
		header, sym = "will be destroyed", "  -"
		if c.Deleted {
			header = "no longer exists; sbx forgets it"
		}
	}
	r.printf("  %s\n", r.paint(ansiBold, "# sandbox "+q+" "+header))
	for _, reason := range c.Reasons {
		r.printf("  # (because %s)\n", reason)
	}
	r.printf("%s sandbox %s\n", r.symbol(sym), q)
	r.diffs(c.Changes, true)
	for _, n := range c.Notes {
		r.printf("    note: %s\n", n)
	}
	r.steps(c)
	switch c.Action {
	case ActionReplace:
		r.printf("    %s\n", replaceNote)
	case ActionDestroy:
		if !c.Deleted {
			r.printf("    %s\n", destroyNote)
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
			for _, line := range strings.Split(call, "\n") {
				r.printf("           %s\n", line)
			}
		}
		if st.Kind == StepRecord || st.Kind == StepForget {
			r.printf("           (sbx's own state)\n")
		}
	}
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

// diffs writes one line per diff, annotations aligned in one column.
func (r *renderer) diffs(ds []Diff, annotate bool) {
	width := 0
	for _, d := range ds {
		if n := utf8.RuneCountInString(d.String()); n > width {
			width = n
		}
	}
	for _, d := range ds {
		s := d.String()
		line := r.symbol(d.Op.Symbol()) + s[len(d.Op.Symbol()):]
		if a := d.annotations(); annotate && len(a) > 0 {
			line += strings.Repeat(" ", width-utf8.RuneCountInString(s)+5) + "# " + strings.Join(a, "; ")
		}
		r.printf("      %s\n", line)
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
