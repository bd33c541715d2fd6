//go:build unix

package gitdir

import (
	"errors"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sbxhq/sbx/internal/fixture"
)

var git = fixture.Git

// newRepo makes a repository; format is "sha1" or "sha256".
func newRepo(t *testing.T, format string) string {
	t.Helper()
	dir := t.TempDir()
	git(t, dir, "init", "-q", "--object-format="+format, "-b", "main")
	return dir
}

// commit makes a commit dated n seconds after a fixed time, so that
// commit dates order the history as the test means.
func commit(t *testing.T, dir string, n int, msg string) string {
	t.Helper()
	fixture.GitAt(t, dir, n, "commit", "-q", "--allow-empty", "-m", msg)
	return git(t, dir, "rev-parse", "HEAD")
}

func open(t *testing.T, dir string) *Repo {
	t.Helper()
	ws, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.Close() })
	r, err := Open(ws)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

func TestHead(t *testing.T) {
	for _, format := range []string{"sha1", "sha256"} {
		t.Run(format, func(t *testing.T) {
			dir := newRepo(t, format)
			head := func() string {
				t.Helper()
				h, err := open(t, dir).Head()
				if err != nil {
					t.Fatal(err)
				}
				return h
			}
			if got := head(); got != "" {
				t.Errorf("unborn: Head = %q, want \"\"", got)
			}
			first := commit(t, dir, 1, "one")
			if got := head(); got != first {
				t.Errorf("loose ref: Head = %q, want %q", got, first)
			}
			git(t, dir, "pack-refs", "--all")
			if _, err := os.Stat(filepath.Join(dir, ".git/refs/heads/main")); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("pack-refs left the loose ref: %v", err)
			}
			if got := head(); got != first {
				t.Errorf("packed ref: Head = %q, want %q", got, first)
			}
			second := commit(t, dir, 2, "two")
			git(t, dir, "symbolic-ref", "refs/heads/alias", "refs/heads/main")
			git(t, dir, "symbolic-ref", "HEAD", "refs/heads/alias")
			if got := head(); got != second {
				t.Errorf("symbolic ref to a ref: Head = %q, want %q", got, second)
			}
			git(t, dir, "checkout", "-q", "--detach", first)
			if got := head(); got != first {
				t.Errorf("detached: Head = %q, want %q", got, first)
			}
		})
	}
}

