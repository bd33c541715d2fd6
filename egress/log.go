package egress

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"
)

// The decision log is what drivers read back for `sbx netlog` and the
// loop's denial counts: one JSON object per line (entry), on the proxy's
// standard error or --log file, among whatever else the proxy wrote there.

// DecisionLines are the lines of out that are decisions, in order.
func DecisionLines(out string) []string {
	var lines []string
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, `"decision"`) {
			lines = append(lines, l)
		}
	}
	return lines
}

// loggedDecision is the part of a decision line readers use.
type loggedDecision struct {
	Time     time.Time `json:"time"`
	Method   string    `json:"method"`
	Host     string    `json:"host"`
	Port     int       `json:"port"`
	Decision string    `json:"decision"`
	Reason   string    `json:"reason"`
	Rule     string    `json:"rule"`
}

// FormatDecision renders a decision line for people:
//
//	2026-01-02T15:04:05Z deny  CONNECT example.com:443 (not in the allow-list; rule )
//
// ok is false for a line that is not a decision.
func FormatDecision(line string) (string, bool) {
	var e loggedDecision
	if json.Unmarshal([]byte(line), &e) != nil || e.Decision == "" {
		return "", false
	}
	return fmt.Sprintf("%s %-5s %s %s:%d (%s; rule %s)", e.Time.Format(time.RFC3339), e.Decision, e.Method, e.Host, e.Port, e.Reason, e.Rule), true
}

// CountDenials counts the deny decisions among lines made in [since,
// until].
func CountDenials(lines []string, since, until time.Time) int {
	n := 0
	for _, l := range lines {
		var e loggedDecision
		if json.Unmarshal([]byte(l), &e) == nil && e.Decision == "deny" && !e.Time.Before(since) && !e.Time.After(until) {
			n++
		}
	}
	return n
}

// FollowLog prints the decisions read returns: JSON lines with asJSON,
// else one readable line each; with follow it reads again every second
// and prints the new ones until ctx ends.
func FollowLog(ctx context.Context, read func(context.Context) ([]string, error), asJSON, follow bool, w io.Writer) error {
	seen := 0
	for {
		lines, err := read(ctx)
		if err != nil {
			return err
		}
		for _, l := range lines[min(seen, len(lines)):] {
			if asJSON {
				fmt.Fprintln(w, l)
			} else if s, ok := FormatDecision(l); ok {
				fmt.Fprintln(w, s)
			}
		}
		seen = len(lines)
		if !follow {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(time.Second):
		}
	}
}
