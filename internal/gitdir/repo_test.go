//go:build unix

package gitdir

import (
	"bytes"
	"compress/zlib"
	"context"
	"errors"
	"fmt"
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

func revCount(t *testing.T, dir, old, new string) int {
	t.Helper()
	spec := new
	if old != "" {
		spec = old + ".." + new
	}
	n, err := strconv.Atoi(git(t, dir, "rev-list", "--count", spec))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestCount compares Count with git rev-list --count on histories with
// branches and merges, loose and packed (OFS_DELTA and REF_DELTA), in
// SHA-1 and SHA-256 repositories.
func TestCount(t *testing.T) {
	type pair struct{ old, new string }
	build := func(t *testing.T, format string) (string, []pair) {
		dir := newRepo(t, format)
		// Long, similar messages so that repacking deltifies commits.
		long := strings.Repeat("a line that repeats in every commit message\n", 60)
		c := []string{""}
		for i := 1; i <= 6; i++ {
			c = append(c, commit(t, dir, i, fmt.Sprintf("main %d\n\n%s", i, long)))
		}
		git(t, dir, "checkout", "-q", "-b", "side", c[2])
		s1 := commit(t, dir, 7, "side 1\n\n"+long)
		s2 := commit(t, dir, 8, "side 2\n\n"+long)
		git(t, dir, "checkout", "-q", "main")
		fixture.GitAt(t, dir, 9, "merge", "-q", "--no-ff", "-m", "merge", "side")
		m := git(t, dir, "rev-parse", "HEAD")
		after := commit(t, dir, 10, "after\n\n"+long)
		return dir, []pair{
			{"", c[1]}, {"", after}, {c[1], c[6]}, {c[6], m}, {c[6], after}, {c[2], s2},
			{s1, after}, {s2, c[6]}, {after, c[1]}, {c[3], s2},
		}
	}
	for _, format := range []string{"sha1", "sha256"} {
		for _, storage := range []string{"loose", "ofs-delta", "ref-delta"} {
			t.Run(format+"/"+storage, func(t *testing.T) {
				dir, pairs := build(t, format)
				switch storage {
				case "ofs-delta":
					git(t, dir, "repack", "-adf", "--depth=50", "--window=250")
				case "ref-delta":
					git(t, dir, "-c", "repack.useDeltaBaseOffset=false", "repack", "-adf", "--depth=50", "--window=250")
				}
				if storage != "loose" {
					if !strings.Contains(git(t, dir, "verify-pack", "-v", packIdx(t, dir)), "chain length = ") {
						t.Fatal("the pack has no deltas: the test does not test them")
					}
				}
				r := open(t, dir)
				for _, p := range pairs {
					got, err := r.Count(context.Background(), p.old, p.new)
					if err != nil {
						t.Fatalf("Count(%.7s, %.7s): %v", p.old, p.new, err)
					}
					if want := revCount(t, dir, p.old, p.new); got != want {
						t.Errorf("Count(%.7s, %.7s) = %d, git says %d", p.old, p.new, got, want)
					}
				}
			})
		}
	}
}

func packIdx(t *testing.T, dir string) string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, ".git/objects/pack/*.idx"))
	if err != nil || len(m) != 1 {
		t.Fatalf("packs: %v %v", m, err)
	}
	return m[0]
}

func TestCountShallow(t *testing.T) {
	src := newRepo(t, "sha1")
	for i := 1; i <= 5; i++ {
		commit(t, src, i, fmt.Sprint(i))
	}
	dir := filepath.Join(t.TempDir(), "clone")
	git(t, src, "clone", "-q", "--depth=2", "file://"+src, dir)
	head := git(t, dir, "rev-parse", "HEAD")
	got, err := open(t, dir).Count(context.Background(), "", head)
	if err != nil {
		t.Fatal(err)
	}
	if want := revCount(t, dir, "", head); got != want || want != 2 {
		t.Errorf("Count = %d, git says %d (want 2)", got, want)
	}
}

