package hostile

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sbxhq/sbx/internal/fixture"
)

// TestGitIsTheSandboxsOwn: the workspace's .git inside the sandbox is not
// the host's. The agent writes all of git's configuration surface there
// (config with core.fsmonitor, a hook, commondir naming a config of its
// own, config.worktree, worktrees/, modules/*/config) and tries to rename
// .git away; the host's .git is untouched and the user's git status runs
// nothing of the agent's. A host-side replace of .git/config by rename
// (git config) opens nothing. The agent's commit reaches the host only as
// git's fetch brings it, into refs/sbx/NAME/*, on sbx pull.
func TestGitIsTheSandboxsOwn(t *testing.T) {
	runtimes(t, func(t *testing.T, runtime string) {
		s := newSandbox(t, "git", runtime, "")
		hostGit := func(args ...string) string {
			t.Helper()
			cmd := exec.Command("git", append([]string{"-C", s.ws}, args...)...)
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("git %v on the host: %v\n%s", args, err, out)
			}
			return strings.TrimSpace(string(out))
		}
		// Seeding the sandbox's .git changed nothing of the host's.
		if fi, err := os.Stat(filepath.Join(s.ws, ".git")); err != nil || fi.Mode().Perm() != 0o755 {
			t.Errorf("the host's .git: %v, %v; want it as git init made it (0755)", fi.Mode(), err)
		}
		head := hostGit("rev-parse", "HEAD")
		branch := hostGit("symbolic-ref", "HEAD")
		config := s.read(".git/config")

		// The agent's commit (the test image has no git), written where
		// git inside would write it.
		commit, writeObject := fixture.AgentCommit(t, s.ws)

		m := s.marker
		attacks := []string{
			`printf '[core]\n\tfsmonitor = "touch ` + m + `"\n\thooksPath = .git/hooks\n' >> .git/config`,
			`mkdir -p .git/hooks && printf '#!/bin/sh\ntouch ` + m + `\n' > .git/hooks/post-checkout && chmod +x .git/hooks/post-checkout`,
			`mkdir -p mine && printf '[core]\n\tfsmonitor = "touch ` + m + `"\n' > mine/config && echo "$PWD/mine" > .git/commondir`,
			`printf '[core]\n\tfsmonitor = "touch ` + m + `"\n' > .git/config.worktree`,
			`mkdir -p .git/worktrees/x .git/modules/m && printf '[core]\n\tfsmonitor = "touch ` + m + `"\n' | tee .git/worktrees/x/config > .git/modules/m/config`,
			writeObject + ` && echo ` + commit + ` > .git/` + branch,
		}
		for _, a := range attacks {
			if out, code := s.agent(a); code != 0 {
				t.Errorf("the agent cannot write its own .git (%q): %d\n%s", a, code, out)
			}
		}
		if out, code := s.agent(`mv .git .git-old`); code == 0 {
			t.Errorf("the agent renamed .git away:\n%s", out)
		}
		if got := s.read(".git/config"); got != config {
			t.Errorf("the host's .git/config changed:\n%s", got)
		}
		for _, f := range []string{"hooks/post-checkout", "commondir", "config.worktree", "worktrees/x", "modules/m"} {
			if _, err := os.Lstat(filepath.Join(s.ws, ".git", f)); err == nil {
				t.Errorf("the agent wrote the host's .git/%s", f)
			}
		}
		hostGit("status", "--short")
		hostGit("checkout", "-q", "--", ".")
		s.noMarker()
		if got := hostGit("rev-parse", "HEAD"); got != head {
			t.Errorf("the host's HEAD moved to %s", got)
		}

		// The host replaces .git/config by rename; inside, .git is still
		// the sandbox's own.
		hostGit("config", "sbx.test", "replaced")
		if out, _ := s.agent(`cat .git/config`); strings.Contains(out, "replaced") {
			t.Errorf("the sandbox sees the host's .git/config:\n%s", out)
		}
		if _, code := s.agent(`printf '[core]\n\tfsmonitor = "touch ` + m + `"\n' >> .git/config`); code != 0 {
			t.Error("the agent cannot write its own .git/config")
		}
		if strings.Contains(s.read(".git/config"), "fsmonitor") {
			t.Error("after a host-side replace the agent wrote the host's .git/config")
		}
		hostGit("status", "--short")
		s.noMarker()

		// The commit comes home only by git's fetch, into refs/sbx/NAME/*.
		out2, code := s.sbx("pull")
		if code != 0 || !strings.Contains(out2, "refs/sbx/"+s.name+"/HEAD") {
			t.Fatalf("sbx pull: %d\n%s", code, out2)
		}
		if got := hostGit("rev-parse", "refs/sbx/"+s.name+"/HEAD"); got != commit {
			t.Errorf("refs/sbx/%s/HEAD = %s, want the agent's %s", s.name, got, commit)
		}
		if got := hostGit("rev-parse", "HEAD"); got != head {
			t.Errorf("the fetch moved the host's HEAD to %s", got)
		}
		hostGit("status", "--short")
		s.noMarker()
	})
}

// TestGitMadeLater: in a workspace without a .git of its own (sub, inside
// the user's repository), the agent makes a repository whose config names
// an fsmonitor. It is made in the sandbox's own .git, never in the host's
// directory: git on the host, run there, still finds the user's
// repository above it and runs nothing of the agent's.
func TestGitMadeLater(t *testing.T) {
	runtimes(t, func(t *testing.T, runtime string) {
		s := newSandbox(t, "gitlater", runtime, "workspace: sub\n")
		m := s.marker
		sub := filepath.Join(s.ws, "sub")
		script := `mkdir -p .git/objects .git/refs/heads && echo 'ref: refs/heads/main' > .git/HEAD && printf '[core]\n\trepositoryformatversion = 0\n\tfsmonitor = "touch ` + m + `"\n' > .git/config`
		cmd := exec.Command("docker", "exec", "-w", sub, "sbx-"+s.name, "sh", "-c", script)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("the agent cannot make its repository: %v\n%s", err, out)
		}
		if _, err := os.Lstat(filepath.Join(sub, ".git", "config")); err == nil {
			t.Error("the agent's repository is in the host's directory")
		}
		cmd = exec.Command("git", "-C", sub, "status", "--short")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Errorf("git status on the host in sub: %v\n%s", err, out)
		}
		top, _ := exec.Command("git", "-C", sub, "rev-parse", "--show-toplevel").Output()
		if got := strings.TrimSpace(string(top)); got != s.ws {
			t.Errorf("git on the host in sub finds the repository %q, want the user's %q", got, s.ws)
		}
		s.noMarker()
	})
}
