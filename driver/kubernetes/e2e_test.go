package kubernetes

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sbxhq/sbx/driver/runner"
	"github.com/sbxhq/sbx/internal/k8stest"
)

// The e2e tests run against the repository's test cluster
// (test/kubernetes/cluster): they skip without one and fail instead under
// SBX_E2E=1. They run in parallel (the package stays well within go
// test's per-package limit on a loaded machine: most of a test is waiting
// for the cluster), each in a namespace of its own; workspace claims get
// their volumes from the cluster's default StorageClass, as users' do on
// kind or a managed cluster (test/kubernetes/cluster runs a provisioner
// for it, and the namespace's cleanup waits for them to go); the helper image is
// built from this sbx once, under a tag unique to the run, and loaded into
// the cluster once for all of them. Everything is removed when the test,
// or for the image the run, ends. The only servers the sandboxes reach
// are the test's own pods.

func TestMain(m *testing.M) { k8stest.Main(m) }

// buildHelper is BuildHelperImage as k8stest.Sbx calls it.
func buildHelper(ctx context.Context, binary, tag string, labels ...string) error {
	return BuildHelperImage(ctx, &runner.Runner{}, "docker", binary, tag, labels...)
}

// cluster is one test's part of the cluster (k8stest.Space): a namespace,
// the helper image loaded. Workspace claims name no class: the cluster's
// default StorageClass provisions them, as on kind or a managed cluster.
type cluster struct{ *k8stest.Space }

// newCluster gives the test a namespace with the helper image.
func newCluster(t testing.TB) *cluster {
	t.Helper()
	return &cluster{k8stest.NewSpace(t, "driver/kubernetes", buildHelper)}
}

// enforce emulates a network plugin that enforces the driver's
// NetworkPolicies in the test's namespace (k8stest's Enforce).
func (c *cluster) enforce() { c.Enforce(ProxyRoles()) }

// retainVolumes makes n hostPath PersistentVolumes with the Retain
// reclaim policy, of a class of the test's own (no provisioner serves
// it), in a directory of the test's, and returns the class. They are
// removed when the test ends, after its namespace and claims.
func (c *cluster) retainVolumes(n int) string {
	c.T.Helper()
	class := c.ID
	dir := c.T.TempDir()
	c.T.Cleanup(func() {
		if _, err := c.KubectlErr("delete", "persistentvolumes", "-l", "dev.sbx.test="+class, "--ignore-not-found", "--wait=true", "--timeout=120s"); err != nil {
			c.T.Error(err)
		}
	})
	var docs []string
	for i := range n {
		docs = append(docs, fmt.Sprintf(`apiVersion: v1
kind: PersistentVolume
metadata:
  name: %s-%d
  labels: {dev.sbx.test: %s}
spec:
  capacity: {storage: 1Gi}
  accessModes: [ReadWriteOnce]
  storageClassName: %s
  persistentVolumeReclaimPolicy: Retain
  hostPath: {path: %s, type: DirectoryOrCreate}
`, class, i, class, class, filepath.Join(dir, fmt.Sprint(i))))
	}
	c.KubectlInput(c.T, strings.Join(docs, "---\n"), "create", "-f", "-")
	return class
}

// driver is a kubernetes driver for the test's namespace.
func (c *cluster) driver(probeFor time.Duration) *Driver {
	d, _ := c.tracedDriver(probeFor)
	return d
}

// tracedDriver is driver, with more variables in its commands'
// environment, and its trace (SBX_TRACE's) for the test to read.
func (c *cluster) tracedDriver(probeFor time.Duration, extraEnv ...string) (*Driver, *k8stest.SyncBuffer) {
	trace := c.Trace()
	r := &runner.Runner{Env: append(append(os.Environ(), "KUBECONFIG="+c.Kubeconfig), extraEnv...), Trace: trace}
	return New(Options{Runner: r, Kubectl: c.KubectlPath(), Binary: c.Binary, HelperImage: c.Helper, Namespace: c.NS, ProbeFor: probeFor}), trace
}
