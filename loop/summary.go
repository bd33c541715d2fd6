package loop

import (
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/sbxhq/sbx/internal/untrusted"
	"github.com/sbxhq/sbx/netlog"
)

// Summary is an iteration's outcome in one line, as the loop prints it
// after each iteration and records it:
//
//	iteration 2: exit 1 after 41s, verify failed (npm test: exit 1), 3 files changed, 2 egress denials
//
// In a multi-agent run the sandbox follows the number. Text from the
// files (a verify command) is escaped (untrusted.Text).
func Summary(rec *Record, multi bool) string {
	var b strings.Builder
	fmt.Fprintf(&b, "iteration %d", rec.Iteration)
	if multi {
		fmt.Fprintf(&b, " (%s)", rec.Sandbox)
	}
	d := roundDuration(time.Duration(rec.DurationMS) * time.Millisecond)
	switch {
	case rec.CommandMissing:
		fmt.Fprintf(&b, ": the agent's command was not found (exit %d)", rec.ExitStatus)
	case rec.TimedOut:
		fmt.Fprintf(&b, ": timed out after %s (iterationTimeout); the agent was killed", d)
	case rec.Interrupted:
		fmt.Fprintf(&b, ": stopped after %s; the agent was killed", d)
	default:
		fmt.Fprintf(&b, ": exit %d after %s", rec.ExitStatus, d)
	}
	if rec.PromiseSeen {
		b.WriteString(", promise seen")
	}
	if n := len(rec.Verify); n > 0 {
		if v := rec.Verify[n-1]; v.ExitStatus != 0 {
			fmt.Fprintf(&b, ", verify failed (%s: exit %d)", untrusted.Text(v.Command), v.ExitStatus)
		} else {
			b.WriteString(", verify passed")
		}
	}
	if !rec.Interrupted && !rec.CommandMissing {
		fmt.Fprintf(&b, ", %s changed", plural(rec.Files, "file"))
		if rec.Commits > 0 {
			fmt.Fprintf(&b, ", %s", plural(rec.Commits, "commit"))
		}
	}
	if rec.Denials != nil {
		fmt.Fprintf(&b, ", %s", plural(*rec.Denials, "egress denial"))
	}
	if rec.UpstreamErrors != nil && *rec.UpstreamErrors > 0 {
		fmt.Fprintf(&b, ", %s", plural(*rec.UpstreamErrors, "upstream error"))
		if len(rec.Failed) > 0 {
			fmt.Fprintf(&b, " (%s)", failureText(rec.Failed[0]))
		}
	}
	return b.String()
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

// roundDuration rounds to what a person reads: whole seconds from a
// second on, else milliseconds.
func roundDuration(d time.Duration) time.Duration {
	if d >= time.Second {
		return d.Round(time.Second)
	}
	return d.Round(time.Millisecond)
}

// Bounds on the denials a record keeps: what a host name, reason or rule
// can cost is the agent's choice (it picks the names it asks for), so the
// record keeps the first MaxDenialRecords denials of an iteration, and of
// each text its first maxDenialText bytes (a DNS name has at most 253).
const (
	MaxDenialRecords = 50
	maxDenialText    = 256
)

// boundDenials clips each text of the denials to maxDenialText bytes of
// valid UTF-8.
func boundDenials(ds []netlog.Denial) []netlog.Denial {
	if len(ds) > MaxDenialRecords {
		ds = ds[:MaxDenialRecords]
	}
	out := make([]netlog.Denial, len(ds))
	for i, d := range ds {
		d.Method, d.Host, d.Reason, d.Rule = clip(d.Method), clip(d.Host), clip(d.Reason), clip(d.Rule)
		out[i] = d
	}
	return out
}

// clip keeps at most maxDenialText bytes of s, whole characters, invalid
// UTF-8 replaced.
func clip(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= maxDenialText {
		return s
	}
	cut := maxDenialText
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// failureText is a request that failed upstream in a few words, as the
// iteration's line shows the first: what the agent chose escaped, the
// reason clipped.
func failureText(d netlog.Denial) string {
	target := untrusted.Text(d.Host)
	if d.Port != 0 {
		target += fmt.Sprintf(":%d", d.Port)
	}
	if d.Method != "" {
		target = untrusted.Text(d.Method) + " " + target
	}
	reason := d.Reason
	if len(reason) > 80 {
		reason = clip(reason[:80]) + "…"
	}
	return target + ": " + untrusted.Text(reason)
}

// DenialLine is a denial as `sbx loop status` prints it: what the agent
// chose escaped.
func DenialLine(d netlog.Denial) string {
	target := untrusted.Text(d.Host)
	if d.Host == "" {
		target = "(no host)" // a request the proxy could not parse
	}
	if d.Port != 0 {
		target += fmt.Sprintf(":%d", d.Port)
	}
	if d.Method != "" {
		target = untrusted.Text(d.Method) + " " + target
	}
	line := fmt.Sprintf("%s %s: %s", d.Time.Local().Format(time.TimeOnly), target, untrusted.Text(d.Reason))
	if d.Rule != "" {
		line += " (rule " + untrusted.Text(d.Rule) + ")"
	}
	return line
}
