package egress

import (
	"bufio"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"io"
	"net/http"
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

// testAlways is what a harness's proxy always refuses: unspecified and
// loopback addresses, and testLocal's addresses.
var testAlways = []string{"0.0.0.0/8", "127.0.0.0/8", "93.184.216.10/32", "93.184.216.1/32", "::/128", "::1/128", "2606:2800:220:1::1/128"}

func TestControl(t *testing.T) {
	_, port := upstream(t)
	h := newHarness(t, testPolicy(), fakeDNS{"late.test": {pub4}})
	before, _ := os.ReadFile(h.policy)
	newer := testPolicy("late.test")
	data, _ := json.Marshal(newer)
	in := `{"id":"1","op":"policy"}
{"id":"2","op":"set","policy":{"default":"maybe"}}
{"id":"3","op":"policy"}
not json

{"id":"4","op":"frobnicate"}
{"id":"5","op":"set","policy":` + string(data) + `}
{"id":"6","op":"policy"}`
	got := control(t, h.proxy, in)
	old := testPolicy()
	want := []ControlReply{
		{ID: "1", Policy: &old, AlwaysBlocked: testAlways},
		{ID: "2", Error: `policy: default must be allow or deny, not "maybe"`},
		{ID: "3", Policy: &old, AlwaysBlocked: testAlways},
		{Error: "malformed control request: invalid character 'o' in literal null (expecting 'u')"},
		{ID: "4", Error: `unknown control op "frobnicate"`},
		{ID: "5", Policy: &newer, AlwaysBlocked: testAlways},
		{ID: "6", Policy: &newer, AlwaysBlocked: testAlways},
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
	h := newHarness(t, testPolicy(), fakeDNS{})
	big := `{"id":"big","op":"set","policy":{"allow":["` + strings.Repeat("a", maxControlLine) + `"]}}`
	got := control(t, h.proxy, big+"\n"+`{"id":"after","op":"policy"}`+"\n")
	old := testPolicy()
	want := []ControlReply{{Error: "control request over 4194304 bytes"}, {ID: "after", Policy: &old, AlwaysBlocked: testAlways}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("replies (-want +got):\n%s", diff)
	}
}

// TestControlSecrets: the "secrets" op puts a CA and secrets in force at
// once, answers with their names only, and refuses what does not compile;
// no value reaches the reply or the log.
func TestControlSecrets(t *testing.T) {
	srv, port := secretUpstream(t)
	h, _ := secretHarness(t, srv, nil)
	ca, err := NewCA("ctl")
	if err != nil {
		t.Fatal(err)
	}
	caPEM, _ := ca.MarshalPEM()
	good, _ := json.Marshal(ControlRequest{ID: "1", Op: "secrets", CA: caPEM, Secrets: []Secret{
		{Name: "ANTHROPIC_API_KEY", Placeholder: testPlaceholder, Value: "rotated-value", Hosts: []string{"example.com"}}}})
	bad, _ := json.Marshal(ControlRequest{ID: "2", Op: "secrets", Secrets: []Secret{
		{Name: "X", Placeholder: testPlaceholder, Value: "v", Hosts: []string{"example.com"}}}})
	got := control(t, h.proxy, string(good)+"\n"+string(bad)+"\n")
	want := []ControlReply{{ID: "1", Secrets: []string{"ANTHROPIC_API_KEY"}}, {ID: "2", Error: "secrets need the sandbox's CA"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("replies (-want +got):\n%s", diff)
	}
	// The new value and the new CA are in force: rotation without a
	// restart.
	req, _ := http.NewRequest("GET", "https://example.com:"+port+"/", nil)
	req.Header.Set("Authorization", "Bearer "+testPlaceholder)
	if code, body := do(t, sandboxClient(h, ca), req); code != 200 || !strings.Contains(body, "auth=Bearer rotated-value") {
		t.Errorf("after the op: %d %q", code, body)
	}
	if strings.Contains(h.log.String(), "rotated-value") || strings.Contains(h.log.String(), "PRIVATE KEY") {
		t.Errorf("the log holds a value or the key:\n%s", h.log.String())
	}
}

// TestControlSecretsRoots: the roots that come with the secrets verify
// the upstreams, in place of the proxy's own (the kubernetes driver's
// proxy image has none); one whose roots hold no certificate is refused,
// and those before stay; a request that brings none goes back to the
// proxy's, even for an upstream whose TLS session is cached.
func TestControlSecretsRoots(t *testing.T) {
	srv, port := secretUpstream(t)
	// The proxy's own roots trust nothing.
	h, _ := secretHarness(t, srv, x509.NewCertPool())
	ca, err := NewCA("roots")
	if err != nil {
		t.Fatal(err)
	}
	caPEM, _ := ca.MarshalPEM()
	rootsPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	secrets := []Secret{{Name: "ANTHROPIC_API_KEY", Placeholder: testPlaceholder, Value: testValue, Hosts: []string{"example.com"}}}
	get := func() (int, string) {
		req, _ := http.NewRequest("GET", "https://example.com:"+port+"/", nil)
		req.Header.Set("Authorization", "Bearer "+testPlaceholder)
		return do(t, sandboxClient(h, ca), req)
	}
	for _, tc := range []struct {
		name  string
		roots []byte
		reply ControlReply
		ok    bool // the upstream is verified
	}{
		{"the proxy's own roots", nil, ControlReply{ID: "1", Secrets: []string{"ANTHROPIC_API_KEY"}}, false},
		{"the roots sent", rootsPEM, ControlReply{ID: "1", Secrets: []string{"ANTHROPIC_API_KEY"}}, true},
		{"roots without a certificate", []byte("not PEM"), ControlReply{ID: "1", Error: "the upstreams' roots hold no PEM certificate"}, true},
		// The upstream's TLS session, cached, is not resumed past roots
		// that no longer trust it.
		{"the proxy's own roots again", nil, ControlReply{ID: "1", Secrets: []string{"ANTHROPIC_API_KEY"}}, false},
	} {
		line, _ := json.Marshal(ControlRequest{ID: "1", Op: "secrets", CA: caPEM, Roots: tc.roots, Secrets: secrets})
		if diff := cmp.Diff([]ControlReply{tc.reply}, control(t, h.proxy, string(line)+"\n")); diff != "" {
			t.Errorf("%s: reply (-want +got):\n%s", tc.name, diff)
		}
		// A refused request changes nothing: the roots sent before stay.
		code, body := get()
		if tc.ok && (code != http.StatusOK || !strings.Contains(body, "auth=Bearer "+testValue)) || !tc.ok && code != http.StatusBadGateway {
			t.Errorf("%s: got %d %q, want the upstream verified: %v", tc.name, code, body, tc.ok)
		}
	}
}
