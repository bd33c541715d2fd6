package k8stest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/sbxhq/sbx/internal/proc"
)

// TestSweep: a run removes the namespace a killed run left (its owner is
// gone), and keeps one a live run owns.
func TestSweep(t *testing.T) {
	e := Cluster(t)
	host, _ := os.Hostname()
	mk := func(owner string) string {
		name := "sbxtest-sweep-" + randomHex(4)
		e.KubectlInput(t, fmt.Sprintf("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: %s\n  labels: {dev.sbx.test: k8stest}\n  annotations: {%q: %q}\n", name, ownerAnnotation, owner), "create", "-f", "-")
		// t.Context is done when cleanups run: the deletion gets a
		// context of its own.
		t.Cleanup(func() {
			if _, err := e.kubectl(context.WithoutCancel(t.Context()), "", "delete", "namespace", name, "--ignore-not-found", "--wait=false"); err != nil {
				t.Errorf("deleting the test's namespace %s: %v", name, err)
			}
		})
		return name
	}
	left := mk(fmt.Sprintf("%s/%d/x", host, deadPID(t)))
	live := mk(proc.Owner())
	e.sweepNow(t)
	phase := func(name string) string {
		out, _ := e.kubectl(t.Context(), "", "get", "namespace", name, "--ignore-not-found", "-o", "jsonpath={.status.phase}")
		return strings.TrimSpace(out)
	}
	if p := phase(left); p != "" && p != "Terminating" {
		t.Errorf("the leftover namespace is %q, want it removed", p)
	}
	if p := phase(live); p != "Active" {
		t.Errorf("the live run's namespace is %q, want it kept", p)
	}
}

func deadPID(t *testing.T) int {
	c := exec.Command("true")
	if err := c.Run(); err != nil {
		t.Fatal(err)
	}
	return c.Process.Pid
}
