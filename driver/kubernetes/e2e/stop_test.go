package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sbxhq/sbx/driver/kubernetes"
	"github.com/sbxhq/sbx/internal/k8stest"
)

// TestStopSays: sbx stop on the kubernetes driver says what it keeps, and
// it is so: the pod is deleted, the workspace claim stays, and after a
// start the workspace's file is there and a file installed outside it
// is not.
func TestStopSays(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	dir := t.TempDir()
	ws := filepath.Join(dir, "ws")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	name := "stop-" + k8stest.RunID
	decl := "version: 1\nname: " + name + "\nagent: shell\ndriver: kubernetes\nworkspace: .\n" + c.Head() + "  namespace: " + c.NS + "\n  egress: advisory\n"
	if err := os.WriteFile(filepath.Join(ws, "sandbox.yaml"), []byte(decl), 0o644); err != nil {
		t.Fatal(err)
	}
	sbx := c.CLI(ws, filepath.Join(dir, "state"), "SBX_K8S_HELPER_IMAGE="+c.Helper)
	t.Cleanup(func() {
		if out, err := sbx("destroy", "-y"); err != nil {
			t.Errorf("sbx destroy: %v\n%s", err, out)
		}
	})
	if out, err := sbx("apply", "-y"); err != nil {
		t.Fatalf("sbx apply: %v\n%s", err, out)
	}
	if out, err := sbx("shell", "--", "sh", "-c", "echo kept > kept.txt && echo installed > /etc/sbx-installed"); err != nil {
		t.Fatalf("sbx shell: %v\n%s", err, out)
	}
	out, err := sbx("stop")
	if err != nil {
		t.Fatalf("sbx stop: %v\n%s", err, out)
	}
	want := `Stopped sandbox "` + name + `"; its pod is deleted and its workspace volume kept: the workspace stays, but what was installed outside it is lost (start makes a new pod from the template).`
	if !strings.Contains(out, want) {
		t.Errorf("sbx stop says:\n%s\nwant a line with:\n%s", out, want)
	}
	if got := c.Kubectl(t, "-n", c.NS, "get", "pods,persistentvolumeclaims", "-l", "dev.sbx.sandbox="+name, "-o", "name"); strings.Contains(got, "pod/"+name+"\n") || !strings.Contains(got, "persistentvolumeclaim/"+kubernetes.ClaimName(name)) {
		t.Errorf("after the stop the sandbox's pod and claim are:\n%s\nwant the claim and no pod/%s", got, name)
	}
	if out, err := sbx("start"); err != nil {
		t.Fatalf("sbx start: %v\n%s", err, out)
	}
	out, err = sbx("shell", "--", "sh", "-c", "cat kept.txt; cat /etc/sbx-installed 2>/dev/null || echo lost")
	if err != nil || out != "kept\nlost\n" {
		t.Errorf("after stop and start: %v %q, want the workspace's file kept and the installed one lost", err, out)
	}
}
