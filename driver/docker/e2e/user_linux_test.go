package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/sbxhq/sbx/internal/fixture"
)

// TestUser: user: runs the sandbox's processes, shell and loop as that
// uid:gid, so what the agent writes into the workspace is that user's on
// the host (not root's), and the egress proxy still serves it. Changing
// it replaces the sandbox.
func TestUser(t *testing.T) {
	e := newLoopEnv(t, "e2e-user")
	if err := os.Chmod(e.ws, 0o777); err != nil {
		t.Fatal(err)
	}
	write := func(user string) {
		t.Helper()
		doc := fmt.Sprintf(`version: 1
name: %s
agent: shell
driver: docker
template: %s
user: "%s"
network: {agentHosts: false, allow: [%s], blockCIDRs: [127.0.0.0/8]}
loop:
  prompt: PROMPT.md
  maxIterations: 1
  completion: {promise: DONE}
  command: [sh, -c, 'id -u > loop-uid; echo "<promise>DONE</promise>"']
`, e.name, env.Image, user, env.WebIP)
		if err := os.WriteFile(filepath.Join(e.ws, "sandbox.yaml"), []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("4321:4321")
	if out, code := e.sbx("apply", "-y", "--approve-widening"); code != 0 {
		t.Fatalf("apply: exit %d\n%s", code, out)
	}
	out, code := e.sbx("shell", "--", "sh", "-c", "id -u; id -g; echo hi > by-agent; wget -q -O- http://"+env.WebIP+":8080/")
	if code != 0 || !strings.HasPrefix(out, "4321\n4321\n") || !strings.Contains(out, "hello-from-web") {
		t.Fatalf("shell as the user (exit %d):\n%s", code, out)
	}
	fi, err := os.Stat(filepath.Join(e.ws, "by-agent"))
	if err != nil {
		t.Fatal(err)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); !ok || st.Uid != 4321 || st.Gid != 4321 {
		t.Errorf("the agent's file is owned by %+v on the host, want 4321:4321", fi.Sys())
	}
	if out, code := e.sbx("loop", "-y"); code != 0 {
		t.Fatalf("loop as the user: exit %d\n%s", code, out)
	}
	if uid, _ := os.ReadFile(filepath.Join(e.ws, "loop-uid")); strings.TrimSpace(string(uid)) != "4321" {
		t.Errorf("the loop's agent ran as uid %q", uid)
	}

	write("4322:4322")
	if out, _ := e.sbx("plan"); !strings.Contains(out, `~ user: "4321:4321" → "4322:4322"`) || !strings.Contains(out, "forces replacement") {
		t.Errorf("plan of a user change:\n%s", out)
	}
}

// TestTemplateUser: a template whose image has a USER line (every real
// agent template: Docker's sandbox-templates, examples/custom-template)
// runs as that user, and converges, when the file names no user. Docker
// fills the container's Config.User from the image; the driver must still
// see the sandbox as the file declared it, or apply fails with "did not
// converge (- user)" and every plan wants a replace nobody caused.
func TestTemplateUser(t *testing.T) {
	e := newLoopEnv(t, "e2e-tmpl-user")
	// The workspace is another uid's: the template's own user is kept
	// all the same (sbx runs the agent as the workspace's owner only
	// when the template names no user or root).
	if err := os.Chmod(e.ws, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(e.ws, 4242, 4243); err != nil {
		t.Fatal(err)
	}
	image := "sbx-test-user:" + env.RunID
	build := exec.Command("docker", "build", "-q", "-t", image, "-")
	build.Stdin = strings.NewReader("FROM " + env.Image + "\nUSER 1000:1000\n")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building %s: %v\n%s", image, err, out)
	}
	t.Cleanup(func() {
		fixture.RemoveSandbox(e.name)
		exec.Command("docker", "rmi", "-f", image).Run()
	})
	doc := fmt.Sprintf(`version: 1
name: %s
agent: shell
driver: docker
template: %s
network: {agentHosts: false}
`, e.name, image)
	if err := os.WriteFile(filepath.Join(e.ws, "sandbox.yaml"), []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, code := e.sbx("apply", "-y"); code != 0 {
		t.Fatalf("apply of a template with USER: exit %d\n%s", code, out)
	}
	if out, code := e.sbx("plan", "--detailed-exitcode"); code != 0 || !strings.Contains(out, "No changes") {
		t.Errorf("plan after apply (exit %d), want no changes:\n%s", code, out)
	}
	if out, code := e.sbx("shell", "--", "id", "-u"); code != 0 || strings.TrimSpace(out) != "1000" {
		t.Errorf("the sandbox runs as %q (exit %d), want the template's USER 1000", out, code)
	}
	// Its own .git (a volume sbx seeded) is the template user's to write.
	if out, code := e.sbx("shell", "--", "sh", "-c", "mkdir -p .git/refs/heads && echo probe > .git/probe && cat .git/probe"); code != 0 || strings.TrimSpace(out) != "probe" {
		t.Errorf("the template's user cannot write the sandbox's .git (exit %d): %s", code, out)
	}
}
