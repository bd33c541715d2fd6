package loop

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
)

// Snapshot is the state of the workspace that progress is measured by.
type Snapshot struct {
	Head  string // HEAD commit, "" outside git or before the first commit
	Tree  string // hash of the working tree's content relative to HEAD
	Files int    // paths that differ from HEAD (changed, added, untracked)
}

// TakeSnapshot reads the workspace on the host (it is the same directory
// the sandbox sees). In a git repository: HEAD, and the porcelain status
// plus the diff against HEAD plus untracked files' content, so editing an
// already-modified file counts as a change. Elsewhere, every file's path,
// size and modification time.
func TakeSnapshot(ctx context.Context, dir string) (Snapshot, error) {
	if _, err := exec.LookPath("git"); err == nil {
		if top, err := gitOut(ctx, dir, "rev-parse", "--show-toplevel"); err == nil && top != "" {
			return gitSnapshot(ctx, dir)
		}
	}
	return walkSnapshot(dir)
}

func gitOut(ctx context.Context, dir string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "git", append([]string{"-C", dir}, args...)...)
	var out bytes.Buffer
	cmd.Stdout = &out
	err := cmd.Run()
	return strings.TrimSpace(out.String()), err
}

func gitSnapshot(ctx context.Context, dir string) (Snapshot, error) {
	var s Snapshot
	s.Head, _ = gitOut(ctx, dir, "rev-parse", "--verify", "-q", "HEAD")
	status, err := gitOut(ctx, dir, "status", "--porcelain=v1", "--untracked-files=all")
	if err != nil {
		return s, fmt.Errorf("git status in %s: %v", dir, err)
	}
	h := sha256.New()
	io.WriteString(h, status)
	if s.Head != "" {
		diff, err := gitOut(ctx, dir, "diff", "HEAD", "--binary")
		if err != nil {
			return s, fmt.Errorf("git diff in %s: %v", dir, err)
		}
		io.WriteString(h, diff)
	}
	for _, line := range strings.Split(status, "\n") {
		if line == "" {
			continue
		}
		s.Files++
		if strings.HasPrefix(line, "?? ") {
			name := strings.Trim(line[3:], `"`)
			if data, err := os.ReadFile(filepath.Join(dir, name)); err == nil {
				h.Write(data)
			}
		}
	}
	s.Tree = hex.EncodeToString(h.Sum(nil))
	return s, nil
}

func walkSnapshot(dir string) (Snapshot, error) {
	h := sha256.New()
	var s Snapshot
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil // unreadable parts do not count
		}
		if d.IsDir() && d.Name() == ".git" {
			return filepath.SkipDir
		}
		if info, err := d.Info(); err == nil && !d.IsDir() {
			io.WriteString(h, p+"\x00"+strconv.FormatInt(info.Size(), 10)+"\x00"+strconv.FormatInt(info.ModTime().UnixNano(), 10)+"\x00")
		}
		return nil
	})
	s.Tree = hex.EncodeToString(h.Sum(nil))
	return s, err
}

// Commits counts the commits from old to new HEAD.
func Commits(ctx context.Context, dir, oldHead, newHead string) int {
	switch {
	case newHead == "" || oldHead == newHead:
		return 0
	case oldHead == "":
		n, _ := gitOut(ctx, dir, "rev-list", "--count", newHead)
		c, _ := strconv.Atoi(n)
		return c
	}
	n, _ := gitOut(ctx, dir, "rev-list", "--count", oldHead+".."+newHead)
	c, _ := strconv.Atoi(n)
	return c
}
