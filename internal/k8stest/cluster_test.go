package k8stest_test

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sbxhq/sbx/internal/fixture"
	"github.com/sbxhq/sbx/internal/k8stest"
)

// TestSandboxLifecycle is the cluster's smoke test: an agent-sandbox
// Sandbox (agents.x-k8s.io/v1beta1) on the busybox image turns Ready, runs
// kubectl exec with stdin and an exit code, suspends (operatingMode:
// Suspended deletes the pod) and resumes (a new pod), and leaves nothing
// behind when deleted. Condition types and reasons are agent-sandbox
// v1.0.3's, api/v1beta1/sandbox_types.go.
func TestSandboxLifecycle(t *testing.T) {
	c := k8stest.Cluster(t)
	ns := c.Namespace(t)
	label := "dev.sbx.test=" + ns
	c.KubectlInput(t, fmt.Sprintf(`apiVersion: agents.x-k8s.io/v1beta1
kind: Sandbox
metadata:
  name: smoke
  labels: {dev.sbx.test: %[1]s}
spec:
  podTemplate:
    metadata:
      labels: {dev.sbx.test: %[1]s}
    spec:
      automountServiceAccountToken: false
      terminationGracePeriodSeconds: 1
      containers:
      - name: agent
        image: %[2]s
        imagePullPolicy: Never
        command: ["/bin/sh", "-c", "trap 'exit 0' TERM; while true; do sleep 1; done"]
`, ns, k8stest.BusyboxImage), "-n", ns, "apply", "-f", "-")

	c.Kubectl(t, "-n", ns, "wait", "--for=condition=Ready", "--timeout=120s", "sandbox/smoke")
	firstPod := c.Kubectl(t, "-n", ns, "get", "pod", "smoke", "-o", "jsonpath={.metadata.uid}")

	cmd := c.Command(t.Context(), "-n", ns, "exec", "-i", "smoke", "-c", "agent", "--",
		"/bin/sh", "-c", `read line; echo "got $line"; echo oops >&2; exit 7`)
	cmd.Stdin = strings.NewReader("hello from stdin\n")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 7 {
		t.Fatalf("kubectl exec: want exit code 7, got %v (stderr %q)", err, stderr.String())
	}
	if diff := cmp.Diff("got hello from stdin\n", string(out)); diff != "" {
		t.Errorf("exec stdout (-want +got):\n%s", diff)
	}
	if !strings.HasPrefix(stderr.String(), "oops\n") {
		t.Errorf("exec stderr = %q, want the command's oops first", stderr.String())
	}

	c.Kubectl(t, "-n", ns, "patch", "sandbox", "smoke", "--type=merge", "-p", `{"spec":{"operatingMode":"Suspended"}}`)
	c.Kubectl(t, "-n", ns, "wait", "--for=condition=Suspended", "--timeout=120s", "sandbox/smoke")
	c.Kubectl(t, "-n", ns, "wait", "--for=delete", "--timeout=60s", "pod/smoke")
	if got := c.Kubectl(t, "-n", ns, "get", "sandbox", "smoke", "-o",
		`jsonpath={.status.conditions[?(@.type=="Suspended")].reason} {.status.conditions[?(@.type=="Ready")].status}/{.status.conditions[?(@.type=="Ready")].reason}`); got != "PodTerminated False/SandboxSuspended" {
		t.Errorf("suspended Sandbox: Suspended reason, Ready status/reason = %q, want %q", got, "PodTerminated False/SandboxSuspended")
	}

	c.Kubectl(t, "-n", ns, "patch", "sandbox", "smoke", "--type=merge", "-p", `{"spec":{"operatingMode":"Running"}}`)
	c.Kubectl(t, "-n", ns, "wait", "--for=condition=Ready", "--timeout=120s", "sandbox/smoke")
	if pod := c.Kubectl(t, "-n", ns, "get", "pod", "smoke", "-o", "jsonpath={.metadata.uid}"); pod == firstPod {
		t.Errorf("resumed Sandbox runs the same pod %s, want a new one", pod)
	}
	if got := c.Kubectl(t, "-n", ns, "exec", "smoke", "-c", "agent", "--", "echo", "resumed"); got != "resumed\n" {
		t.Errorf("exec after resume = %q, want %q", got, "resumed\n")
	}

	c.Kubectl(t, "-n", ns, "delete", "sandbox", "smoke", "--wait=true", "--timeout=60s")
	// The pod goes through kube-controller-manager's garbage collector (it
	// is owned by the Sandbox).
	c.Kubectl(t, "-n", ns, "wait", "--for=delete", "--timeout=60s", "pod/smoke")
	if left := c.Kubectl(t, "get", "sandboxes,pods,services,persistentvolumeclaims", "-A", "-l", label, "-o", "name"); left != "" {
		t.Errorf("left after deleting the Sandbox:\n%s", left)
	}
}

