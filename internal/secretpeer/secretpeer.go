// Package secretpeer is what the hostile tests of secrets share with
// their peer (test/hostile/secretpeer): the report the hostile agent
// writes, the requests the upstreams log, and the check of what those
// upstreams got. encoding/json carries both between the processes.
package secretpeer

import (
	"encoding/json"
	"strings"
	"testing"
)

// Report is what the attack saw.
type Report struct {
	API         Result   `json:"api"`
	Plain       Result   `json:"plain"`
	Drop        Result   `json:"drop"`
	Rogue       Result   `json:"rogue"`
	Placeholder string   `json:"placeholder"` // what it sent as the key
	KeyFiles    []string `json:"key_files"`   // files holding a private key
	KeyInEnv    bool     `json:"key_in_env"`
	DumpBytes   int      `json:"dump_bytes"`
}

// Result is one of the attack's requests as its client saw it.
type Result struct {
	Status int    `json:"status"`
	Body   string `json:"body"`
	Issuer string `json:"issuer"` // of the certificate the client was shown
	Error  string `json:"error,omitempty"`
}

// Request is a request an upstream logged (one JSON line each), and
// which upstream got it (Role, the test's to set: api, drop or rogue).
type Request struct {
	Role    string              `json:"-"`
	Host    string              `json:"host"`
	TLS     bool                `json:"tls"`
	Method  string              `json:"method"`
	Path    string              `json:"path"`
	Headers map[string][]string `json:"headers"`
	Body    string              `json:"body"`
}

// Check fails t unless api got the value in both headers the attack
// sets, and only api got it; drop got the dump (dumped says the body is
// one) and nothing of forbidden; rogue got nothing.
func Check(t testing.TB, reqs []Request, value string, dumped func(body string) bool, forbidden ...string) {
	t.Helper()
	var gotAPI, gotDump bool
	for _, r := range reqs {
		all, _ := json.Marshal(r)
		leaked := ""
		for _, f := range append([]string{value}, forbidden...) {
			if f != "" && strings.Contains(string(all), f) {
				leaked = f
			}
		}
		switch {
		case r.Role == "api":
			gotAPI = true
			if a := r.Headers["Authorization"]; len(a) != 1 || a[0] != "Bearer "+value {
				t.Errorf("the secret's host got Authorization %q, want the value", a)
			}
			if k := r.Headers["X-Api-Key"]; len(k) != 1 || k[0] != value {
				t.Errorf("the secret's host got X-Api-Key %q, want the value", k)
			}
		case leaked != "":
			t.Errorf("%s (%s) got what must not leave: %.300s", r.Role, r.Host, all)
		case r.Role == "drop" && r.Method == "POST":
			gotDump = dumped(r.Body)
		case r.Role == "rogue":
			t.Errorf("the host whose certificate the proxy cannot verify got a request: %.300s", all)
		}
	}
	if !gotAPI || !gotDump {
		t.Errorf("the secret's host got a request: %v; the other host got the dump: %v", gotAPI, gotDump)
	}
}