func TestOpenRefusesWhatLeadsOutside(t *testing.T) {
	outside := newRepo(t, "sha1")
	commit(t, outside, 1, "outside")
	tests := []struct {
		name string
		make func(t *testing.T, ws string)
	}{
		{"symlink to a repository outside", func(t *testing.T, ws string) {
			if err := os.Symlink(filepath.Join(outside, ".git"), filepath.Join(ws, ".git")); err != nil {
				t.Fatal(err)
			}
		}},
		{"worktree file pointing outside", func(t *testing.T, ws string) {
			if err := os.WriteFile(filepath.Join(ws, ".git"), []byte("gitdir: "+filepath.Join(outside, ".git")+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}},
		{"FIFO", func(t *testing.T, ws string) {
			if err := syscall.Mkfifo(filepath.Join(ws, ".git"), 0o644); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ws := t.TempDir()
			tt.make(t, ws)
			root, err := os.OpenRoot(ws)
			if err != nil {
				t.Fatal(err)
			}
			defer root.Close()
			fixture.Promptly(t, func() { _, err = Open(root) })
			if !errors.Is(err, ErrNoRepo) {
				t.Errorf("Open = %v, want ErrNoRepo", err)
			}
		})
	}
}

// TestHeadHostile plays an agent that rewrites .git so that reading HEAD
// would block, leak a host file or leave the repository.
func TestHeadHostile(t *testing.T) {
	secret := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secret, []byte("0123456789012345678901234567890123456789 refs/heads/main\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		make    func(t *testing.T, gitDir string)
		wantErr string
	}{
		{"HEAD is a FIFO", func(t *testing.T, g string) {
			os.Remove(filepath.Join(g, "HEAD"))
			if err := syscall.Mkfifo(filepath.Join(g, "HEAD"), 0o644); err != nil {
				t.Fatal(err)
			}
		}, "reading HEAD: open HEAD: not a regular file (named pipe)"},
		{"HEAD is a symlink to a host file", func(t *testing.T, g string) {
			os.Remove(filepath.Join(g, "HEAD"))
			if err := os.Symlink(secret, filepath.Join(g, "HEAD")); err != nil {
				t.Fatal(err)
			}
		}, "reading HEAD: openat HEAD: path escapes from parent"},
		{"packed-refs is a symlink to a host file", func(t *testing.T, g string) {
			os.Remove(filepath.Join(g, "refs/heads/main"))
			if err := os.Symlink(secret, filepath.Join(g, "packed-refs")); err != nil {
				t.Fatal(err)
			}
		}, "reading packed-refs: openat packed-refs: path escapes from parent"},
		{"the ref is a FIFO", func(t *testing.T, g string) {
			os.Remove(filepath.Join(g, "refs/heads/main"))
			if err := syscall.Mkfifo(filepath.Join(g, "refs/heads/main"), 0o644); err != nil {
				t.Fatal(err)
			}
		}, "reading refs/heads/main: open refs/heads/main: not a regular file (named pipe)"},
		{"HEAD points outside refs/", func(t *testing.T, g string) {
			if err := os.WriteFile(filepath.Join(g, "HEAD"), []byte("ref: refs/../../../secret\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}, `HEAD: invalid ref name "refs/../../../secret"`},
		{"HEAD is huge", func(t *testing.T, g string) {
			if err := os.Truncate(filepath.Join(g, "HEAD"), 1<<40); err != nil {
				t.Fatal(err)
			}
		}, "reading HEAD: read HEAD: file too large: more than 4096 bytes"},
		{"symbolic refs in a loop", func(t *testing.T, g string) {
			if err := os.WriteFile(filepath.Join(g, "refs/heads/main"), []byte("ref: refs/heads/main\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}, "HEAD: more than 5 levels of symbolic refs"},
		{"reftable", func(t *testing.T, g string) {
			if err := os.WriteFile(filepath.Join(g, "HEAD"), []byte("ref: refs/heads/.invalid\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}, "the repository uses the reftable ref storage, which sbx cannot read; convert it with 'git refs migrate --ref-format=files'"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := newRepo(t, "sha1")
			commit(t, dir, 1, "one")
			tt.make(t, filepath.Join(dir, ".git"))
			r := open(t, dir)
			var err error
			fixture.Promptly(t, func() { _, err = r.Head() })
			if err == nil || err.Error() != tt.wantErr {
				t.Errorf("Head error = %v, want %s", err, tt.wantErr)
			}
		})
	}
}

func TestTracked(t *testing.T) {
	for _, version := range []string{"2", "3", "4", "split"} {
		t.Run(version, func(t *testing.T) {
			dir := newRepo(t, "sha1")
			for _, p := range []string{"a.txt", "dir/b.txt", "dir/sub/c.txt", "dir/sub/d.txt", "longer/path/with/many/parts/and-a-long-name.txt", "z"} {
				if err := os.MkdirAll(filepath.Join(dir, filepath.Dir(p)), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(dir, p), []byte(p), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			git(t, dir, "add", ".")
			commit(t, dir, 1, "files")
			switch version {
			case "3":
				os.WriteFile(filepath.Join(dir, "intent"), nil, 0o644)
				git(t, dir, "add", "-N", "intent") // sets an extended flag: version 3
			case "split":
				git(t, dir, "update-index", "--split-index")
				os.WriteFile(filepath.Join(dir, "new"), nil, 0o644)
				git(t, dir, "add", "new")
			default:
				git(t, dir, "update-index", "--index-version", version)
			}
			index, err := os.ReadFile(filepath.Join(dir, ".git/index"))
			if err != nil {
				t.Fatal(err)
			}
			shared, _ := filepath.Glob(filepath.Join(dir, ".git/sharedindex.*"))
			if version == "split" && len(shared) == 0 || version != "split" && strconv.Itoa(int(index[7])) != version {
				t.Fatalf("the fixture is not a version %s index (version %d, shared %v)", version, index[7], shared)
			}
			tr, err := open(t, dir).Tracked(nil, 20)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for p := range tr.files {
				got = append(got, p)
			}
			sort.Strings(got)
			want := strings.Split(git(t, dir, "ls-files"), "\n")
			sort.Strings(want)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("tracked (-git +got):\n%s", diff)
			}
			if !tr.Dir("dir/sub") || !tr.Dir("longer/path") || tr.Dir("a.txt") || tr.Dir("nope") {
				t.Errorf("dirs = %v", tr.dirs)
			}
		})
	}
}
