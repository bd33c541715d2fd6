package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sbxhq/sbx/driver/kubernetes"
	"github.com/sbxhq/sbx/internal/k8stest"
)

// readmeQuickPath is the README's section on a local cluster without a
// registry: its sandbox.yaml and its steps.
func readmeQuickPath(t *testing.T) (yaml, steps string) {
	t.Helper()
	b, err := os.ReadFile("../../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, sec, ok := strings.Cut(string(b), "\n#### Kubernetes on a local cluster without a registry\n")
	if !ok {
		t.Fatal("README: no section \"Kubernetes on a local cluster without a registry\"")
	}
	sec, _, _ = strings.Cut(sec, "\n#")
	_, rest, ok := strings.Cut(sec, "```yaml\n")
	if !ok {
		t.Fatal("README's quick path has no sandbox.yaml")
	}
	yaml, steps, ok = strings.Cut(rest, "```\n")
	if !ok {
		t.Fatal("README's quick path: the sandbox.yaml block does not end")
	}
	return yaml, steps
}

// TestReadmeQuickPath follows the README's Kubernetes quick path on the
// test cluster, as a newcomer would, with the built sbx: its sandbox.yaml
// (the template and namespace made the test's own: the test cluster
// pulls nothing, and the test has a namespace of its own; egress
// enforced by the pod's own pin, which that namespace admits), sbx apply -y,
// which stops and prints the command that loads the helper image it
// built into docker (the generic one: the test cluster is none of kind,
// k3d, minikube), the README's load command for the test cluster, sbx
// apply -y again, a command in the sandbox, sbx destroy -y. The
// workspace claim gets its volume from the default StorageClass.
func TestReadmeQuickPath(t *testing.T) {
	t.Parallel()
	yaml, steps := readmeQuickPath(t)
	for _, s := range []string{"`sbx apply -y`", "`test/kubernetes/cluster load-image sbx-helper:<hash>`", "`sbx shell -- echo hello`", "`sbx destroy -y`"} {
		if !strings.Contains(steps, s) {
			t.Fatalf("the README's quick path no longer says %s; this test follows it:\n%s", s, steps)
		}
	}
	c := newCluster(t)
	dir := t.TempDir()
	ws := filepath.Join(dir, "ws")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	tmpl := regexp.MustCompile(`(?m)^template: \S+`)
	ns := regexp.MustCompile(`(?m)^  namespace: \S+`)
	if !tmpl.MatchString(yaml) || !ns.MatchString(yaml) || !strings.Contains(yaml, "\ndriver: kubernetes\n") {
		t.Fatalf("the README's sandbox.yaml changed shape; this test fills in its template and namespace:\n%s", yaml)
	}
	yaml = tmpl.ReplaceAllLiteralString(yaml, "template: "+k8stest.BusyboxImage)
	yaml = ns.ReplaceAllLiteralString(yaml, "  namespace: "+c.NS)
	if err := os.WriteFile(filepath.Join(ws, "sandbox.yaml"), []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	// sbx's helper image is named by its binary: a copy with the run's id
	// appended (an ELF runs with trailing bytes) gives this run an image
	// of its own, which the test removes from docker and the cluster.
	self := filepath.Join(dir, "sbx")
	bin, err := os.ReadFile(c.Binary)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(self, append(bin, []byte("\nsbx TestReadmeQuickPath "+k8stest.RunID+"\n")...), 0o755); err != nil {
		t.Fatal(err)
	}
	helper, err := kubernetes.HelperImage(self, "")
	if err != nil {
		t.Fatal(err)
	}
	loaded := false
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		if loaded {
			if err := c.UnloadImage(ctx, helper); err != nil {
				t.Errorf("removing %s from the cluster: %v", helper, err)
			}
		}
		exec.CommandContext(ctx, "docker", "rmi", "-f", helper).Run()
	})
	sbx := c.CLI(ws, filepath.Join(dir, "state"), "SBX_STATIC_BINARY="+self)
	t.Cleanup(func() {
		if out, err := sbx("destroy", "-y"); err != nil {
			t.Errorf("sbx destroy: %v\n%s", err, out)
		}
	})

	out, err := sbx("apply", "-y")
	if err == nil {
		t.Fatalf("the first sbx apply worked without the helper image on the node:\n%s", out)
	}
	want := "docker save " + helper + " | ctr -n k8s.io images import -"
	if !strings.Contains(out, "do not have sbx's helper image "+helper) || !strings.Contains(out, want) {
		t.Fatalf("the first sbx apply does not say the helper image is missing and how to load it (%q):\n%s", want, out)
	}
	if left := c.Labelled("demo"); len(left) > 0 {
		t.Errorf("the stopped create left: %v", left)
	}
	if err := exec.Command("docker", "image", "inspect", helper).Run(); err != nil {
		t.Fatalf("sbx said it built %s in docker, docker has no such image: %v", helper, err)
	}
	// The README's step for the test cluster.
	loaded = true
	if err := c.LoadImageCtx(t.Context(), helper); err != nil {
		t.Fatal(err)
	}
	if out, err := sbx("apply", "-y"); err != nil {
		t.Fatalf("sbx apply after loading the helper image: %v\n%s", err, out)
	}
	if out, err := sbx("shell", "--", "echo", "hello"); err != nil || out != "hello\n" {
		t.Fatalf("sbx shell -- echo hello: %v %q", err, out)
	}
	if got := c.Kubectl(t, "-n", c.NS, "get", "persistentvolumeclaims/"+kubernetes.ClaimName("demo"), "-o", "jsonpath={.spec.storageClassName} {.status.phase}"); got != "standard Bound" {
		t.Errorf("the workspace claim: %q, want Bound by the default StorageClass standard", got)
	}
	if out, err := sbx("destroy", "-y"); err != nil {
		t.Fatalf("sbx destroy: %v\n%s", err, out)
	}
	if left := c.Labelled("demo"); len(left) > 0 {
		t.Errorf("destroy left: %v", left)
	}
}
