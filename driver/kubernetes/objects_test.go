package kubernetes

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sbxhq/sbx/egress"
	"github.com/sbxhq/sbx/spec"
)

// TestHostAddrsOf turns node addresses (status.addresses) into the
// proxy's hostAddrs: plain canonical addresses the proxy loads, without
// names or duplicates.
func TestHostAddrsOf(t *testing.T) {
	got := hostAddrsOf([]string{"192.0.2.2", "localhost", "fd00::2", "::ffff:192.0.2.2", "192.0.2.3", "fe80::1%eth0"})
	want := []string{"192.0.2.2", "192.0.2.3", "fd00::2", "fe80::1"} // a zone is dropped: refusing the address on every link is the safe reading
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("hostAddrsOf (-want +got):\n%s", d)
	}
	p := egress.PolicyOf(&spec.Spec{Network: spec.Network{Policy: "deny"}}, got)
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "policy.json")
	if err := os.WriteFile(file, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := egress.LoadPolicy(file); err != nil {
		t.Errorf("the proxy refuses the driver's policy: %v", err)
	}
}
