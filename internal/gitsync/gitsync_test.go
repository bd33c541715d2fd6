//go:build unix

package gitsync

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sbxhq/sbx/internal/fixture"
)

var git = fixture.Git

// sandboxRepo makes the host's repository with one commit and a sandbox's
// own repository that builds on it through an alternate (as a docker
// sandbox's does), and returns both.
func sandboxRepo(t *testing.T) (host, own, base string) {
	t.Helper()
	host = t.TempDir()
	git(t, host, "init", "-q", "-b", "main")
	fixture.GitAt(t, host, 1, "commit", "-q", "--allow-empty", "-m", "base")
	base = git(t, host, "rev-parse", "HEAD")
	own = t.TempDir()
	git(t, own, "init", "-q", "-b", "main")
	if err := os.WriteFile(filepath.Join(own, ".git", "objects", "info", "alternates"), []byte(filepath.Join(host, ".git", "objects")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	git(t, own, "update-ref", "refs/heads/main", base)
	return host, own, base
}

// copyData copies what Fetch takes of own's .git into a scratch
// directory, as the drivers do, and adds extra files there.
func copyData(t *testing.T, own string, extra map[string]string) string {
	t.Helper()
	src := t.TempDir()
	from := filepath.Join(own, ".git")
	err := filepath.WalkDir(from, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, p)
		if rel == "." || !Data(filepath.ToSlash(rel)) {
			if d.IsDir() && rel != "." && rel != "objects" {
				return filepath.SkipDir
			}
			return nil
		}
		to := filepath.Join(src, ".git", rel)
		if d.IsDir() {
			return os.MkdirAll(to, 0o755)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
			return err
		}
		return os.WriteFile(to, data, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	for name, content := range extra {
		p := filepath.Join(src, ".git", name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return src
}

// TestFetch: the sandbox's commit lands in refs/sbx/NAME/*, and nothing
// the hostile agent wrote into its repository's configuration runs on the
// host: a config naming an fsmonitor and upload-pack's pack-objects hook,
// a commondir leading to a config of its own, hooks. The fetch itself is
// git's, checked object by object.
func TestFetch(t *testing.T) {
	host, own, base := sandboxRepo(t)
	fixture.GitAt(t, own, 2, "commit", "-q", "--allow-empty", "-m", "the agent's")
	head := git(t, own, "rev-parse", "HEAD")
	pwned := filepath.Join(t.TempDir(), "pwned")
	evil := "[core]\n\tfsmonitor = touch " + pwned + "\n[uploadpack]\n\tpackObjectsHook = touch " + pwned + "\n"
	mine := t.TempDir()
	if err := os.WriteFile(filepath.Join(mine, "config"), []byte(evil), 0o644); err != nil {
		t.Fatal(err)
	}
	src := copyData(t, own, map[string]string{
		"config":                  evil,
		"commondir":               mine,
		"hooks/pre-upload":        "#!/bin/sh\ntouch " + pwned + "\n",
		"objects/info/alternates": "/\n",
	})
	got, err := Fetch(context.Background(), host, "s1", src)
	if err != nil || got != head {
		t.Fatalf("Fetch = %q, %v; want %s", got, err, head)
	}
	for _, ref := range []string{"refs/sbx/s1/HEAD", "refs/sbx/s1/heads/main"} {
		if id := git(t, host, "rev-parse", ref); id != head {
			t.Errorf("%s = %s, want %s", ref, id, head)
		}
	}
	if id := git(t, host, "rev-parse", "HEAD"); id != base {
		t.Errorf("the host's HEAD moved to %s", id)
	}
	git(t, host, "status", "--short")
	if _, err := os.Stat(pwned); err == nil {
		t.Fatal("a command of the agent's ran on the host")
	}
}

// TestFetchNothing: a sandbox that never committed runs no git.
func TestFetchNothing(t *testing.T) {
	host := t.TempDir()
	git(t, host, "init", "-q", "-b", "main")
	own := t.TempDir()
	git(t, own, "init", "-q", "-b", "main")
	got, err := Fetch(context.Background(), host, "s1", copyData(t, own, nil))
	if err != nil || got != "" {
		t.Fatalf("Fetch = %q, %v; want nothing", got, err)
	}
	if _, err := Fetch(context.Background(), t.TempDir(), "s1", copyData(t, own, nil)); err != ErrNoHostRepo {
		t.Errorf("Fetch into no repository = %v, want ErrNoHostRepo", err)
	}
}

// TestFetchChecksObjects: a tree git would never let a checkout write (an
// entry named .git, which would plant a repository's configuration in the
// user's working tree) is refused by the fetch, not stored.
func TestFetchChecksObjects(t *testing.T) {
	host, own, _ := sandboxRepo(t)
	blob := strings.TrimSpace(gitIn(t, own, "[core]\n\tfsmonitor = touch /tmp/x\n", "hash-object", "-w", "--stdin"))
	inner := strings.TrimSpace(gitIn(t, own, "100644 blob "+blob+"\tconfig\n", "mktree"))
	tree := strings.TrimSpace(gitIn(t, own, "040000 tree "+inner+"\t.git\n", "mktree"))
	c := git(t, own, "commit-tree", tree, "-m", "planted")
	git(t, own, "update-ref", "refs/heads/main", c)
	_, err := Fetch(context.Background(), host, "s1", copyData(t, own, nil))
	if err == nil {
		t.Fatal("Fetch took a tree with a .git entry")
	}
	cmd := exec.Command("git", "-C", host, "rev-parse", "--verify", "-q", "refs/sbx/s1/HEAD")
	cmd.Env = fixture.GitEnv()
	if out, _ := cmd.Output(); len(out) > 0 {
		t.Errorf("refs/sbx/s1/HEAD = %s after a refused fetch", out)
	}
}

func gitIn(t *testing.T, dir, stdin string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-C", dir}, args...)...)
	cmd.Env = fixture.GitEnv()
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git %v: %v", args, err)
	}
	return string(out)
}

// TestFetchRunsNoHook: the user's repository takes its hooks from a
// directory of the working tree (core.hooksPath, as husky sets it), where
// the agent wrote a reference-transaction hook; sbx's fetch runs no hook.
func TestFetchRunsNoHook(t *testing.T) {
	host, own, _ := sandboxRepo(t)
	fixture.GitAt(t, own, 2, "commit", "-q", "--allow-empty", "-m", "the agent's")
	pwned := filepath.Join(t.TempDir(), "pwned")
	git(t, host, "config", "core.hooksPath", ".husky")
	hook := "#!/bin/sh\ntouch " + pwned + "\n"
	if err := os.MkdirAll(filepath.Join(host, ".husky"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, h := range []string{"reference-transaction", "post-checkout", "post-merge"} {
		if err := os.WriteFile(filepath.Join(host, ".husky", h), []byte(hook), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := Fetch(context.Background(), host, "s1", copyData(t, own, nil)); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(pwned); err == nil {
		t.Fatal("sbx's fetch ran a hook from the working tree")
	}
}
