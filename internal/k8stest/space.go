package k8stest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sbxhq/sbx/driver"
)

// Space is one test's part of the cluster: a namespace of its own, an ID
// unique to the test for what it makes outside the cluster, and the run's
// static sbx and its helper image, loaded (Sbx).
type Space struct {
	*Env
	T      testing.TB
	NS     string
	ID     string
	Binary string // the run's static sbx
	Helper string // its helper image, in the cluster
}

// NewSpace gives the test a namespace (Namespace) and the run's sbx, its
// helper image built by build and loaded into the cluster (Sbx).
func NewSpace(t testing.TB, pkg string, build HelperBuilder) *Space {
	t.Helper()
	e := Cluster(t)
	binary, helper := Sbx(t, e, pkg, build)
	return &Space{Env: e, T: t, NS: e.Namespace(t), ID: "sbx-test-" + randomHex(4), Binary: binary, Helper: helper}
}

// TestMemory is a test sandbox's memory limit (and request): a shell,
// sbx's init and a loop's agent script fit in it many times over.
const TestMemory = "256m"

// Head is the part of a test's sandbox.yaml that places it on the
// cluster: the busybox template, the memory a test sandbox uses (a limit
// of TestMemory: the tests run in parallel) and a small workspace volume
// of the default class. It ends inside the kubernetes mapping, which tests
// extend.
func (s *Space) Head() string {
	return fmt.Sprintf("template: %s\nresources:\n  memory: %s\nkubernetes:\n  workspaceSize: 64Mi\n", BusyboxImage, TestMemory)
}

// CLI runs the built sbx as a user would, in dir, against the test's
// cluster, with its state in state and extra added to its environment;
// it returns sbx's output, stdout and stderr as the user sees them.
func (s *Space) CLI(dir, state string, extra ...string) func(args ...string) (string, error) {
	return func(args ...string) (string, error) {
		cmd := exec.Command(s.Binary, args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "KUBECONFIG="+s.Kubeconfig, "SBX_KUBECTL="+s.KubectlPath(),
			"SBX_STATE_DIR="+state, "SBX_DOCKER_SBX=")
		cmd.Env = append(cmd.Env, extra...)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		return out.String(), err
	}
}

// Labelled lists what the namespace holds labelled as a sandbox's, of
// every kind the kubernetes driver makes.
func (s *Space) Labelled(name string) []string {
	s.T.Helper()
	out := s.Kubectl(s.T, "-n", s.NS, "get",
		"sandboxes.agents.x-k8s.io,sandboxclaims.extensions.agents.x-k8s.io,sandboxwarmpools.extensions.agents.x-k8s.io,sandboxtemplates.extensions.agents.x-k8s.io,pods,networkpolicies.networking.k8s.io,persistentvolumeclaims",
		"-l", driver.LabelSandbox+"="+name, "-o", "name")
	return strings.Fields(out)
}

// Web starts a busybox httpd pod in the namespace answering "hello from
// NAME" on port 8080, and returns its address.
func (s *Space) Web(name string) string {
	s.T.Helper()
	s.KubectlInput(s.T, fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: %s, namespace: %s, labels: {dev.sbx.test: web}}
spec:
  automountServiceAccountToken: false
  terminationGracePeriodSeconds: 1
  containers:
  - name: web
    image: %s
    imagePullPolicy: Never
    command: [sh, -c, "mkdir -p /www && echo hello from %s > /www/index.html && exec httpd -f -p 8080 -h /www"]
    readinessProbe: {tcpSocket: {port: 8080}, periodSeconds: 1}
`, name, s.NS, BusyboxImage, name), "create", "-f", "-")
	s.Kubectl(s.T, "-n", s.NS, "wait", "--for=condition=Ready", "pod/"+name, "--timeout=120s")
	return strings.TrimSpace(s.Kubectl(s.T, "-n", s.NS, "get", "pod", name, "-o", "jsonpath={.status.podIP}"))
}

// KubectlErr runs kubectl and returns its error with its stderr, where
// Kubectl would fail the test.
func (s *Space) KubectlErr(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out, errOut bytes.Buffer
	cmd := s.Command(ctx, args...)
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("kubectl %s: %v: %s", strings.Join(args, " "), err, errOut.String())
	}
	return out.String(), nil
}

// Trace is a buffer for a driver's trace of its commands
// (runner.Runner.Trace), logged when the test fails.
func (s *Space) Trace() *SyncBuffer {
	b := &SyncBuffer{}
	s.T.Cleanup(func() {
		if s.T.Failed() {
			s.T.Logf("the driver's commands:\n%s", b.String())
		}
	})
	return b
}

// SyncBuffer is a buffer safe for concurrent writes.
type SyncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *SyncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *SyncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
