package k8stest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/sbxhq/sbx/internal/proc"
)

// TestSweep: a run removes the namespaces killed runs left — one whose
// owner is a process of this machine that is gone, and one made before
// the cutoff by another machine's run (only age tells those) — waits
// until they are gone, and keeps the fresh ones of a live run and of
// another machine. The test's namespaces carry a label value of their
// own, so that its sweep, with a cutoff of a moment ago, takes no other
// run's.
func TestSweep(t *testing.T) {
	e := Cluster(t)
	host, _ := os.Hostname()
	label := "k8stest-sweep-" + randomHex(4)
	mk := func(owner string) (string, time.Time) {
		name := "sbxtest-sweep-" + randomHex(4)
		e.KubectlInput(t, fmt.Sprintf("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: %s\n  labels: {dev.sbx.test: %s}\n  annotations: {%q: %q}\n", name, label, ownerAnnotation, owner), "create", "-f", "-")
		// t.Context is done when cleanups run: the deletion gets a
		// context of its own.
		t.Cleanup(func() {
			if _, err := e.kubectl(context.WithoutCancel(t.Context()), "", "delete", "namespace", name, "--ignore-not-found", "--wait=false"); err != nil {
				t.Errorf("deleting the test's namespace %s: %v", name, err)
			}
		})
		made, err := time.Parse(time.RFC3339, e.Kubectl(t, "get", "namespace", name, "-o", "jsonpath={.metadata.creationTimestamp}"))
		if err != nil {
			t.Fatal(err)
		}
		return name, made
	}
	old, made := mk("other-host/1/1")
	// creationTimestamp has whole seconds: the cutoff is the second after
	// the old one's, and the fresh ones are made in it or later.
	cutoff := made.Add(time.Second)
	for time.Now().Before(cutoff) {
		time.Sleep(50 * time.Millisecond)
	}
	dead, _ := mk(fmt.Sprintf("%s/%d/x", host, deadPID(t)))
	live, _ := mk(proc.Owner())
	other, _ := mk("other-host/1/1")
	e.sweepAt(t, "dev.sbx.test="+label, cutoff)
	phase := func(name string) string {
		out, _ := e.kubectl(t.Context(), "", "get", "namespace", name, "--ignore-not-found", "-o", "jsonpath={.status.phase}")
		return strings.TrimSpace(out)
	}
	for _, ns := range []string{old, dead} {
		if p := phase(ns); p != "" {
			t.Errorf("the leftover namespace %s is %q after the sweep, want it gone", ns, p)
		}
	}
	for _, ns := range []string{live, other} {
		if p := phase(ns); p != "Active" {
			t.Errorf("the fresh namespace %s is %q, want it kept", ns, p)
		}
	}
}

func deadPID(t *testing.T) int {
	c := exec.Command("true")
	if err := c.Run(); err != nil {
		t.Fatal(err)
	}
	return c.Process.Pid
}
