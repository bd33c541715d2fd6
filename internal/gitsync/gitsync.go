// Package gitsync brings a sandbox's commits into the host's repository.
// A sandbox never writes the host's .git: it works in a git directory of
// its own (driver/docker/git.go; the pod's copy on kubernetes), and what
// it committed reaches the host only as git's own fetch brings it, into
// refs/sbx/NAME/*. Fetching is the transfer git treats as safe from an
// untrusted repository: "upload-pack tries to avoid any dangerous
// configuration options or hooks from the repository it's serving, making
// it safe to clone an untrusted directory" (git-upload-pack(1),
// SECURITY; gitsecurityboundary(7)). On top of that, the repository
// upload-pack serves is one sbx wrote: a copy of the agent's refs and
// objects only (no config, hooks, commondir or alternates of the agent's),
// with a config of sbx's, and the host's fetch checks every object it
// receives (fetch.fsckObjects), as a hosting service does.
//
// It runs the git binary (one implementation of git's transfer, the one
// the user's repository already trusts); sbx reads the agent's HEAD with
// package gitdir first, so a sandbox that never committed costs no git.
package gitsync

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/sbxhq/sbx/internal/gitdir"
	"github.com/sbxhq/sbx/internal/tarball"
	"github.com/sbxhq/sbx/internal/untrusted"
)

// ErrNoHostRepo says the host workspace has no .git directory of its own
// to bring commits into.
var ErrNoHostRepo = errors.New("the host workspace is not a git repository (no .git directory)")

// Ref is where a sandbox's HEAD lands in the host's repository; its
// branches land under Ref's directory, in heads/.
func Ref(sandbox string) string { return "refs/sbx/" + sandbox + "/HEAD" }

// Data reports whether name (slash-separated, relative to a .git
// directory) is git data Fetch takes from a sandbox: HEAD, packed-refs,
// shallow, refs/ and objects/ but not objects/info (where alternates name
// other object stores). Everything else of a .git is configuration or may
// become it, and never leaves the sandbox.
func Data(name string) bool {
	first, rest, _ := strings.Cut(name, "/")
	switch first {
	case "HEAD", "packed-refs", "shallow":
		return rest == ""
	case "refs":
		return true
	case "objects":
		r, _, _ := strings.Cut(rest, "/")
		return r != "info"
	}
	return false
}

// Fetch brings the commits of the sandbox's repository, whose data (as
// Data says) has been copied into src/.git, into the host repository of
// hostWS: its HEAD as refs/sbx/SANDBOX/HEAD, its branches as
// refs/sbx/SANDBOX/heads/*. It returns the HEAD it brought, "" when the
// sandbox's repository has no commit (nothing is run then). src is sbx's
// own scratch directory: Fetch writes its config and alternates (the
// host's objects, which the sandbox's history builds on) there.
func Fetch(ctx context.Context, hostWS, sandbox, src string) (string, error) {
	if fi, err := os.Lstat(filepath.Join(hostWS, ".git")); err != nil || !fi.IsDir() {
		return "", ErrNoHostRepo
	}
	head, err := readHead(src)
	if err != nil || head == "" {
		return "", err
	}
	git := filepath.Join(src, ".git")
	for _, name := range []string{"config", "commondir", "objects/info"} {
		if err := os.RemoveAll(filepath.Join(git, filepath.FromSlash(name))); err != nil {
			return "", err
		}
	}
	config := "[core]\n\trepositoryformatversion = 0\n\tbare = true\n"
	if len(head) == 64 {
		config = "[core]\n\trepositoryformatversion = 1\n\tbare = true\n[extensions]\n\tobjectformat = sha256\n"
	}
	if err := os.WriteFile(filepath.Join(git, "config"), []byte(config), 0o600); err != nil {
		return "", err
	}
	hostObjects, err := filepath.Abs(filepath.Join(hostWS, ".git", "objects"))
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(filepath.Join(git, "objects", "info"), 0o700); err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(git, "objects", "info", "alternates"), []byte(hostObjects+"\n"), 0o600); err != nil {
		return "", err
	}
	if _, err := exec.LookPath("git"); err != nil {
		return "", fmt.Errorf("bringing the sandbox's commits home needs git on the host: %v", err)
	}
	prefix := "refs/sbx/" + sandbox + "/"
	// No hook runs: the user's core.hooksPath may name a directory of the
	// working tree (husky's .husky/_), which the agent writes, and a fetch
	// runs reference-transaction hooks.
	cmd := exec.CommandContext(ctx, "git", "-C", hostWS, "-c", "core.hooksPath="+os.DevNull, "-c", "fetch.fsckObjects=true", "-c", "protocol.file.allow=always",
		"fetch", "--quiet", "--no-tags", "--no-write-fetch-head", "--no-recurse-submodules", "--no-auto-gc",
		git, "+HEAD:"+prefix+"HEAD", "+refs/heads/*:"+prefix+"heads/*")
	cmd.Env = env()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		// What git says may quote the agent's ref names.
		return "", fmt.Errorf("git fetch of the sandbox's commits: %v: %s", err, untrusted.Text(lastLines(stderr.String(), 5)))
	}
	return head, nil
}

