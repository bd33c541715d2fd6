// Package e2e tests the kubernetes driver on the repository's test
// cluster through its exported API and the static sbx a user runs: the
// conformance suite, the CLI, the README's quick path, stop, the loop,
// secrets kept in the proxy, and templates built and pushed to a
// registry.
// The tests that need the driver's internals are in package kubernetes;
// both share internal/k8stest's setup, each with its own helper image.
package e2e

import (
	"context"
	"os"
	"testing"

	"github.com/sbxhq/sbx/driver/kubernetes"
	"github.com/sbxhq/sbx/driver/runner"
	"github.com/sbxhq/sbx/internal/k8stest"
)

func TestMain(m *testing.M) { k8stest.Main(m) }

func buildHelper(ctx context.Context, binary, tag string, labels ...string) error {
	return kubernetes.BuildHelperImage(ctx, &runner.Runner{}, "docker", binary, tag, labels...)
}

// cluster is one test's part of the cluster (k8stest.Space).
type cluster struct{ *k8stest.Space }

func newCluster(t testing.TB) *cluster {
	t.Helper()
	return &cluster{k8stest.NewSpace(t, "driver/kubernetes/e2e", buildHelper)}
}

// enforce emulates a network plugin that enforces the driver's
// NetworkPolicies in the test's namespace.
func (c *cluster) enforce() { c.Enforce(kubernetes.ProxyRoles()) }

// driver is a kubernetes driver for the test's namespace, with the
// cluster's kubeconfig whatever the environment says; its commands are
// logged when the test fails.
func (c *cluster) driver() *kubernetes.Driver {
	d, _ := c.tracedDriver()
	return d
}

// tracedDriver is driver, with more variables in its commands'
// environment, and its trace for the test to read.
func (c *cluster) tracedDriver(extraEnv ...string) (*kubernetes.Driver, *k8stest.SyncBuffer) {
	trace := c.Trace()
	r := &runner.Runner{Env: append(append(os.Environ(), "KUBECONFIG="+c.Kubeconfig), extraEnv...), Trace: trace}
	return kubernetes.New(kubernetes.Options{Runner: r, Kubectl: c.KubectlPath(), Binary: c.Binary, HelperImage: c.Helper, Namespace: c.NS}), trace
}
