package docker

import (
	"bytes"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/sbxhq/sbx/driver"
	"github.com/sbxhq/sbx/reconcile"
)

// A sandbox belongs to its workspace: two checkouts with the same
// sandbox.yaml, on one machine, as the static sbx a user runs, on a real
// daemon.

// sbxIn runs sbx in dir with e's state directory (the same user on the
// same machine) and returns its output and exit status.
func (e *loopEnv) sbxIn(dir string, args ...string) (string, int) {
	e.t.Helper()
	c := e.cmd(args...)
	c.Dir = dir
	out, err := c.CombinedOutput()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		e.t.Fatal(err)
	}
	return string(out), code
}

// checkout makes another checkout holding file's content as sandbox.yaml.
func checkout(t *testing.T, file []byte) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "sandbox.yaml"), file, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func hostUser(t *testing.T) string {
	t.Helper()
	u, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	return u.Username
}

// TestTwoCheckouts: apply in checkout A; plan, apply, destroy, shell and
// stop in checkout B are refused, saying whose the sandbox is and what to
// do, and A's sandbox is untouched (same container, still running, plan
// in A empty). A sandbox.local.yaml an agent wrote in a third checkout,
// renaming that checkout's sandbox to A's, is refused the same way.
// --adopt in B takes it over explicitly; then A is refused.
func TestTwoCheckouts(t *testing.T) {
	e := newLoopEnv(t, "e2e-owner")
	e.lifecycleFile(testImage)
	e.must("apply", "-y")
	id := containerIDOf(t, containerName(e.name))
	file, err := os.ReadFile(filepath.Join(e.ws, "sandbox.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	me := hostUser(t)
	owner := reconcile.Owner{Workspace: e.ws, User: me}

	// The labels say whose it is, beside the record.
	out, err := exec.Command("docker", "inspect", "-f", `{{index .Config.Labels "`+driver.LabelOwner+`"}}|{{index .Config.Labels "`+driver.LabelOwnerWorkspace+`"}}`, containerName(e.name)).Output()
	if err != nil {
		t.Fatal(err)
	}
	if got, want := strings.TrimSpace(string(out)), me+"|"+e.ws; got != want {
		t.Errorf("owner labels = %q, want %q", got, want)
	}

	b := checkout(t, file)
	refusal := `sandbox "` + e.name + `" belongs to ` + owner.String() + `, not to this workspace (` + b + `)`
	for _, args := range [][]string{
		{"plan"}, {"apply", "-y"}, {"apply", "-y", "--approve-widening"}, {"destroy", "-y"},
		{"shell", "--", "true"}, {"stop"},
	} {
		out, code := e.sbxIn(b, args...)
		if code == 0 || !strings.Contains(out, refusal) {
			t.Errorf("sbx %s in checkout B: exit %d, want a refusal naming %s:\n%s", strings.Join(args, " "), code, owner, out)
		}
	}
	if out, _ := e.sbxIn(b, "status", "--json"); !strings.Contains(out, `"state": "other-workspace"`) || !strings.Contains(out, " belongs to "+owner.String()+", not to this workspace ("+b+")") {
		t.Errorf("sbx status in checkout B:\n%s", out)
	}
	// Without this machine's records (another state directory), the
	// labels alone refuse it.
	other := e.cmd("apply", "-y", "--approve-widening")
	other.Dir = b
	other.Env = append(other.Env, "SBX_STATE_DIR="+t.TempDir())
	if out, err := other.CombinedOutput(); err == nil || !strings.Contains(string(out), refusal) {
		t.Errorf("apply in checkout B with another state directory: %v, want a refusal:\n%s", err, out)
	}

	// A hostile agent in checkout C writes a local layer that renames C's
	// sandbox to A's: the workspace is where the user ran sbx, not what
	// the layer says, so the refusal holds.
	c := checkout(t, bytes.Replace(file, []byte("name: "+e.name), []byte("name: "+e.name+"-c"), 1))
	if err := os.WriteFile(filepath.Join(c, "sandbox.local.yaml"), []byte("name: "+e.name+"\nworkspace: "+e.ws+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"apply", "-y", "--approve-widening"}, {"destroy", "-y"}, {"shell", "--", "true"}} {
		out, code := e.sbxIn(c, args...)
		if code == 0 || !strings.Contains(out, `sandbox "`+e.name+`" belongs to `+owner.String()) {
			t.Errorf("sbx %s with a local layer renaming to A's sandbox: exit %d:\n%s", strings.Join(args, " "), code, out)
		}
	}

	untouched := func(when string) {
		t.Helper()
		if got := containerIDOf(t, containerName(e.name)); got != id {
			t.Fatalf("%s: A's container was replaced (%s, was %s)", when, got, id)
		}
		if !running(t, containerName(e.name)) || !running(t, egressName(e.name)) {
			t.Fatalf("%s: A's sandbox no longer runs", when)
		}
		if out, code := e.sbx("plan", "--detailed-exitcode"); code != 0 {
			t.Fatalf("%s: plan in A: exit %d\n%s", when, code, out)
		}
	}
	untouched("after B and C were refused")
	ls := e.lsJSON()
	if got := ls[e.name]; got["here"] != true || got["workspace"] != e.ws || got["user"] != me {
		t.Errorf("ls in A: %v", got)
	}

	// --adopt is the explicit way over. B's workspace is another
	// directory, so the sandbox is replaced to mount it, with B's labels.
	if out, code := e.sbxIn(b, "apply", "-y", "--approve-widening", "--adopt"); code != 0 || !strings.Contains(out, "takes the sandbox over from "+owner.String()) || !strings.Contains(out, "workspace: "+strconv.Quote(e.ws)+" → "+strconv.Quote(b)) {
		t.Fatalf("apply --adopt in B: exit %d\n%s", code, out)
	}
	out, err = exec.Command("docker", "inspect", "-f", `{{index .Config.Labels "`+driver.LabelOwnerWorkspace+`"}}`, containerName(e.name)).Output()
	if err != nil || strings.TrimSpace(string(out)) != b {
		t.Errorf("owner workspace label after adopting: %q, %v; want %s", out, err, b)
	}
	if out, code := e.sbxIn(b, "plan", "--detailed-exitcode"); code != 0 {
		t.Errorf("plan in B after adopting: exit %d\n%s", code, out)
	}
	if out, code := e.sbx("apply", "-y"); code == 0 || !strings.Contains(out, `belongs to `+b+` (user `+me+`)`) {
		t.Errorf("apply in A after B adopted: exit %d\n%s", code, out)
	}
	if out, code := e.sbxIn(b, "destroy", "-y"); code != 0 {
		t.Errorf("destroy in B after adopting: exit %d\n%s", code, out)
	}
}