// TestLoadImage loads a docker image made here, with a tag unique to the
// run, and runs a pod from it.
func TestLoadImage(t *testing.T) {
	c := k8stest.Cluster(t)
	busybox, err := exec.LookPath("busybox")
	if err == nil {
		_, err = exec.LookPath("docker")
	}
	if err != nil {
		if os.Getenv("SBX_E2E") == "1" {
			t.Fatalf("SBX_E2E=1 but %v (needs docker and busybox-static)", err)
		}
		t.Skip(err)
	}
	marker := "loaded-" + randomHex(t)
	image := "sbx-k8stest-" + randomHex(t) + ":load"
	dir := t.TempDir()
	b, err := os.ReadFile(busybox)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "busybox"), b, 0o755); err != nil {
		t.Fatal(err)
	}
	dockerfile := fmt.Sprintf("FROM scratch\nCOPY busybox /bin/busybox\nCMD [\"/bin/busybox\", \"echo\", %q]\n", marker)
	if err := os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte(dockerfile), 0o644); err != nil {
		t.Fatal(err)
	}
	build := append(append([]string{"build", "-q"}, fixture.Labels("k8stest")...), "-t", image, dir)
	if out, err := exec.CommandContext(t.Context(), "docker", build...).CombinedOutput(); err != nil {
		t.Fatalf("docker build: %v: %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("docker", "rmi", image).CombinedOutput(); err != nil {
			t.Errorf("docker rmi %s: %v: %s", image, err, out)
		}
	})

	c.LoadImage(t, image)
	if names := c.Images(t); !slices.Contains(names, "docker.io/library/"+image) {
		t.Errorf("the cluster's images after loading %s: %q", image, names)
	}
	ns := c.Namespace(t)
	c.KubectlInput(t, fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: loaded
spec:
  restartPolicy: Never
  automountServiceAccountToken: false
  containers:
  - name: main
    image: %s
    imagePullPolicy: Never
`, image), "-n", ns, "apply", "-f", "-")
	c.Kubectl(t, "-n", ns, "wait", "--for=jsonpath={.status.phase}=Succeeded", "--timeout=120s", "pod/loaded")
	if got := c.Kubectl(t, "-n", ns, "logs", "loaded"); got != marker+"\n" {
		t.Errorf("pod output = %q, want %q", got, marker+"\n")
	}
}

func randomHex(t *testing.T) string {
	b := make([]byte, 4)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// TestDefaultStorageClass: the cluster has one default StorageClass with
// dynamic provisioning, as kind has: a claim that names no class gets a
// volume made for it (a directory on the node), a pod writes to it, and
// deleting the claim deletes the volume and its directory.
func TestDefaultStorageClass(t *testing.T) {
	c := k8stest.Cluster(t)
	classes := c.Kubectl(t, "get", "storageclasses", "-o",
		`jsonpath={range .items[?(@.metadata.annotations.storageclass\.kubernetes\.io/is-default-class=="true")]}{.metadata.name} {.provisioner} {.reclaimPolicy}{"\n"}{end}`)
	if classes != "standard sbx-k8s.local/hostpath Delete\n" {
		t.Fatalf("default StorageClasses: %q, want one, standard, of the cluster's provisioner", classes)
	}
	ns := c.Namespace(t)
	c.KubectlInput(t, fmt.Sprintf(`apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: data}
spec:
  accessModes: [ReadWriteOnce]
  resources: {requests: {storage: 16Mi}}
---
apiVersion: v1
kind: Pod
metadata: {name: writer}
spec:
  automountServiceAccountToken: false
  terminationGracePeriodSeconds: 1
  restartPolicy: Never
  containers:
  - name: w
    image: %s
    imagePullPolicy: Never
    command: ["/bin/sh", "-c", "echo written > /data/file"]
    volumeMounts: [{name: data, mountPath: /data}]
  volumes: [{name: data, persistentVolumeClaim: {claimName: data}}]
`, k8stest.BusyboxImage), "-n", ns, "apply", "-f", "-")
	c.Kubectl(t, "-n", ns, "wait", "--for=jsonpath={.status.phase}=Succeeded", "--timeout=120s", "pod/writer")
	got := c.Kubectl(t, "-n", ns, "get", "persistentvolumeclaims/data", "-o", "jsonpath={.spec.storageClassName} {.status.phase} {.spec.volumeName}")
	f := strings.Fields(got)
	if len(f) != 3 || f[0] != "standard" || f[1] != "Bound" {
		t.Fatalf("the claim: %q, want class standard, Bound", got)
	}
	pv := f[2]
	dir := c.Kubectl(t, "get", "persistentvolumes/"+pv, "-o", "jsonpath={.spec.hostPath.path}")
	if b, err := os.ReadFile(filepath.Join(dir, "file")); err != nil || string(b) != "written\n" {
		t.Fatalf("the volume's directory %q holds %q, %v; want the pod's file", dir, b, err)
	}
	c.Kubectl(t, "-n", ns, "delete", "pod/writer", "persistentvolumeclaims/data", "--wait=true", "--timeout=60s")
	c.Kubectl(t, "wait", "--for=delete", "--timeout=60s", "persistentvolumes/"+pv)
	if _, err := os.Lstat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the volume's directory %s is still there after the volume: %v", dir, err)
	}
}
