// Package k8stest gives tests the repository's single-node Kubernetes test
// cluster, the one test/kubernetes/cluster starts: where it is, kubectl
// against it, a namespace per test and images loaded from docker.
//
// Tests call Cluster(t); it skips when no cluster is running and fails
// instead when SBX_E2E=1 (CI starts the cluster in .ci/run).
package k8stest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sbxhq/sbx/internal/proc"
	"go.yaml.in/yaml/v3"
)

// BusyboxImage is the busybox-static image (FROM scratch, /bin/sh and the
// applets in /bin, a /tmp) that test/kubernetes/cluster up loads into every
// cluster; pods use it with imagePullPolicy: Never.
const BusyboxImage = "docker.io/library/sbx-k8s-busybox:local"

// DefaultRun is the cluster's run dir when SBX_K8S_RUN is unset; the
// script's default too.
const DefaultRun = "/var/run/sbx-k8s"

// callTimeout bounds one kubectl or script call, so a wedged cluster fails a
// test instead of hanging it until go test's own timeout. Waits inside a
// call carry their own, shorter --timeout.
const callTimeout = 3 * time.Minute

// Env is a running test cluster.
type Env struct {
	Kubeconfig string // the admin kubeconfig
	Bin        string // directory holding kubectl, kube-apiserver and the other binaries of the cluster
	run        string // the cluster's run dir
}

// Cluster returns the running test cluster. It takes what
// `test/kubernetes/cluster env` exports (KUBECONFIG, SBX_K8S_BIN,
// SBX_K8S_RUN) and otherwise the default run dir. KUBECONFIG alone is not
// enough, so a kubeconfig of some other cluster in the environment is never
// used; and the cluster must be on a loopback address.
func Cluster(t testing.TB) *Env {
	t.Helper()
	e, err := find(os.Getenv)
	if err == nil {
		err = e.ready(t.Context())
	}
	if err != nil {
		msg := fmt.Sprintf("no kubernetes test cluster: %v; start one with test/kubernetes/cluster up and eval \"$(test/kubernetes/cluster env)\"", err)
		if os.Getenv("SBX_E2E") == "1" {
			t.Fatal("SBX_E2E=1 but " + msg)
		}
		t.Skip(msg)
	}
	return e
}

// find locates the cluster's files from the environment.
func find(getenv func(string) string) (*Env, error) {
	e := &Env{run: getenv("SBX_K8S_RUN")}
	if e.run == "" {
		e.run = DefaultRun
	}
	if bin := getenv("SBX_K8S_BIN"); bin != "" {
		e.Bin = bin
		e.Kubeconfig = getenv("KUBECONFIG")
		if strings.Contains(e.Kubeconfig, string(os.PathListSeparator)) {
			return nil, fmt.Errorf("KUBECONFIG lists several files (%s); the test cluster's is one", e.Kubeconfig)
		}
	} else {
		b, err := os.ReadFile(filepath.Join(e.run, "bin-dir"))
		if err != nil {
			return nil, fmt.Errorf("SBX_K8S_BIN is unset and %v", err)
		}
		e.Bin = strings.TrimSpace(string(b))
	}
	if e.Kubeconfig == "" {
		e.Kubeconfig = filepath.Join(e.run, "kubeconfig")
	}
	if _, err := exec.LookPath(e.KubectlPath()); err != nil {
		return nil, fmt.Errorf("no kubectl in %s: %v", e.Bin, err)
	}
	server, err := kubeconfigServer(e.Kubeconfig)
	if err != nil {
		return nil, err
	}
	if !loopback(server) {
		return nil, fmt.Errorf("%s points at %s, not at a cluster on this machine's loopback", e.Kubeconfig, server)
	}
	return e, nil
}