// readHead reads the HEAD of src/.git, as the agent left it.
func readHead(src string) (string, error) {
	root, err := os.OpenRoot(src)
	if err != nil {
		return "", err
	}
	defer root.Close()
	repo, err := gitdir.Open(root)
	if errors.Is(err, gitdir.ErrNoRepo) || errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	defer repo.Close()
	head, err := repo.Head()
	if err != nil {
		return "", fmt.Errorf("the sandbox's HEAD: %v", err)
	}
	return head, nil
}

// env is sbx's environment without git's own variables, which would
// point the fetch at other repositories or configuration.
func env() []string {
	var out []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GIT_") {
			out = append(out, kv)
		}
	}
	return append(out, "GIT_TERMINAL_PROMPT=0")
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// Home brings a sandbox's commits home and says what it did on w: fill
// copies the sandbox's .git, as tar streams read with Extract, into root
// (a scratch .git of sbx's, removed afterwards), and Fetch takes it from
// there. A host workspace that is no repository, or a sandbox without
// commits, brings nothing, and is said so.
func Home(ctx context.Context, hostWS, sandbox string, w io.Writer, fill func(root *os.Root) error) error {
	scratch, err := os.MkdirTemp("", "sbx-git-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(scratch)
	if err := os.Mkdir(filepath.Join(scratch, ".git"), 0o700); err != nil {
		return err
	}
	root, err := os.OpenRoot(filepath.Join(scratch, ".git"))
	if err != nil {
		return err
	}
	defer root.Close()
	if err := fill(root); err != nil {
		return fmt.Errorf("copying sandbox %q's .git: %w", sandbox, err)
	}
	head, err := Fetch(ctx, hostWS, sandbox, scratch)
	switch {
	case errors.Is(err, ErrNoHostRepo):
		fmt.Fprintf(w, "sandbox %q: %v; its commits stay in the sandbox\n", sandbox, err)
	case err != nil:
		return fmt.Errorf("sandbox %q: %w", sandbox, err)
	case head == "":
		fmt.Fprintf(w, "sandbox %q has no commits to fetch\n", sandbox)
	default:
		fmt.Fprintf(w, "fetched sandbox %q's commits into %s (HEAD %s) and refs/sbx/%s/heads/*\n", sandbox, Ref(sandbox), head[:12], sandbox)
	}
	return nil
}

// Extract reads a tar stream of (part of) a sandbox's .git into root,
// keeping only git's data (Data) and within tarball's bounds.
func Extract(ctx context.Context, r io.Reader, root *os.Root) error {
	_, err := tarball.Extract(ctx, r, root, tarball.ExtractOptions{Limits: tarball.DefaultLimits, HostGit: true,
		Protected: func(name string) bool { return !Data(name) }})
	return err
}
