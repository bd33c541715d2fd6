package loop

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"strconv"
	"time"

	"github.com/sbxhq/sbx/internal/gitdir"
	"github.com/sbxhq/sbx/internal/untrusted"
)

// Bounds on one snapshot of a workspace the agent fills.
const (
	// MaxEntries is the most paths a snapshot walks; more is an error.
	MaxEntries = 1_000_000
	// maxHashFile and maxHashTotal bound the bytes read to hash files'
	// content; a larger file, or any file past the total, is known by
	// its size, times and inode instead.
	maxHashFile  = 32 << 20
	maxHashTotal = 1 << 30
	// racyWindow: a file modified this recently when it was hashed may
	// change again within the same timestamp tick without its stat
	// changing, so it is hashed again next time (git's "racily clean"
	// entries, Documentation/technical/racy-git.txt).
	racyWindow = 2 * time.Second
)

// Snapshot is the state of the workspace that progress is measured by.
type Snapshot struct {
	// Head is the HEAD commit, "" outside git or before the first commit.
	Head string
	// Tree is a digest of the working tree: every path git would not
	// ignore, with its kind and content.
	Tree string
	// paths maps each path to its fingerprint, for Changed.
	paths map[string]string
}

// Same reports whether HEAD and the working tree are as they were in o.
func (s Snapshot) Same(o Snapshot) bool { return s.Head == o.Head && s.Tree == o.Tree }

// Changed counts the paths added, removed or modified between two
// snapshots of a workspace: the files an iteration changed, whether or
// not it committed them; a path edited back to what it was does not count.
func Changed(before, after Snapshot) int {
	n := 0
	for p, fp := range after.paths {
		if before.paths[p] != fp {
			n++
		}
	}
	for p := range before.paths {
		if _, ok := after.paths[p]; !ok {
			n++
		}
	}
	return n
}

// Scanner takes snapshots of one workspace without running anything:
// git's HEAD, index and ignore rules are read by package gitdir, the
// working tree is walked by package untrusted (no symlink followed — a
// symlink counts by its text —, no FIFO, socket or device opened, bounded
// work), so nothing the agent writes can run a command on the host, show
// it a host file or stall it. Like git's index, it remembers each file's
// size, modification and change times and inode, and hashes only files
// whose stat changed.
type Scanner struct {
	dir     string
	cache   map[string]cacheEntry
	tracked *gitdir.Tracked
	hashed  int // files the last Snapshot read
}

type cacheEntry struct {
	stat string // size, times, inode and mode
	fp   string // the fingerprint it had
}

// NewScanner returns a Scanner of the workspace dir.
func NewScanner(dir string) *Scanner {
	return &Scanner{dir: dir, cache: map[string]cacheEntry{}}
}

// Snapshot reads the workspace. In a git repository (a .git directory of
// the workspace's own: a .git file or symlink, which would lead outside
// it, is not followed and counts as none) it reads HEAD, and leaves out
// what .gitignore files and .git/info/exclude ignore unless the index
// tracks it. .git itself never counts, FIFOs, sockets and devices neither
// (git tracks none of them); a file that cannot be read counts as such.
func (sc *Scanner) Snapshot(ctx context.Context) (Snapshot, error) {
	root, err := os.OpenRoot(sc.dir)
	if err != nil {
		return Snapshot{}, fmt.Errorf("workspace: %v", err)
	}
	defer root.Close()
	w := &walk{sc: sc, root: root, start: time.Now(), budget: maxHashTotal, cache: map[string]cacheEntry{}, paths: map[string]string{}, sum: sha256.New()}
	var s Snapshot
	repo, err := gitdir.Open(root)
	switch {
	case errors.Is(err, gitdir.ErrNoRepo):
		sc.tracked = nil
	case err != nil:
		return Snapshot{}, fmt.Errorf("workspace %s: .git: %v", sc.dir, err)
	default:
		defer repo.Close()
		if err := w.readRepo(repo, &s); err != nil {
			return Snapshot{}, fmt.Errorf("workspace %s: .git: %v", sc.dir, err)
		}
	}
	if err := untrusted.Walk(ctx, root, w.visit); err != nil {
		return Snapshot{}, fmt.Errorf("workspace %s: %v", sc.dir, err)
	}
	sc.cache, sc.hashed = w.cache, w.hashed
	s.Tree = hex.EncodeToString(w.sum.Sum(nil))
	s.paths = w.paths
	return s, nil
}

// walk is one Snapshot's walk of the working tree.
type walk struct {
	sc      *Scanner
	root    *os.Root
	start   time.Time
	ignore  *gitdir.Ignore // nil outside git
	tracked *gitdir.Tracked
	// ignoredDir is the ignored directory being walked for the tracked
	// files it holds, "" when none.
	ignoredDir string
	entries    int
	hashed     int
	budget     int64
	cache      map[string]cacheEntry
	paths      map[string]string
	sum        hash.Hash
}