// kubeconfigServer returns the API server URL of path's current context
// (kubeconfig format: https://kubernetes.io/docs/reference/config-api/kubeconfig.v1/).
func kubeconfigServer(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	var kc struct {
		CurrentContext string `yaml:"current-context"`
		Contexts       []struct {
			Name    string `yaml:"name"`
			Context struct {
				Cluster string `yaml:"cluster"`
			} `yaml:"context"`
		} `yaml:"contexts"`
		Clusters []struct {
			Name    string `yaml:"name"`
			Cluster struct {
				Server string `yaml:"server"`
			} `yaml:"cluster"`
		} `yaml:"clusters"`
	}
	if err := yaml.Unmarshal(b, &kc); err != nil {
		return "", fmt.Errorf("%s: %v", path, err)
	}
	for _, c := range kc.Contexts {
		if c.Name != kc.CurrentContext {
			continue
		}
		for _, cl := range kc.Clusters {
			if cl.Name == c.Context.Cluster {
				return cl.Cluster.Server, nil
			}
		}
	}
	return "", fmt.Errorf("%s: no cluster for current context %q", path, kc.CurrentContext)
}

func loopback(server string) bool {
	u, err := url.Parse(server)
	if err != nil {
		return false
	}
	if u.Hostname() == "localhost" {
		return true
	}
	ip := net.ParseIP(u.Hostname())
	return ip != nil && ip.IsLoopback()
}

// ready asks the API server whether it is ready.
func (e *Env) ready(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var stderr bytes.Buffer
	cmd := e.Command(ctx, "get", "--raw", "/readyz")
	cmd.Stderr = &stderr
	if out, err := cmd.Output(); err != nil || strings.TrimSpace(string(out)) != "ok" {
		return fmt.Errorf("the API server in %s is not ready: %v: %s%s", e.Kubeconfig, err, out, stderr.Bytes())
	}
	return nil
}

// KubectlPath is the cluster's kubectl (v1.35, matching the server; the
// kubectl on PATH may be another version).
func (e *Env) KubectlPath() string { return filepath.Join(e.Bin, "kubectl") }

// Command is kubectl with args against the cluster, for callers that need
// their own stdin or the exit code (kubectl exec passes the remote one on).
func (e *Env) Command(ctx context.Context, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, e.KubectlPath(), append([]string{"--kubeconfig", e.Kubeconfig}, args...)...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+e.Kubeconfig)
	return cmd
}

// Kubectl runs kubectl with args and returns its stdout; a failure fails
// the test with kubectl's stderr.
func (e *Env) Kubectl(t testing.TB, args ...string) string {
	t.Helper()
	return e.KubectlInput(t, "", args...)
}

