package egress

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sbxhq/sbx/driver"
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
	want := driver.NetEntry{Time: "2026-11-24T10:00:00.5Z", Method: "GET", Host: "a.example", Port: 80, Decision: "deny", Reason: "request header too large", Status: 431}
	if diff := cmp.Diff(want, d.NetEntry()); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	for _, l := range []string{`proxy: "decision" quoted from a request`, `{"host":"x"}`, ``} {
		if _, ok := ParseDecision([]byte(l)); ok {
			t.Errorf("%q read as a decision", l)
		}
	}
	since := time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)
	if dn, ok := Denial([]byte(line), since, since.Add(time.Second)); !ok || dn.Host != "a.example" {
		t.Errorf("Denial = %+v, %v", dn, ok)
	}
	if _, ok := Denial([]byte(line), since.Add(time.Second), since.Add(2*time.Second)); ok {
		t.Error("a denial outside the window counted")
	}
}
