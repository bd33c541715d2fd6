package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sbxhq/sbx/internal/fixture"
)

// TestCLI drives the built sbx binary against the cluster as a user
// would: apply from nothing, sbx shell -- CMD, then the agent plays
// hostile with the workspace copy it will hand back and sbx pull must
// keep the host safe, then sbx destroy leaves nothing labelled.
//
// The hostile agent (THREATS.md) writes, inside its copy: a symlink to an
// absolute host path and one climbing out of the workspace, a chain of
// links that each look local but lead out (s -> ., t -> s/.., leak ->
// t/outside/victim), a file under a directory it turns into a symlink to
// a host directory, .git/hooks and .git/config entries and a changed
// sandbox.yaml (protected paths), the rest of git's configuration surface
// (.git/commondir naming a directory of its own with a config,
// config.worktree, info/, worktrees/, modules/*/config, a .git file in a
// subdirectory), a FIFO, a setuid file. After the pull no host file
// outside the workspace was written or can be read through a link, no
// protected file changed, nothing of git's configuration came back (the
// user's git status runs nothing of the agent's), no link points out, no
// FIFO or setuid bit landed, and the agent's plain work came back.
func TestCLI(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	c.enforce()
	dir := t.TempDir()
	ws := filepath.Join(dir, "ws")
	outside := filepath.Join(dir, "outside") // host files the agent must not touch
	for _, d := range []string{ws, filepath.Join(ws, "sub"), outside} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write := func(path, s string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	git := func(args ...string) (string, error) {
		cmd := exec.Command("git", append([]string{"-C", ws}, args...)...)
		cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "HOME="+dir)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if out, err := git("init", "-q"); err != nil {
		t.Fatalf("git init: %v\n%s", err, out)
	}
	write(filepath.Join(ws, "a"), "a\n")
	if out, err := git("add", "a"); err != nil {
		t.Fatalf("git add: %v\n%s", err, out)
	}
	if out, err := git("-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-qm", "init"); err != nil {
		t.Fatalf("git commit: %v\n%s", err, out)
	}
	gitConfig, err := os.ReadFile(filepath.Join(ws, ".git", "config"))
	if err != nil {
		t.Fatal(err)
	}
	// What the agent's git configuration would run on the host: it
	// creates marker, outside the workspace.
	marker := filepath.Join(outside, "pwned")
	evil := "[core]\n\tfsmonitor = touch " + marker + "\n"
	write(filepath.Join(outside, "victim"), "host secret\n")
	// The declaration lives in the workspace, so it is protected there.
	decl := "version: 1\nname: cli\nagent: shell\ndriver: kubernetes\nworkspace: .\n" + c.Head() + "  namespace: " + c.NS + "\n"
	write(filepath.Join(ws, "sandbox.yaml"), decl)
	sbx := c.CLI(ws, filepath.Join(dir, "state"), "SBX_K8S_HELPER_IMAGE="+c.Helper)
	t.Cleanup(func() {
		if out, err := sbx("destroy", "-y"); err != nil {
			t.Errorf("sbx destroy: %v\n%s", err, out)
		}
	})
	if out, err := sbx("apply", "-y"); err != nil {
		t.Fatalf("sbx apply: %v\n%s", err, out)
	}
	if out, err := sbx("shell", "--", "sh", "-c", "echo hello from $(pwd)"); err != nil || out != "hello from "+ws+"\n" {
		t.Fatalf("sbx shell: %v %q", err, out)
	}
	// The agent's commit (the pod's image has no git), written into the
	// pod's .git as git would write it, on a branch its HEAD now names.
	commit, writeObject := fixture.AgentCommit(t, ws)
	hostHead, _ := os.ReadFile(filepath.Join(ws, ".git", "HEAD"))
	hostile := strings.Join([]string{
		"set -e",
		"echo agent work > work.txt",
		writeObject,
		"echo " + commit + " > .git/refs/heads/agent && echo 'ref: refs/heads/agent' > .git/HEAD",
		"ln -s " + outside + "/victim abs-link",
		"ln -s ../../outside/victim up-link",
		// Three links that each look local; the kernel resolves t
		// through s (the workspace itself) to its parent.
		"ln -s . s && ln -s s/.. t && ln -s t/outside/victim leak",
		"rm -rf sub && ln -s " + outside + " sub",
		"echo 'echo pwned' > .git/hooks/post-checkout && chmod +x .git/hooks/post-checkout",
		"echo '[core] fsmonitor = evil' > .git/config",
		"mkdir -p evilgit/hooks evilgit/objects evilgit/refs && printf '" + evil + "' > evilgit/config && echo ../evilgit > .git/commondir",
		"printf '" + evil + "' > .git/config.worktree",
		"mkdir -p .git/info .git/worktrees/w .git/modules/m && echo '* filter=evil' > .git/info/attributes",
		"printf '" + evil + "' > .git/worktrees/w/config && printf '" + evil + "' > .git/modules/m/config",
		"mkdir -p plain && echo 'gitdir: ../evilgit' > plain/.git",
		"echo 'name: widened' >> sandbox.yaml",
		"mkfifo fifo",
		"echo s > setuid && chmod 4755 setuid",
	}, "\n")
	if out, err := sbx("shell", "--", "sh", "-c", hostile); err != nil {
		t.Fatalf("the agent's moves: %v\n%s", err, out)
	}
	out, err := sbx("pull")
	if err != nil {
		t.Fatalf("sbx pull: %v\n%s", err, out)
	}
	if got, _ := os.ReadFile(filepath.Join(ws, "work.txt")); string(got) != "agent work\n" {
		t.Errorf("the agent's work did not come back: %q\n%s", got, out)
	}
	if got, _ := os.ReadFile(filepath.Join(outside, "victim")); string(got) != "host secret\n" {
		t.Errorf("a host file outside the workspace changed: %q", got)
	}
	for _, l := range []string{"abs-link", "up-link"} {
		if target, err := os.Readlink(filepath.Join(ws, l)); err == nil {
			t.Errorf("%s came back pointing at %q", l, target)
		}
	}
	if got, err := os.ReadFile(filepath.Join(ws, "leak")); err == nil {
		t.Errorf("a chain of links reads a host file outside the workspace: %q", got)
	}
	if real, err := filepath.EvalSymlinks(filepath.Join(ws, "t")); err == nil && !strings.HasPrefix(real, ws+string(filepath.Separator)) && real != ws {
		t.Errorf("t came back leading to %s", real)
	}
	if fi, err := os.Lstat(filepath.Join(ws, "sub")); err != nil || !fi.IsDir() {
		t.Errorf("the workspace's directory sub was replaced: %v %v", fi, err)
	}
	// The commit came home by git's fetch, into refs/sbx/NAME/*; the
	// host's HEAD is its own.
	if got, _ := os.ReadFile(filepath.Join(ws, ".git", "HEAD")); string(got) != string(hostHead) {
		t.Errorf("the pull wrote the host's HEAD: %q", got)
	}
	if got, err := git("rev-parse", "refs/sbx/cli/HEAD", "refs/sbx/cli/heads/agent"); err != nil || got != commit+"\n"+commit+"\n" {
		t.Errorf("refs/sbx/cli/* = %q, %v; want the agent's commit %s twice\n%s", got, err, commit, out)
	}
	if got, _ := os.ReadFile(filepath.Join(ws, ".git", "config")); string(got) != string(gitConfig) {
		t.Errorf(".git/config changed: %q", got)
	}
	for _, p := range []string{"commondir", "config.worktree", "info/attributes", "worktrees", "modules"} {
		if _, err := os.Lstat(filepath.Join(ws, ".git", p)); err == nil {
			t.Errorf(".git/%s came back", p)
		}
	}
	if _, err := os.Lstat(filepath.Join(ws, "plain", ".git")); err == nil {
		t.Error("a .git file came back")
	}
	for _, dir := range []string{".", "plain"} {
		if out, err := git("-C", dir, "status"); err != nil {
			t.Errorf("git status in %s after the pull: %v\n%s", dir, err, out)
		}
	}
	if _, err := os.Lstat(marker); err == nil {
		t.Error("the user's git status ran the agent's command")
	}
	if _, err := os.Lstat(filepath.Join(ws, ".git", "hooks", "post-checkout")); err == nil {
		t.Error("a hook came back")
	}
	if got, _ := os.ReadFile(filepath.Join(ws, "sandbox.yaml")); string(got) != decl {
		t.Errorf("the declaration changed: %q", got)
	}
	if _, err := os.Lstat(filepath.Join(ws, "fifo")); err == nil {
		t.Error("a FIFO came back")
	}
	if fi, err := os.Stat(filepath.Join(ws, "setuid")); err == nil && fi.Mode()&(os.ModeSetuid|0o022) != 0 {
		t.Errorf("setuid came back as %v", fi.Mode())
	}
	// (The FIFO is not in the stream at all: sbx in the pod archives no
	// special files, so the host side has nothing to report about it.)
	for _, why := range []string{"abs-link", "up-link", `t: a symbolic link to \"s/..\"`, ".git/config", "post-checkout", "sandbox.yaml", ".git/commondir", "plain/.git"} {
		if !strings.Contains(out, why) {
			t.Errorf("the pull's report does not say it skipped %s:\n%s", why, out)
		}
	}
	if out, err := sbx("destroy", "-y"); err != nil {
		t.Fatalf("sbx destroy: %v\n%s", err, out)
	}
	if left := c.Labelled("cli"); len(left) > 0 {
		t.Errorf("destroy left: %v", left)
	}
}
