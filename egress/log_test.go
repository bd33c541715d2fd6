package egress

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/sbxhq/sbx/netlog"
)

// TestDecisionNetEntry: a proxy decision line becomes the netlog entry
// with every field it carries; a line that is not a decision (the proxy's
// other messages, which can quote the agent) is none.
func TestDecisionNetEntry(t *testing.T) {
	line := `{"time":"2026-11-24T10:00:00.5Z","method":"GET","host":"a.example","port":80,"decision":"deny","reason":"request header too large","rule":"","status":431}`
	d, ok := ParseDecision([]byte(line))
	if !ok {
		t.Fatal("a decision line was not read")
	}
	want := netlog.Entry{Time: "2026-11-24T10:00:00.5Z", Method: "GET", Host: "a.example", Port: 80, Decision: "deny", Reason: "request header too large", Status: 431}
	if diff := cmp.Diff(want, d.NetEntry()); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	for _, l := range []string{`proxy: "decision" quoted from a request`, `{"host":"x"}`, ``} {
		if _, ok := ParseDecision([]byte(l)); ok {
			t.Errorf("%q read as a decision", l)
		}
	}
	since := time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)
	if dn, ok := Problem([]byte(line), since, since.Add(time.Second)); !ok || dn.Host != "a.example" || dn.Decision != "deny" {
		t.Errorf("Problem = %+v, %v", dn, ok)
	}
	if _, ok := Problem([]byte(line), since.Add(time.Second), since.Add(2*time.Second)); ok {
		t.Error("a denial outside the window counted")
	}
}

// TestProblem: what the loop counts of the decision log: denials, and
// requests that failed upstream — a connect that failed, a name that did
// not resolve (decision error), an allowed request answered 5xx — but
// never a request that was served.
func TestProblem(t *testing.T) {
	since := time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)
	line := func(decision, reason string, status int) string {
		return `{"time":"2026-11-24T10:00:00.5Z","method":"POST","host":"model-api","port":8080,"decision":"` + decision + `","reason":"` + reason + `","status":` + fmt.Sprint(status) + `}`
	}
	for _, tc := range []struct {
		line     string
		decision string // "": not counted
		reason   string
	}{
		{line("deny", "not in the allow list (policy: deny)", 403), "deny", "not in the allow list (policy: deny)"},
		{line("error", "connect failed: dial tcp 10.0.0.1:8080: i/o timeout", 502), "error", "connect failed: dial tcp 10.0.0.1:8080: i/o timeout"},
		{line("error", "cannot resolve host", 502), "error", "cannot resolve host"},
		{line("allow", "allowed by policy", 502), "error", "answered 502"},
		{line("allow", "allowed by policy", 529), "error", "answered 529"},
		{line("allow", "allowed by policy", 200), "", ""},
		{line("allow", "allowed by policy", 404), "", ""},
	} {
		p, ok := Problem([]byte(tc.line), since, since.Add(time.Second))
		if ok != (tc.decision != "") || p.Decision != tc.decision || p.Reason != tc.reason {
			t.Errorf("Problem(%s) = %+v, %v; want decision %q reason %q", tc.line, p, ok, tc.decision, tc.reason)
		}
	}
	var c netlog.Count
	for _, l := range []string{line("deny", "x", 403), line("error", "y", 502), line("deny", "z", 403), line("allow", "ok", 503)} {
		p, _ := Problem([]byte(l), since, since.Add(time.Second))
		c.Add(p, 1)
	}
	if c.Denied != 2 || c.Failed != 2 || len(c.FirstDenied) != 1 || len(c.FirstFailed) != 1 || c.FirstFailed[0].Reason != "y" {
		t.Errorf("count: %+v", c)
	}
}
