package egress

import (
	"bufio"
	"encoding/json"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// control runs ServeControl over the given input and returns its replies.
func control(t *testing.T, p *Proxy, in string) []ControlReply {
	t.Helper()
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() { done <- p.ServeControl(strings.NewReader(in), pw); pw.Close() }()
	var out []ControlReply
	sc := bufio.NewScanner(pr)
	for sc.Scan() {
		var r ControlReply
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("reply %q: %v", sc.Text(), err)
		}
		out = append(out, r)
	}
	if err := <-done; err != nil {
		t.Fatalf("ServeControl: %v", err)
	}
	return out
}

func TestControl(t *testing.T) {
	_, port := upstream(t)
	h := newHarness(t, loopbackOK(), fakeDNS{"late.test": {"127.0.0.1"}})
	before, _ := os.ReadFile(h.policy)
	newer := loopbackOK("late.test")
	data, _ := json.Marshal(newer)
	in := `{"id":"1","op":"policy"}
{"id":"2","op":"set","policy":{"default":"maybe"}}
{"id":"3","op":"policy"}
not json

{"id":"4","op":"frobnicate"}
{"id":"5","op":"set","policy":` + string(data) + `}
{"id":"6","op":"policy"}`
	got := control(t, h.proxy, in)
	old := loopbackOK()
	want := []ControlReply{
		{ID: "1", Policy: &old},
		{ID: "2", Error: `policy: default must be allow or deny, not "maybe"`},
		{ID: "3", Policy: &old},
		{Error: "malformed control request: invalid character 'o' in literal null (expecting 'u')"},
		{ID: "4", Error: `unknown control op "frobnicate"`},
		{ID: "5", Policy: &newer},
		{ID: "6", Policy: &newer},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("replies (-want +got):\n%s", diff)
	}
	// The refused policy left the file alone; the accepted one replaced
	// it (so a restart keeps it) and is in force at once.
	after, _ := os.ReadFile(h.policy)
	if string(after) != string(data) || string(before) == string(after) {
		t.Errorf("policy file after set: %s", after)
	}
	if code, _ := h.get("http://late.test:" + port + "/"); code != 200 {
		t.Errorf("after set: %d", code)
	}
	if !strings.Contains(h.log.String(), `"event":"set"`) {
		t.Errorf("the log does not record the change:\n%s", h.log.String())
	}
}

// TestControlOverlongLine: a request over the bound is refused whole and
// the channel goes on serving.
func TestControlOverlongLine(t *testing.T) {
	h := newHarness(t, loopbackOK(), fakeDNS{})
	big := `{"id":"big","op":"set","policy":{"allow":["` + strings.Repeat("a", maxControlLine) + `"]}}`
	got := control(t, h.proxy, big+"\n"+`{"id":"after","op":"policy"}`+"\n")
	old := loopbackOK()
	want := []ControlReply{{Error: "control request over 4194304 bytes"}, {ID: "after", Policy: &old}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("replies (-want +got):\n%s", diff)
	}
}
