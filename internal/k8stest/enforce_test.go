package k8stest

import (
	"fmt"
	"os"
	"os/exec"
	"reflect"
	"strings"
	"testing"

	"github.com/sbxhq/sbx/internal/proc"
)

// TestStaleRules: the rules of an enforcer whose process is gone are
// found, as iptables -S lists them (the comment quoted), and no other
// rule: a live run's, another tool's, an older format's.
func TestStaleRules(t *testing.T) {
	listing := `-P INPUT ACCEPT
-A INPUT -s 10.244.0.16/32 -m comment --comment "sbx-test-enforcer:vm/12/345:sbx-test-ab" -j DROP
-A INPUT -s 10.244.0.17/32 -m comment --comment "sbx-test-enforcer:vm/13/345:sbx-test-cd" -j DROP
-A FORWARD -s 10.244.0.16/32 -d 10.244.0.15/32 -p tcp -m tcp --dport 3128 -m comment --comment "sbx-test-enforcer:vm/12/345:sbx-test-ab" -j ACCEPT
-A FORWARD -i k8s-cni0 -o k8s-cni0 -m comment --comment sbx-k8s-cni -j ACCEPT
-A FORWARD -m comment --comment "a rule of someone else: sbx-test-enforcer:vm/12/345:x" -j ACCEPT
`
	gone := func(owner string) bool { return owner == "vm/12/345" }
	got := staleRules(listing, gone)
	want := [][]string{
		{"INPUT", "-s", "10.244.0.16/32", "-m", "comment", "--comment", "sbx-test-enforcer:vm/12/345:sbx-test-ab", "-j", "DROP"},
		{"FORWARD", "-s", "10.244.0.16/32", "-d", "10.244.0.15/32", "-p", "tcp", "-m", "tcp", "--dport", "3128", "-m", "comment", "--comment", "sbx-test-enforcer:vm/12/345:sbx-test-ab", "-j", "ACCEPT"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("staleRules:\n got %q\nwant %q", got, want)
	}
}

// TestSweepRules: a rule a killed run's enforcer left is removed by the
// next run's, through the real iptables. The rule is in a chain of the
// test's own that nothing jumps to, so it filters no packet.
func TestSweepRules(t *testing.T) {
	if os.Geteuid() != 0 {
		if os.Getenv("SBX_E2E") == "1" {
			t.Fatal("SBX_E2E=1 but not root: iptables cannot be run")
		}
		t.Skip("iptables needs root; set SBX_E2E=1 to make this a failure")
	}
	chain := fmt.Sprintf("sbxtest-%d", os.Getpid())
	ipt := func(args ...string) string {
		t.Helper()
		out, err := exec.Command("iptables", append([]string{"-w"}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("iptables %s: %v: %s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	ipt("-N", chain)
	t.Cleanup(func() {
		exec.Command("iptables", "-w", "-F", chain).Run()
		exec.Command("iptables", "-w", "-X", chain).Run()
	})
	host, _ := os.Hostname()
	dead := enforcerComment + host + "/1/0:sbx-test-dead" // pid 1 never started at 0
	live := enforcerComment + proc.Owner() + ":sbx-test-live"
	ipt("-A", chain, "-s", "127.0.0.2", "-m", "comment", "--comment", dead, "-j", "DROP")
	ipt("-A", chain, "-s", "127.0.0.3", "-m", "comment", "--comment", live, "-j", "DROP")
	sweepRules(t)
	got := ipt("-S", chain)
	if strings.Contains(got, "sbx-test-dead") || !strings.Contains(got, "sbx-test-live") {
		t.Errorf("after the sweep, the chain is\n%s\nwant the dead owner's rule gone and the live one's kept", got)
	}
}
