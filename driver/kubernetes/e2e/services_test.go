package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sbxhq/sbx/driver/kubernetes"
	"github.com/sbxhq/sbx/internal/k8stest"
)

// TestServices: a service runs as a container of the sandbox's pod; apply
// waits until its readiness check passes, the agent reaches it by name,
// and its way out is the sandbox's proxy under the sandbox's policy (a
// host the policy does not allow is refused); a service without egress
// is refused before anything is made, saying why.
func TestServices(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	dir := t.TempDir()
	ws := filepath.Join(dir, "ws")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	name := "svc-" + k8stest.RunID
	write := func(egress string) {
		t.Helper()
		decl := "version: 1\nname: " + name + "\nagent: shell\ndriver: kubernetes\nworkspace: .\n" + c.Head() + "  namespace: " + c.NS + "\n  egress: advisory\n" +
			"network: {agentHosts: false}\nservices:\n  db:\n    image: " + k8stest.BusyboxImage + "\n" +
			`    command: [sh, -c, "mkdir -p /tmp/www && echo hello-from-db > /tmp/www/index.html && exec httpd -f -p 127.0.0.1:8080 -h /tmp/www"]` + "\n" +
			"    ports: [8080]\n" + egress +
			`    ready: {command: [sh, -c, "printf 'GET / HTTP/1.0\r\n\r\n' | nc 127.0.0.1 8080 | grep -q hello-from-db"]}` + "\n"
		if err := os.WriteFile(filepath.Join(ws, "sandbox.yaml"), []byte(decl), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	sbx := c.CLI(ws, filepath.Join(dir, "state"), "SBX_K8S_HELPER_IMAGE="+c.Helper)
	write("")
	if out, err := sbx("plan"); err == nil || !strings.Contains(out, "services.db.egress: write egress: true: the kubernetes driver runs each service as a container of the sandbox's pod") {
		t.Errorf("plan of a service without egress: %v\n%s", err, out)
	}
	write("    egress: true\n")
	out, err := sbx("plan")
	if err != nil || !strings.Contains(out, `+ services.db: "image `+k8stest.BusyboxImage+", ports 8080") {
		t.Errorf("plan: %v\n%s", err, out)
	}
	t.Cleanup(func() {
		if out, err := sbx("destroy", "-y"); err != nil {
			t.Errorf("sbx destroy: %v\n%s", err, out)
		}
	})
	if out, err := sbx("apply", "-y"); err != nil {
		t.Fatalf("sbx apply: %v\n%s", err, out)
	}
	// Apply waited for the readiness check: the service answers by name
	// at once.
	out, err = sbx("shell", "--", "sh", "-c", `printf 'GET / HTTP/1.0\r\n\r\n' | nc -w 10 db 8080`)
	if err != nil || !strings.Contains(out, "hello-from-db") {
		t.Errorf("the service by name: %v %q", err, out)
	}
	// The service's way out is the sandbox's proxy, whose policy refuses
	// a host it does not allow (nothing is dialled: the name is refused).
	pod := kubernetes.SandboxPodName(name)
	got := c.Kubectl(t, "-n", c.NS, "exec", pod, "-c", kubernetes.ServiceContainer("db"), "--", "sh", "-c",
		`printf 'GET http://denied.example/ HTTP/1.0\r\n\r\n' | nc -w 10 127.0.0.1 3128`)
	if !strings.Contains(got, "403") {
		t.Errorf("the service's request to a host the policy does not allow: %q", got)
	}
	if out, err := sbx("plan", "--detailed-exitcode"); err != nil || !strings.Contains(out, "No changes") {
		t.Errorf("plan after the apply: %v\n%s", err, out)
	}
}
