package e2e

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sbxhq/sbx/driver"
	"github.com/sbxhq/sbx/driver/docker"
	"github.com/sbxhq/sbx/internal/dockertest"
	"github.com/sbxhq/sbx/internal/fixture"
	"github.com/sbxhq/sbx/reconcile"
	"github.com/sbxhq/sbx/spec"
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
	e.lifecycleFile(env.Image)
	e.must("apply", "-y")
	id := dockertest.ContainerID(t, docker.ContainerName(e.name))
	file, err := os.ReadFile(filepath.Join(e.ws, "sandbox.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	me := hostUser(t)
	owner := reconcile.Owner{Workspace: e.ws, User: me}

	// The labels say whose it is, beside the record.
	out, err := exec.Command("docker", "inspect", "-f", `{{index .Config.Labels "`+driver.LabelOwner+`"}}|{{index .Config.Labels "`+driver.LabelOwnerWorkspace+`"}}`, docker.ContainerName(e.name)).Output()
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
		if got := dockertest.ContainerID(t, docker.ContainerName(e.name)); got != id {
			t.Fatalf("%s: A's container was replaced (%s, was %s)", when, got, id)
		}
		if !running(t, docker.ContainerName(e.name)) || !running(t, docker.EgressName(e.name)) {
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
	out, err = exec.Command("docker", "inspect", "-f", `{{index .Config.Labels "`+driver.LabelOwnerWorkspace+`"}}`, docker.ContainerName(e.name)).Output()
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

// TestLsOtherUsers: on a daemon shared with another user, sbx ls lists the
// current user's sandboxes and only counts the other's; --all lists it by
// what the listing labels it with, never reading its file (here a file
// whose content would show in any error about it) or observing it.
func TestLsOtherUsers(t *testing.T) {
	e := newLoopEnv(t, "e2e-ls-mine")
	e.lifecycleFile(env.Image)
	e.must("apply", "-y")

	other := env.Uniq("e2e-ls-theirs")
	t.Cleanup(func() { fixture.RemoveSandbox(other) })
	theirs := t.TempDir()
	file := filepath.Join(theirs, "sandbox.yaml")
	const marker = "THEIR-FILE-CONTENT-7f3a"
	if err := os.WriteFile(file, []byte("version: 1\nname: ["+marker+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	owner := reconcile.Owner{Workspace: theirs, User: "sbx-e2e-someone-else"}
	rec, err := json.Marshal(reconcile.Record{ManagedBy: reconcile.ManagedBy, FormatVersion: reconcile.RecordVersion, Driver: "docker", Name: other,
		Config: spec.Spec{Files: []string{file}, Dir: theirs, Name: other, Declarations: []spec.Declaration{{Path: file}}}, Owner: owner})
	if err != nil {
		t.Fatal(err)
	}
	args := []string{"create", "--name", docker.ContainerName(other)}
	for k, v := range map[string]string{driver.LabelManaged: "true", driver.LabelRole: "sandbox", driver.LabelSandbox: other,
		driver.LabelOwner: owner.User, driver.LabelOwnerWorkspace: owner.Workspace, driver.LabelRecord: string(rec)} {
		args = append(args, "--label", k+"="+v)
	}
	if out, err := exec.Command("docker", append(args, env.Image, "true")...).CombinedOutput(); err != nil {
		t.Fatalf("docker create: %v\n%s", err, out)
	}

	ls := func(args ...string) (map[string]map[string]any, float64, string) {
		t.Helper()
		out, code := e.sbx(append([]string{"ls", "--driver", "docker"}, args...)...)
		if code != 0 {
			t.Fatalf("sbx ls %v: exit %d\n%s", args, code, out)
		}
		if strings.Contains(out, marker) || strings.Contains(out, "cannot be read") {
			t.Errorf("sbx ls %v read the other user's file:\n%s", args, out)
		}
		if !slices.Contains(args, "--json") {
			return nil, 0, out
		}
		m, others := fixture.LsJSON(t, out)
		return m, others, out
	}
	mine, others, _ := ls("--json")
	if _, ok := mine[other]; ok {
		t.Errorf("sbx ls lists another user's sandbox: %v", mine[other])
	}
	if others < 1 {
		t.Errorf("sbx ls counts %v other users' sandboxes, want at least 1", others)
	}
	if got := mine[e.name]; got == nil || got["state"] != "in-sync" || got["here"] != true {
		t.Errorf("sbx ls of the user's own sandbox: %v", got)
	}
	if _, _, out := ls(); strings.Contains(out, other) || !strings.Contains(out, "of other users are not listed; 'sbx ls --all' lists them") {
		t.Errorf("sbx ls:\n%s", out)
	}

	all, _, _ := ls("--all", "--json")
	want := map[string]any{"name": other, "driver": "docker", "workspace": theirs, "user": owner.User,
		"exists": true, "status": "created", "state": "other-user", "pending_changes": float64(0)}
	if diff := cmp.Diff(want, all[other]); diff != "" {
		t.Errorf("sbx ls --all: the other user's sandbox (-want +got):\n%s", diff)
	}
	if _, _, out := ls("--all"); !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(other) + ` +docker +created +sbx-e2e-someone-else +` + regexp.QuoteMeta(theirs) + `$`).MatchString(out) {
		t.Errorf("sbx ls --all does not list the other user's sandbox by name, status, user and workspace:\n%s", out)
	}
}