// TestCountHostile plays an agent that fills the object store with what
// would block, leak, loop or allocate without bound.
func TestCountHostile(t *testing.T) {
	tests := []struct {
		name    string
		make    func(t *testing.T, dir, obj string)
		wantErr string
	}{
		{"loose object is a FIFO", func(t *testing.T, dir, obj string) {
			os.Remove(obj)
			if err := syscall.Mkfifo(obj, 0o644); err != nil {
				t.Fatal(err)
			}
		}, "not a regular file (named pipe)"},
		{"loose object is a symlink to /dev/zero", func(t *testing.T, dir, obj string) {
			os.Remove(obj)
			if err := os.Symlink("/dev/zero", obj); err != nil {
				t.Fatal(err)
			}
		}, "path escapes from parent"},
		{"loose object is not zlib", func(t *testing.T, dir, obj string) {
			os.Remove(obj)
			if err := os.WriteFile(obj, []byte("not zlib"), 0o644); err != nil {
				t.Fatal(err)
			}
		}, "zlib: invalid header"},
		{"loose object claims a huge size", func(t *testing.T, dir, obj string) {
			os.Remove(obj)
			writeLoose(t, obj, "commit 99999999999\x00tree ")
		}, "object of 99999999999 bytes, more than sbx reads (16777216)"},
		{"commit is its own parent", func(t *testing.T, dir, obj string) {
			id := filepath.Base(filepath.Dir(obj)) + filepath.Base(obj)
			os.Remove(obj)
			body := "tree 4b825dc642cb6eb9a060e54bf8d69288fbee4904\nparent " + id + "\ncommitter a <a@b> 1700000001 +0000\n\nloop\n"
			writeLoose(t, obj, fmt.Sprintf("commit %d\x00%s", len(body), body))
		}, ""},
		{"pack is a symlink to /dev/zero", func(t *testing.T, dir, obj string) {
			git(t, dir, "repack", "-adq")
			p := strings.TrimSuffix(packIdx(t, dir), ".idx") + ".pack"
			os.Remove(p)
			if err := os.Symlink("/dev/zero", p); err != nil {
				t.Fatal(err)
			}
		}, "path escapes from parent"},
		{"pack index is a FIFO", func(t *testing.T, dir, obj string) {
			git(t, dir, "repack", "-adq")
			p := packIdx(t, dir)
			os.Remove(p)
			if err := syscall.Mkfifo(p, 0o644); err != nil {
				t.Fatal(err)
			}
		}, "not a regular file (named pipe)"},
		{"objects/pack is a FIFO", func(t *testing.T, dir, obj string) {
			os.Remove(obj)
			pack := filepath.Join(dir, ".git/objects/pack")
			os.RemoveAll(pack)
			if err := syscall.Mkfifo(pack, 0o644); err != nil {
				t.Fatal(err)
			}
		}, "open objects/pack: not a directory (named pipe)"},
		{"pack index claims more objects than it holds", func(t *testing.T, dir, obj string) {
			git(t, dir, "repack", "-adq")
			p := packIdx(t, dir)
			data, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			os.Chmod(p, 0o644)
			for i := 8 + 4*200; i < 8+1024; i += 4 {
				copy(data[i:], []byte{0x7f, 0xff, 0xff, 0xff})
			}
			if err := os.WriteFile(p, data, 0o644); err != nil {
				t.Fatal(err)
			}
		}, "index: "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := newRepo(t, "sha1")
			first := commit(t, dir, 1, "one")
			head := commit(t, dir, 2, "two")
			obj := filepath.Join(dir, ".git/objects", head[:2], head[2:])
			tt.make(t, dir, obj)
			var n int
			var err error
			fixture.Promptly(t, func() { n, err = open(t, dir).Count(context.Background(), first, head) })
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("Count = %v", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("Count = %d, %v; want an error with %q", n, err, tt.wantErr)
			}
		})
	}
}

// writeLoose writes a loose object file holding content, named by the
// test rather than by its content's hash, as a hostile agent can.
func writeLoose(t *testing.T, path, content string) {
	t.Helper()
	var b bytes.Buffer
	z := zlib.NewWriter(&b)
	z.Write([]byte(content))
	z.Close()
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
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

// TestCountAlternates: a repository whose older history is in another
// object directory inside .git, named by a relative alternate (a docker
// sandbox's own git directory and the host's objects bound into it), is
// counted through it; an alternate naming a directory outside .git (here
// the very same objects, by an absolute path and by climbing out) is not
// followed, so what the agent writes there cannot make sbx read host
// directories.
func TestCountAlternates(t *testing.T) {
	host := newRepo(t, "sha1")
	base := commit(t, host, 1, "base")
	// The sandbox's repository: the host's history only by alternate.
	own := t.TempDir()
	git(t, own, "init", "-q", "-b", "main")
	shared := filepath.Join(own, ".git", "sbx-host-objects")
	if err := os.Rename(filepath.Join(host, ".git", "objects"), shared); err != nil {
		t.Fatal(err)
	}
	alternates := filepath.Join(own, ".git", "objects", "info", "alternates")
	for _, tc := range []struct {
		alternate string
		ok        bool
	}{
		{"../sbx-host-objects", true},
		{shared, false},
		{"../../.git/sbx-host-objects", false},
	} {
		if err := os.WriteFile(alternates, []byte(tc.alternate+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if tc.ok {
			git(t, own, "update-ref", "HEAD", base)
			head := commit(t, own, 2, "the agent's")
			n, err := open(t, own).Count(context.Background(), base, head)
			if err != nil || n != 1 {
				t.Errorf("alternate %q: Count = %d, %v; want 1", tc.alternate, n, err)
			}
			continue
		}
		head := git(t, own, "rev-parse", "HEAD")
		if _, err := open(t, own).Count(context.Background(), "", head); err == nil || !strings.Contains(err.Error(), "not found") {
			t.Errorf("alternate %q: Count = %v; want the host's objects not found", tc.alternate, err)
		}
	}
}
