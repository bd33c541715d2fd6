// Package gitdir reads a git repository the agent can write — HEAD and
// refs, the index's paths, ignore rules — without running git. Running
// git on the host would run whatever the repository's config names
// (core.fsmonitor, hooks, filters, textconv, diff.external,
// core.sshCommand), and go-git, the library that reads repositories in Go,
// reads far more of one (config, objects, packs) than sbx needs and was
// not written to treat it as hostile; this package reads only the few
// files sbx needs, parses them as hostile input with bounded work, and
// every read goes through package untrusted inside the workspace, so a
// symlink or FIFO in .git cannot lead to host files or block. It kept
// that security job and no other: the object store is not read here
// (commits are counted inside the sandbox, by the loop).
//
// Formats are git's, as documented in gitrepository-layout(5),
// gitformat-index(5) and gitignore(5); a format or extension it does not
// know (reftable ref storage) is an error, never a guess.
package gitdir

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"

	"github.com/sbxhq/sbx/internal/untrusted"
)

// ErrNoRepo says the workspace has no .git directory of its own: none, one
// without HEAD, or a .git file (a linked worktree's or submodule's pointer to a directory
// elsewhere) or symlink, which is not followed.
var ErrNoRepo = errors.New("no .git directory")

// Bounds on what is read from a repository.
const (
	maxRefFile     = 4 << 10
	maxPackedRefs  = 64 << 20
	maxSymrefDepth = 5 // git's SYMREF_MAXDEPTH (refs.h)
)

// Repo is a .git directory inside a workspace.
type Repo struct {
	dir *os.Root
}

// Open opens ws's .git directory, or returns ErrNoRepo.
func Open(ws *os.Root) (*Repo, error) {
	info, err := ws.Lstat(".git")
	if errors.Is(err, fs.ErrNotExist) || err == nil && !info.IsDir() {
		return nil, ErrNoRepo
	}
	if err != nil {
		return nil, err
	}
	dir, err := ws.OpenRoot(".git")
	if err != nil {
		return nil, err
	}
	// A directory swapped for a symlink since the lstat is followed by
	// OpenRoot only inside ws; refuse it all the same.
	if st, err := dir.Stat("."); err != nil || !os.SameFile(st, info) {
		dir.Close()
		return nil, ErrNoRepo
	}
	// Without HEAD a directory is no repository to git either
	// (setup.c's is_git_directory): the empty .git sbx makes as a
	// sandbox's mount point, say.
	if _, err := dir.Lstat("HEAD"); errors.Is(err, fs.ErrNotExist) {
		dir.Close()
		return nil, ErrNoRepo
	}
	return &Repo{dir: dir}, nil
}

// Close releases the repository.
func (r *Repo) Close() error { return r.dir.Close() }

// Head returns the commit HEAD names: "" on an unborn branch (before the
// first commit). HEAD is either an object name (detached) or "ref: NAME"
// naming a loose ref or one in packed-refs, which may itself be symbolic
// (gitrepository-layout(5), "HEAD" and "refs").
func (r *Repo) Head() (string, error) {
	name := "HEAD"
	for range maxSymrefDepth {
		data, err := untrusted.ReadFile(r.dir, name, maxRefFile)
		if errors.Is(err, fs.ErrNotExist) && name != "HEAD" {
			id, err := r.packedRef(name)
			if err != nil || id != "" {
				return id, err
			}
			return "", nil // unborn
		}
		if err != nil {
			return "", fmt.Errorf("reading %s: %w", name, err)
		}
		line := strings.TrimRight(string(data), " \t\r\n")
		if target, ok := strings.CutPrefix(line, "ref:"); ok {
			target = strings.TrimLeft(target, " \t")
			if name == "HEAD" && target == "refs/heads/.invalid" {
				// What git writes in HEAD for tools that do not know the
				// reftable backend (gitformat-reftable, "Repository
				// layout").
				return "", errors.New("the repository uses the reftable ref storage, which sbx cannot read; convert it with 'git refs migrate --ref-format=files'")
			}
			if err := checkRefName(target); err != nil {
				return "", fmt.Errorf("%s: %v", name, err)
			}
			name = target
			continue
		}
		if !IsObjectName(line) {
			return "", fmt.Errorf("%s: neither an object name nor a symbolic ref: %q", name, truncate(line))
		}
		return line, nil
	}
	return "", fmt.Errorf("HEAD: more than %d levels of symbolic refs", maxSymrefDepth)
}

// packedRef looks name up in packed-refs: after an optional "# pack-refs
// with:" header, lines "OBJECT-NAME SP REFNAME", each optionally followed
// by "^PEELED-OBJECT-NAME" (refs/packed-backend.c).
func (r *Repo) packedRef(name string) (string, error) {
	data, err := untrusted.ReadFile(r.dir, "packed-refs", maxPackedRefs)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("reading packed-refs: %w", err)
	}
	for n, line := range bytes.Split(data, []byte("\n")) {
		if len(line) == 0 || line[0] == '#' || line[0] == '^' {
			continue
		}
		id, ref, ok := bytes.Cut(line, []byte(" "))
		if !ok || !IsObjectName(string(id)) {
			return "", fmt.Errorf("packed-refs:%d: not \"OBJECT-NAME REFNAME\": %q", n+1, truncate(string(line)))
		}
		if string(ref) == name {
			return string(id), nil
		}
	}
	return "", nil
}

// checkRefName applies the rules of git-check-ref-format(1) that matter
// for reading a ref as a file: under refs/, no empty, "." or ".."
// component, no component starting with "." or ending in ".lock", no
// control characters or backslashes.
func checkRefName(name string) error {
	if !strings.HasPrefix(name, "refs/") {
		return fmt.Errorf("symbolic ref to %q, outside refs/", truncate(name))
	}
	for _, c := range strings.Split(name, "/") {
		if c == "" || c[0] == '.' || strings.HasSuffix(c, ".lock") {
			return fmt.Errorf("invalid ref name %q", truncate(name))
		}
	}
	for _, c := range name {
		if c < 0x20 || c == 0x7f || c == '\\' {
			return fmt.Errorf("invalid ref name %q", truncate(name))
		}
	}
	return nil
}

// IsObjectName reports a full object name: 40 (SHA-1) or 64 (SHA-256)
// lower-case hex digits.
func IsObjectName(s string) bool {
	if len(s) != 40 && len(s) != 64 {
		return false
	}
	for _, c := range s {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// truncate shortens hostile text quoted in an error.
func truncate(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}