// KubectlInput is Kubectl with input on stdin (kubectl apply -f -).
func (e *Env) KubectlInput(t testing.TB, input string, args ...string) string {
	t.Helper()
	out, err := e.kubectl(t.Context(), input, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// kubectl runs kubectl with args, bounded by callTimeout.
func (e *Env) kubectl(ctx context.Context, input string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	return run(e.Command(ctx, args...), input)
}

// script runs test/kubernetes/cluster with args, bounded by callTimeout,
// and returns its stdout.
func (e *Env) script(ctx context.Context, args ...string) (string, error) {
	path, err := clusterScript()
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Env = append(os.Environ(), "SBX_K8S_RUN="+e.run)
	return run(cmd, "")
}

// run runs cmd with input on stdin and returns its stdout; its error shows
// the command and its stderr.
func run(cmd *exec.Cmd, input string) (string, error) {
	cmd.Stdin = strings.NewReader(input)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("%s: %v: %s", strings.Join(cmd.Args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

// Namespace creates a namespace unique to this test run, waits until pods
// can be created in it (its default ServiceAccount exists) and deletes it
// when the test ends, waiting until it is gone. When the test failed, what
// was in the namespace is logged first. The first call of a process
// removes what killed runs left (sweep); the namespace records its owner
// for the runs after.
func (e *Env) Namespace(t testing.TB) string {
	t.Helper()
	e.sweep(t)
	name := namespaceName(t.Name())
	e.KubectlInput(t, fmt.Sprintf(`apiVersion: v1
kind: Namespace
metadata:
  name: %s
  labels:
    dev.sbx.test: k8stest
  annotations:
    %s: %q
`, name, ownerAnnotation, proc.Owner()), "create", "-f", "-")
	t.Cleanup(func() {
		ctx := context.WithoutCancel(t.Context())
		if t.Failed() {
			out, err := e.kubectl(ctx, "", "-n", name, "get", "sandboxes,pods,events", "-o", "wide")
			t.Logf("namespace %s at the failure:\n%s%v", name, out, errOrNil(err))
		}
		if _, err := e.kubectl(ctx, "", "delete", "namespace", name, "--wait=true", "--timeout=120s"); err != nil {
			t.Errorf("deleting the test namespace: %v", err)
			return
		}
		out, err := e.kubectl(ctx, "", "get", "namespace", name, "--ignore-not-found", "-o", "name")
		if err != nil || strings.TrimSpace(out) != "" {
			t.Errorf("test namespace %s still there after its deletion: %q %v", name, out, errOrNil(err))
		}
		if err := e.waitVolumesGone(ctx, name); err != nil {
			t.Error(err)
		}
	})
	e.Kubectl(t, "-n", name, "wait", "--for=create", "--timeout=60s", "serviceaccount/default")
	return name
}

// waitVolumesGone waits until the volumes the cluster's provisioner made
// for the claims of namespace ns (reclaim policy Delete) are deleted: they
// go after their claims, which go with the namespace. Volumes of another
// policy are their maker's to remove. It reads `kubectl get
// persistentvolumes -o json` (core/v1 PersistentVolume: spec.claimRef,
// spec.persistentVolumeReclaimPolicy).
func (e *Env) waitVolumesGone(ctx context.Context, ns string) error {
	out, err := e.kubectl(ctx, "", "get", "persistentvolumes", "-o", "json")
	if err != nil {
		return err
	}
	names, err := provisionedFor([]byte(out), ns)
	if err != nil || len(names) == 0 {
		return err
	}
	args := []string{"wait", "--for=delete", "--timeout=120s"}
	for _, n := range names {
		args = append(args, "persistentvolumes/"+n)
	}
	if _, err := e.kubectl(ctx, "", args...); err != nil {
		return fmt.Errorf("the volumes of namespace %s are still there after it: %v", ns, err)
	}
	return nil
}

// provisionedFor lists the volumes of a PersistentVolume List that a
// claim in ns holds or held, under the Delete reclaim policy.
func provisionedFor(list []byte, ns string) ([]string, error) {
	var l struct {
		Kind  string `json:"kind"`
		Items []struct {
			Metadata struct {
				Name string `json:"name"`
			} `json:"metadata"`
			Spec struct {
				Reclaim  string `json:"persistentVolumeReclaimPolicy"`
				ClaimRef *struct {
					Namespace string `json:"namespace"`
				} `json:"claimRef"`
			} `json:"spec"`
		} `json:"items"`
	}
	if err := json.Unmarshal(list, &l); err != nil || l.Kind != "List" {
		return nil, fmt.Errorf("kubectl get persistentvolumes -o json: not a List (%v)", err)
	}
	var names []string
	for _, v := range l.Items {
		if v.Spec.Reclaim == "Delete" && v.Spec.ClaimRef != nil && v.Spec.ClaimRef.Namespace == ns {
			names = append(names, v.Metadata.Name)
		}
	}
	return names, nil
}

func errOrNil(err error) any {
	if err == nil {
		return ""
	}
	return err
}

// namespaceName makes a DNS-1123 label from a test name and a random
// suffix: "sbxtest-", at most 40 characters of the name, "-", 8 hex digits.
func namespaceName(test string) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(test) {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
			dash = false
		} else if !dash && b.Len() > 0 {
			b.WriteByte('-')
			dash = true
		}
		if b.Len() >= 40 {
			break
		}
	}
	base := strings.TrimRight(b.String(), "-")
	if base == "" {
		base = "test"
	}
	return "sbxtest-" + base + "-" + randomHex(4)
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// LoadImage copies a docker image (by its docker reference) into the
// cluster's containerd, where pods with imagePullPolicy: Never find it, and
// removes it from the cluster when the test ends, so give it a tag unique to
// the test run. It runs test/kubernetes/cluster load-image, which needs root.
func (e *Env) LoadImage(t testing.TB, image string) {
	t.Helper()
	// Registered first: a load that fails half way may still have left
	// the image in the cluster.
	loaded := false
	t.Cleanup(func() {
		err := e.UnloadImage(context.WithoutCancel(t.Context()), image)
		switch {
		case err != nil && loaded:
			t.Errorf("removing the test image from the cluster: %v", err)
		case err != nil:
			t.Logf("removing the test image after its failed load: %v", err)
		}
	})
	if err := e.LoadImageCtx(t.Context(), image); err != nil {
		t.Fatal(err)
	}
	loaded = true
}

// LoadImageCtx is LoadImage for an image that outlives one test (a
// package's, loaded once and shared by its parallel tests): the caller
// removes it with UnloadImage.
func (e *Env) LoadImageCtx(ctx context.Context, image string) error {
	_, err := e.script(ctx, "load-image", image)
	return err
}

// UnloadImage removes an image LoadImageCtx loaded from the cluster.
func (e *Env) UnloadImage(ctx context.Context, image string) error {
	_, err := e.script(ctx, "remove-image", image)
	return err
}

// Images lists the names of the images in the cluster's containerd: what
// LoadImage copied and what the node pulled. CRI names a pulled image by
// the reference the pod gave, by REPOSITORY@DIGEST and by sha256:IMAGE-ID
// (containerd 1.6, pkg/cri/server/image_pull.go). It runs
// test/kubernetes/cluster images, which needs root.
func (e *Env) Images(t testing.TB) []string {
	t.Helper()
	// Not cancelled with the test: cleanups may list images too.
	out, err := e.script(context.WithoutCancel(t.Context()), "images")
	if err != nil {
		t.Fatal(err)
	}
	return strings.Fields(out)
}

// RemovePulled removes, when the test ends, every image in the cluster's
// containerd whose name starts with prefix: the node's copies of what it
// pulled from a test's own registry, which the test cluster's kubelet
// never collects (its image GC is off). The sha256:IMAGE-ID name goes
// with an image's last other name. Call it before anything is pulled, so
// that it runs after the cleanups that remove the pods using the images.
// It runs test/kubernetes/cluster images and remove-image, which need
// root.
func (e *Env) RemovePulled(t testing.TB, prefix string) {
	t.Helper()
	if prefix == "" || strings.HasPrefix(prefix, "sha256:") {
		t.Fatalf("RemovePulled(%q): give the prefix of a registry of the test's own", prefix)
	}
	t.Cleanup(func() {
		ctx := context.WithoutCancel(t.Context())
		out, err := e.script(ctx, "images")
		if err != nil {
			t.Errorf("listing the cluster's images, to remove those from %s: %v", prefix, err)
			return
		}
		var names []string
		for _, n := range strings.Fields(out) {
			if strings.HasPrefix(n, prefix) {
				names = append(names, n)
			}
		}
		if len(names) == 0 {
			return
		}
		if _, err := e.script(ctx, append([]string{"remove-image"}, names...)...); err != nil {
			t.Errorf("removing the images the cluster pulled from %s: %v", prefix, err)
		}
	})
}

// clusterScript finds test/kubernetes/cluster from the working directory,
// which go test sets to the package's directory inside this module.
func clusterScript() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && bytes.HasPrefix(b, []byte("module github.com/sbxhq/sbx\n")) {
			return filepath.Join(dir, "test", "kubernetes", "cluster"), nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("test/kubernetes/cluster not found: the working directory is not inside the sbx module")
		}
		dir = parent
	}
}

// KwokNode is the fake node (kwok) that test/kubernetes/cluster up --kwok
// adds: pods bound to it are made Running and Ready by kwok without
// running anything, so a test can have hundreds of them. It carries the
// taint kwok.x-k8s.io/node=fake:NoSchedule.
const KwokNode = "kwok-node-0"

// Kwok returns the fake node's name once it is Ready. It skips when the
// cluster runs without kwok and fails instead when SBX_E2E=1 (.ci/run
// starts the cluster with --kwok).
func (e *Env) Kwok(t testing.TB) string {
	t.Helper()
	if _, err := e.kubectl(t.Context(), "", "wait", "--for=condition=Ready", "node/"+KwokNode, "--timeout=60s"); err != nil {
		msg := fmt.Sprintf("no Ready kwok node %s (%v); start it with test/kubernetes/cluster up --kwok", KwokNode, err)
		if os.Getenv("SBX_E2E") == "1" {
			t.Fatal("SBX_E2E=1 but " + msg)
		}
		t.Skip(msg)
	}
	return KwokNode
}
