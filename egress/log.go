package egress

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/sbxhq/sbx/netlog"
)

// The decision log is what drivers read back for `sbx netlog` and the
// loop's denial records: one JSON object per line (entry), on the proxy's
// standard error or --log file, among whatever else the proxy wrote there
// (messages that can quote what the agent sent).

// DecisionLines are the lines of out that may be decisions, in order.
func DecisionLines(out string) []string {
	var lines []string
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, `"decision"`) {
			lines = append(lines, l)
		}
	}
	return lines
}

// LoggedDecision is the part of a decision line readers use.
type LoggedDecision struct {
	Time     time.Time `json:"time"`
	Method   string    `json:"method"`
	Host     string    `json:"host"`
	Port     int       `json:"port"`
	Decision string    `json:"decision"`
	Reason   string    `json:"reason"`
	Rule     string    `json:"rule"`
	Status   int       `json:"status"`
}

// ParseDecision reads a decision line; ok is false for a line that is not
// one (only an object with a decision is).
func ParseDecision(line []byte) (d LoggedDecision, ok bool) {
	if json.Unmarshal(line, &d) != nil || d.Decision == "" {
		return LoggedDecision{}, false
	}
	return d, true
}

// NetEntry is the decision as `sbx netlog` shows it.
func (d LoggedDecision) NetEntry() netlog.Entry {
	return netlog.Entry{Time: d.Time.Format(time.RFC3339Nano), Method: d.Method, Host: d.Host, Port: d.Port,
		Decision: d.Decision, Reason: d.Reason, Rule: d.Rule, Status: d.Status}
}

// Problem is a decision made in [since, until] that the loop counts, as
// it records it: a denial (decision deny), or a request that failed
// upstream (decision error: a name that did not resolve, a connection
// refused or timed out; or an allowed plain-HTTP request answered with a
// 5xx status, by the upstream or by the proxy when the upstream answered
// badly). ok is false for any other line.
func Problem(line []byte, since, until time.Time) (netlog.Denial, bool) {
	d, ok := ParseDecision(line)
	if !ok || d.Time.Before(since) || d.Time.After(until) {
		return netlog.Denial{}, false
	}
	p := netlog.Denial{Time: d.Time, Method: d.Method, Host: d.Host, Port: d.Port, Reason: d.Reason, Rule: d.Rule, Decision: d.Decision}
	switch {
	case d.Decision == "deny", d.Decision == "error":
	case d.Decision == "allow" && d.Status >= 500 && d.Status <= 599:
		p.Decision, p.Reason = "error", fmt.Sprintf("answered %d", d.Status)
	default:
		return netlog.Denial{}, false
	}
	return p, true
}

// FollowLog emits the decisions read returns, in order; with follow it
// reads again every second and emits the new ones until ctx ends.
func FollowLog(ctx context.Context, read func(context.Context) ([]string, error), follow bool, emit func(netlog.Entry) error) error {
	seen := 0
	for {
		lines, err := read(ctx)
		if err != nil {
			return err
		}
		for _, l := range lines[min(seen, len(lines)):] {
			if d, ok := ParseDecision([]byte(l)); ok {
				if err := emit(d.NetEntry()); err != nil {
					return err
				}
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
