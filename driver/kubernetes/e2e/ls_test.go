package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sbxhq/sbx/driver"
	"github.com/sbxhq/sbx/internal/fixture"
	"github.com/sbxhq/sbx/internal/k8stest"
	"github.com/sbxhq/sbx/reconcile"
	"github.com/sbxhq/sbx/spec"
)

// TestLsOtherUsers: in a namespace shared with another user (the current
// context's), sbx ls lists the current user's sandboxes and only counts
// the other's; --all lists it by name, status, user and workspace, as the
// namespace's listing gives them, never reading its file (here one whose
// content would show in any error about it) or observing it.
func TestLsOtherUsers(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	dir := t.TempDir()
	// kubectl's current context names the test's namespace, as a team's
	// shared namespace is named in its members' kubeconfigs.
	raw, err := os.ReadFile(c.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kubeconfig, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(c.KubectlPath(), "--kubeconfig", kubeconfig, "config", "set-context", "--current", "--namespace", c.NS).CombinedOutput(); err != nil {
		t.Fatalf("kubectl config set-context: %v\n%s", err, out)
	}
	ws := filepath.Join(dir, "ws")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	mine := "ls-mine-" + k8stest.RunID
	decl := "version: 1\nname: " + mine + "\nagent: shell\ndriver: kubernetes\nworkspace: .\n" + c.Head() + "  egress: advisory\n"
	if err := os.WriteFile(filepath.Join(ws, "sandbox.yaml"), []byte(decl), 0o644); err != nil {
		t.Fatal(err)
	}
	sbx := c.CLI(ws, filepath.Join(dir, "state"), "SBX_K8S_HELPER_IMAGE="+c.Helper, "KUBECONFIG="+kubeconfig)
	if out, err := sbx("apply", "-y"); err != nil {
		t.Fatalf("sbx apply: %v\n%s", err, out)
	}

	// The other user's sandbox, suspended (no pod), with sbx's labels and
	// the record sbx keeps on it, naming its owner and a file of theirs.
	other := "ls-theirs-" + k8stest.RunID
	theirs := t.TempDir()
	file := filepath.Join(theirs, "sandbox.yaml")
	const marker = "THEIR-FILE-CONTENT-5c2e"
	if err := os.WriteFile(file, []byte("version: 1\nname: ["+marker+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	owner := reconcile.Owner{Workspace: theirs, User: "sbx-e2e-someone-else"}
	rec, err := json.Marshal(reconcile.Record{ManagedBy: reconcile.ManagedBy, FormatVersion: reconcile.RecordVersion, Driver: "kubernetes", Name: other,
		Config: spec.Spec{Files: []string{file}, Dir: theirs, Name: other, Declarations: []spec.Declaration{{Path: file}}}, Owner: owner})
	if err != nil {
		t.Fatal(err)
	}
	c.KubectlInput(t, fmt.Sprintf(`apiVersion: agents.x-k8s.io/v1beta1
kind: Sandbox
metadata:
  name: %s
  namespace: %s
  labels: {%s: "true", %s: sandbox, %s: %s}
  annotations: {%s: %q}
spec:
  operatingMode: Suspended
  podTemplate:
    spec:
      automountServiceAccountToken: false
      containers:
      - {name: agent, image: %s, imagePullPolicy: Never, command: [sleep, "3600"]}
`, other, c.NS, driver.LabelManaged, driver.LabelRole, driver.LabelSandbox, other, driver.LabelRecord, rec, k8stest.BusyboxImage), "create", "-f", "-")

	ls := func(args ...string) (map[string]map[string]any, float64, string) {
		t.Helper()
		out, err := sbx(append([]string{"ls", "--driver", "kubernetes"}, args...)...)
		if err != nil {
			t.Fatalf("sbx ls %v: %v\n%s", args, err, out)
		}
		if strings.Contains(out, marker) || strings.Contains(out, "cannot be read") {
			t.Errorf("sbx ls %v read the other user's file:\n%s", args, out)
		}
		if !strings.Contains(strings.Join(args, " "), "--json") {
			return nil, 0, out
		}
		m, others := fixture.LsJSON(t, out)
		return m, others, out
	}
	listed, others, _ := ls("--json")
	if _, ok := listed[other]; ok {
		t.Errorf("sbx ls lists another user's sandbox: %v", listed[other])
	}
	if others != 1 {
		t.Errorf("sbx ls counts %v other users' sandboxes, want 1", others)
	}
	if got := listed[mine]; got == nil || got["state"] != "in-sync" || got["here"] != true {
		t.Errorf("sbx ls of the user's own sandbox: %v", got)
	}
	all, _, _ := ls("--all", "--json")
	want := map[string]any{"name": other, "driver": "kubernetes", "workspace": theirs, "user": owner.User,
		"exists": true, "status": "suspended", "state": "other-user", "pending_changes": float64(0)}
	if diff := cmp.Diff(want, all[other]); diff != "" {
		t.Errorf("sbx ls --all: the other user's sandbox (-want +got):\n%s", diff)
	}
	if _, _, out := ls("--all"); !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(other) + ` +kubernetes +suspended +sbx-e2e-someone-else +` + regexp.QuoteMeta(theirs) + `$`).MatchString(out) {
		t.Errorf("sbx ls --all does not list the other user's sandbox by name, status, user and workspace:\n%s", out)
	}
	if out, err := sbx("destroy", "-y"); err != nil {
		t.Errorf("sbx destroy: %v\n%s", err, out)
	}
}
