package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/sbxhq/sbx/internal/k8stest"
)

// TestWaitFailsOnCause: on the test cluster, a sandbox that cannot become
// Ready fails its apply with the cause the cluster reports, not after the
// time limit: the error is a *NotReadyError with the cluster's reason,
// which only a cause sets (the time limit leaves Reason empty), and the
// wait runs under a context without a deadline. Nothing of the sandbox
// stays.
func TestWaitFailsOnCause(t *testing.T) {
	t.Parallel()
	t.Run("image", func(t *testing.T) {
		t.Parallel()
		c := newCluster(t)
		// A registry of the test's own, on loopback, without the image:
		// the pull is answered 404, which the first ErrImagePull says.
		reg := httptest.NewServer(registry.New())
		t.Cleanup(reg.Close)
		image := fmt.Sprintf("%s/sbx-missing-%s:none", reg.Listener.Addr(), k8stest.RunID)
		d := c.driver(0)
		b := k8stest.NewBox(t, d, "pull-"+k8stest.RunID)
		head := strings.Replace(c.Head(), "template: ", "template: "+image+"\n# ", 1)
		sp := b.Spec(head + "  egress: advisory\n")
		start := time.Now()
		_, err := b.Apply(sp)
		t.Logf("apply failed after %s", time.Since(start))
		nr := notReady(t, err)
		if nr.Reason != "ErrImagePull" || nr.Object != "pod/"+b.Name || !strings.Contains(nr.Message, image) || !strings.HasSuffix(nr.Message, "(the registry has no such image or tag)") {
			t.Errorf("apply failed with %q %q %q, want ErrImagePull of pod/%s naming %s, as missing\n%v", nr.Reason, nr.Object, nr.Message, b.Name, image, err)
		}
		if left := c.Labelled(b.Name); len(left) > 0 {
			t.Errorf("the failed create left %v", left)
		}
	})
	t.Run("claim", func(t *testing.T) {
		t.Parallel()
		c := newCluster(t)
		class := "sbx-no-such-class-" + k8stest.RunID
		b := k8stest.NewBox(t, c.driver(0), "claim-"+k8stest.RunID)
		head := c.Head() + "  storageClass: " + class + "\n"
		sp := b.Spec(head + "  egress: advisory\n")
		start := time.Now()
		_, err := b.Apply(sp)
		t.Logf("apply failed after %s", time.Since(start))
		nr := notReady(t, err)
		if nr.Reason != "ProvisioningFailed" || nr.Object != "persistentvolumeclaim/"+ClaimName(b.Name) || !strings.Contains(nr.Message, `"`+class+`" not found`) {
			t.Errorf("apply failed with %q %q %q, want ProvisioningFailed of the claim naming %s\n%v", nr.Reason, nr.Object, nr.Message, class, err)
		}
		if left := c.Labelled(b.Name); len(left) > 0 {
			t.Errorf("the failed create left %v", left)
		}
	})
	t.Run("unschedulable", func(t *testing.T) {
		t.Parallel()
		// The pod is the test's own (labelled as a sandbox's), so that
		// its request is exactly one no node has, whatever requests the
		// driver derives from a file.
		c := newCluster(t)
		d := c.driver(0)
		name := "big-" + k8stest.RunID
		c.KubectlInput(t, fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: %s, namespace: %s, labels: {dev.sbx.sandbox: %s}}
spec:
  automountServiceAccountToken: false
  terminationGracePeriodSeconds: 1
  containers:
  - name: agent
    image: busybox-none
    imagePullPolicy: Never
    resources: {requests: {memory: 64Ti}, limits: {memory: 64Ti}}
`, name, c.NS, name), "create", "-f", "-")
		start := time.Now()
		err := d.waitReady(context.Background(), place{namespace: c.NS}, name, "pod/"+name)
		t.Logf("the wait failed after %s", time.Since(start))
		nr := notReady(t, err)
		if nr.Reason != "Unschedulable" || nr.Object != "pod/"+name || !strings.Contains(nr.Message, "more than any node") || !strings.Contains(nr.Message, "Insufficient memory") {
			t.Errorf("the wait failed with %q %q %q, want Unschedulable naming the request and the scheduler's message\n%v", nr.Reason, nr.Object, nr.Message, err)
		}
	})
}

func notReady(t *testing.T, err error) *NotReadyError {
	t.Helper()
	t.Logf("the error: %v", err)
	var nr *NotReadyError
	if !errors.As(err, &nr) {
		t.Fatalf("got %v, want a *NotReadyError", err)
	}
	if nr.Reason == "" {
		t.Fatalf("the wait ended at its time limit, not on a cause:\n%v", err)
	}
	return nr
}
