//go:build unix

package kubernetes

import (
	"context"
	"strings"
	"testing"

	"github.com/sbxhq/sbx/driver/runner"
)

// TestPinAdmitted reads the dry run's answer: admitted, refused by
// admission (the cluster's reason kept for the plan and the error), or
// any other failure, which is an error and never taken for a refusal.
func TestPinAdmitted(t *testing.T) {
	for _, tc := range []struct {
		name  string
		out   string
		fail  bool
		noPin string // in the reason, "" when admitted
		err   string
	}{
		{name: "admitted", out: "pod/sb.pin-check created (server dry run)\n"},
		{name: "baseline", fail: true,
			out:   `Error from server (Forbidden): error when creating "STDIN": pods "sb.pin-check" is forbidden: violates PodSecurity "baseline:latest": non-default capabilities (container "sbx-egress-pin" must not include "NET_ADMIN" in securityContext.capabilities.add)`,
			noPin: `violates PodSecurity "baseline:latest"`},
		{name: "unreachable", fail: true, out: "The connection to the server 127.0.0.1:16443 was refused", err: "a dry run"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			sp := testSpec(t, dir)
			code := 0
			if tc.fail {
				code = 1
			}
			d := New(Options{Runner: &runner.Runner{}, Kubectl: fakeKubectl(t, dir, tc.out, code), Namespace: "ns"})
			noPin, err := d.pinAdmitted(context.Background(), sp, place{namespace: "ns"}, "sbx-helper:1")
			switch {
			case tc.err != "":
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Errorf("pinAdmitted = %q, %v; want an error saying %q", noPin, err, tc.err)
				}
			case err != nil:
				t.Errorf("pinAdmitted: %v", err)
			case tc.noPin == "" && noPin != "":
				t.Errorf("pinAdmitted = %q, want admitted", noPin)
			case !strings.Contains(noPin, tc.noPin) || (tc.noPin != "" && noPin == ""):
				t.Errorf("pinAdmitted = %q, want the reason %q", noPin, tc.noPin)
			}
		})
	}
}
