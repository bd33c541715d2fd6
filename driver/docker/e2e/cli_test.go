package e2e

import (
	"bufio"
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/sbxhq/sbx/driver/docker"
	"github.com/sbxhq/sbx/internal/dockertest"
)

// TestCLIWorkflow is the README's path for a Linux user, through the sbx
// binary on a real daemon: init, plan, apply, a shell whose only way out
// is the deny-by-default proxy, netlog, an allow-list change in place, a
// converged plan, destroy.
func TestCLIWorkflow(t *testing.T) {
	e := newLoopEnv(t, "e2e-cli")
	run := func(wantCode int, args ...string) string {
		t.Helper()
		out, code := e.sbx(args...)
		if code != wantCode {
			t.Fatalf("sbx %s: exit %d, want %d:\n%s", strings.Join(args, " "), code, wantCode, out)
		}
		return out
	}
	local := func(allow string) {
		t.Helper()
		doc := "name: " + e.name + "\ndriver: docker\ntemplate: " + env.Image + "\nnetwork:\n  blockCIDRs: [127.0.0.0/8]\n  allow: [" + allow + "]\n"
		if err := os.WriteFile(filepath.Join(e.ws, "sandbox.local.yaml"), []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	os.Remove(filepath.Join(e.ws, "PROMPT.md"))
	run(0, "init", "--agent", "shell")
	local("")
	run(0, "validate")
	if out := run(2, "plan", "--detailed-exitcode"); !strings.Contains(out, `sandbox "`+e.name+`" will be created`) {
		t.Errorf("plan of a new sandbox:\n%s", out)
	}
	if out := run(0, "apply", "-y"); !strings.Contains(out, "Apply complete: 1 created") {
		t.Errorf("apply:\n%s", out)
	}
	web := env.WebIP + ":8080"
	fetch := "wget -q -O- http://" + web + "/ 2>&1; echo wget-exit=$?"
	if out := run(0, "shell", "--", "sh", "-c", fetch); strings.Contains(out, "hello-from-web") || strings.Contains(out, "wget-exit=0") {
		t.Errorf("an unlisted host answered under policy: deny:\n%s", out)
	}
	if out := run(0, "netlog"); !strings.Contains(out, "deny  GET "+web) || !strings.Contains(out, "not in the allow list") {
		t.Errorf("netlog does not show the refusal:\n%s", out)
	}
	if out := run(0, "netlog", "--json"); !strings.Contains(out, `"decision":"deny"`) {
		t.Errorf("netlog --json:\n%s", out)
	}
	followEndsQuietly(t, e.cmd("netlog", "--follow"), "deny  GET "+web)

	id := dockertest.ContainerID(t, docker.ContainerName(e.name))
	local(env.WebIP)
	if out := run(2, "plan", "--detailed-exitcode"); !strings.Contains(out, "updated in-place") || !strings.Contains(out, "widens egress") {
		t.Errorf("plan of an allow-list change:\n%s", out)
	}
	// A widening needs more than -y: the file may be the agent's.
	if out := run(1, "apply", "-y"); !strings.Contains(out, "apply refused: the plan widens") || !strings.Contains(out, "egress to "+env.WebIP+" (from sandbox.local.yaml:") {
		t.Errorf("apply -y of a widening:\n%s", out)
	}
	if out := run(0, "apply", "-y", "--approve-widening"); !strings.Contains(out, "1 updated") {
		t.Errorf("apply of an allow-list change:\n%s", out)
	}
	if dockertest.ContainerID(t, docker.ContainerName(e.name)) != id {
		t.Error("an allow-list change recreated the sandbox")
	}
	if out := run(0, "shell", "--", "sh", "-c", fetch); !strings.Contains(out, "hello-from-web") {
		t.Errorf("the newly allowed host does not answer:\n%s", out)
	}
	if out := run(0, "plan", "--detailed-exitcode"); !strings.Contains(out, "No changes") {
		t.Errorf("second plan:\n%s", out)
	}
	run(7, "shell", "--", "sh", "-c", "exit 7")

	if out := run(0, "destroy", "-y"); !strings.Contains(out, "Destroy complete") {
		t.Errorf("destroy:\n%s", out)
	}
	if left := dockertest.Leftovers(e.name); left != "" {
		t.Errorf("destroy left behind: %s", left)
	}
}

// TestDoctorTemplate: sbx doctor says whether the template image of the
// nearest sandbox.yaml is on this machine (a create would pull it).
func TestDoctorTemplate(t *testing.T) {
	e := newLoopEnv(t, "e2e-doctor")
	write := func(image string) {
		t.Helper()
		doc := "version: 1\nname: " + e.name + "\nagent: shell\ndriver: docker\ntemplate: " + image + "\n"
		if err := os.WriteFile(filepath.Join(e.ws, "sandbox.yaml"), []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(env.Image)
	out, code := e.sbx("doctor")
	if want := `sandbox "` + e.name + `": driver docker; template ` + env.Image + ` is on this machine`; code != 0 || !strings.Contains(out, want) {
		t.Errorf("doctor (exit %d) does not say %q:\n%s", code, want, out)
	}
	missing := "sbx-test-missing-" + env.RunID + ":none"
	write(missing)
	out, _ = e.sbx("doctor")
	if want := "problem: template " + missing + " is not on this machine"; !strings.Contains(out, want) {
		t.Errorf("doctor does not say %q:\n%s", want, out)
	}
}

// TestApplyShowsLongSteps: a template build's output is shown under its
// step as it runs, and the plan of a template that is not on this machine
// shows its pull (a registry address on loopback; nothing is pulled).
func TestApplyShowsLongSteps(t *testing.T) {
	e := newLoopEnv(t, "e2e-progress")
	marker := "sbx-build-marker-" + env.RunID
	ctx := filepath.Join(e.ws, ".sandbox")
	if err := os.MkdirAll(ctx, 0o755); err != nil {
		t.Fatal(err)
	}
	df := "FROM " + env.Image + "\nRUN echo " + marker + "\n"
	if err := os.WriteFile(filepath.Join(ctx, "Dockerfile"), []byte(df), 0o644); err != nil {
		t.Fatal(err)
	}
	doc := "version: 1\nname: " + e.name + "\nagent: shell\ndriver: docker\ntemplate:\n  build: {context: .sandbox}\n"
	if err := os.WriteFile(filepath.Join(e.ws, "sandbox.yaml"), []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dockertest.RemoveBuiltTemplates(e.name) })
	out, code := e.sbx("apply", "-y")
	if code != 0 {
		t.Fatalf("apply: exit %d\n%s", code, out)
	}
	if !strings.Contains(out, "] build template of sandbox") || !strings.Contains(out, "\n      "+marker+"\n") {
		t.Errorf("the build's output is not shown under its step:\n%s", out)
	}
	e.sbx("destroy", "-y")

	missing := "127.0.0.1:1/sbx-test-missing-" + env.RunID + ":none"
	doc = "version: 1\nname: " + e.name + "\nagent: shell\ndriver: docker\ntemplate: " + missing + "\n"
	if err := os.WriteFile(filepath.Join(e.ws, "sandbox.yaml"), []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, _ := e.sbx("plan"); !strings.Contains(out, "docker pull "+missing+", unless present") {
		t.Errorf("the plan does not show the pull:\n%s", out)
	}
	// TestTemplateMissing covers the failed pull itself.
}

// followEndsQuietly starts cmd (a "netlog --follow"), waits for a line
// containing want, sends SIGTERM as a service manager or "timeout" would,
// and wants it to end quietly: exit 0, nothing on stderr.
func followEndsQuietly(t *testing.T, cmd *exec.Cmd, want string) {
	t.Helper()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(out)
	seen := false
	for !seen && sc.Scan() {
		seen = strings.Contains(sc.Text(), want)
	}
	if !seen {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("netlog --follow ended before printing %q: %v\n%s", want, sc.Err(), stderr.String())
	}
	cmd.Process.Signal(syscall.SIGTERM)
	go io.Copy(io.Discard, out)
	err = cmd.Wait()
	if err != nil || stderr.Len() > 0 {
		t.Errorf("netlog --follow on SIGTERM: %v, stderr %q; want exit 0 and no message", err, stderr.String())
	}
}