func (w *walk) readRepo(repo *gitdir.Repo, s *Snapshot) error {
	var err error
	if s.Head, err = repo.Head(); err != nil {
		return err
	}
	hashLen := 20
	if len(s.Head) == 64 {
		hashLen = 32
	}
	if w.tracked, err = repo.Tracked(w.sc.tracked, hashLen); err != nil {
		return err
	}
	w.sc.tracked = w.tracked
	exclude, err := repo.Exclude()
	if err != nil {
		return err
	}
	w.ignore = &gitdir.Ignore{}
	w.ignore.SetExclude(exclude)
	w.ignore.Enter("", gitignore(untrusted.ReadRegular(w.root, ".gitignore", gitdir.MaxIgnoreFile)))
	return nil
}

// gitignore returns what read returned for a .gitignore: nil when it is
// absent, not a regular file (git does not follow a symlinked .gitignore
// either), unreadable or too large — its patterns then do not apply, so
// more paths count.
func gitignore(data []byte, err error) []byte {
	if err != nil {
		return nil
	}
	return data
}

func (w *walk) visit(e *untrusted.Entry) error {
	if w.entries++; w.entries > MaxEntries {
		return fmt.Errorf("more than %d paths", MaxEntries)
	}
	if base(e.Path) == ".git" {
		// git never tracks a .git: the repository's, a nested one's, or
		// a file or symlink in its place.
		if e.Info != nil && e.Info.IsDir() {
			return fs.SkipDir
		}
		return nil
	}
	isDir := e.Info != nil && e.Info.IsDir()
	if w.ignore != nil {
		if skip, err := w.ignored(e.Path, isDir); err != nil || skip {
			if err == nil && isDir {
				err = fs.SkipDir
			}
			return err
		}
	}
	if e.Err != nil {
		w.add(e.Path, "unreadable")
		return nil
	}
	switch m := e.Info.Mode(); {
	case isDir:
		if w.ignore != nil && w.ignoredDir == "" {
			w.ignore.Enter(e.Path, gitignore(e.ReadChild(".gitignore", gitdir.MaxIgnoreFile)))
		}
	case m&fs.ModeSymlink != 0:
		target, err := e.Readlink()
		if err != nil {
			w.add(e.Path, "unreadable")
			return nil
		}
		h := sha256.Sum256([]byte(target))
		w.add(e.Path, "link "+hex.EncodeToString(h[:]))
	case m.IsRegular():
		w.add(e.Path, w.file(e))
	default:
		// FIFOs, sockets and devices: git does not track them, and
		// opening one could block or have effects.
	}
	return nil
}

// ignored reports whether path is left out: ignored and not tracked, or
// under an ignored directory and not tracked.
func (w *walk) ignored(path string, isDir bool) (bool, error) {
	if w.ignoredDir != "" && !under(path, w.ignoredDir) {
		w.ignoredDir = ""
	}
	tracked := w.tracked.File(path) || isDir && w.tracked.Dir(path)
	if w.ignoredDir != "" {
		return !tracked, nil
	}
	ig, err := w.ignore.Match(path, isDir)
	if err != nil || !ig {
		return false, err
	}
	if tracked && isDir {
		// Walk it for its tracked files only: git does not look
		// inside an ignored directory for anything else.
		w.ignoredDir = path
	}
	return !tracked, nil
}

func under(path, dir string) bool {
	return len(path) > len(dir) && path[len(dir)] == '/' && path[:len(dir)] == dir
}

func base(path string) string {
	for i := len(path) - 1; i >= 0; i-- {
		if path[i] == '/' {
			return path[i+1:]
		}
	}
	return path
}

func (w *walk) add(path, fp string) {
	w.paths[path] = fp
	io.WriteString(w.sum, path+"\x00"+fp+"\n")
}

// file returns a regular file's fingerprint: its content's hash and
// whether it is executable (git tracks both), taken from the cache when
// its stat has not changed.
func (w *walk) file(e *untrusted.Entry) string {
	st := statKey(e.Info)
	if c, ok := w.sc.cache[e.Path]; ok && c.stat == st {
		w.keep(e, c)
		return c.fp
	}
	kind := "file "
	if e.Info.Mode()&0o111 != 0 {
		kind = "exec "
	}
	size := e.Info.Size()
	if size > maxHashFile || size > w.budget {
		// Known by its stat alone: too large to read.
		return kind + "stat " + st
	}
	f, _, err := e.Open()
	if err != nil {
		return "unreadable"
	}
	defer f.Close()
	w.hashed++
	h := sha256.New()
	n, err := io.Copy(h, io.LimitReader(f, maxHashFile))
	w.budget -= n
	if err != nil {
		return "unreadable"
	}
	fp := kind + hex.EncodeToString(h.Sum(nil))
	w.keep(e, cacheEntry{stat: st, fp: fp})
	return fp
}

// keep caches a file's fingerprint for the next snapshot, unless it was
// modified so recently that a change within the same timestamp tick
// would not show in its stat.
func (w *walk) keep(e *untrusted.Entry, c cacheEntry) {
	if w.start.Sub(e.Info.ModTime()) > racyWindow {
		w.cache[e.Path] = c
	}
}

// statKey is what tells a file changed without reading it.
func statKey(info fs.FileInfo) string {
	ino, ctime := inode(info)
	return strconv.FormatInt(info.Size(), 10) + " " + strconv.FormatInt(info.ModTime().UnixNano(), 10) + " " +
		strconv.FormatInt(ctime, 10) + " " + strconv.FormatUint(ino, 10) + " " + strconv.FormatUint(uint64(info.Mode()), 8)
}
