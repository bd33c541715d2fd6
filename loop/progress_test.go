//go:build unix

package loop

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	fx "github.com/sbxhq/sbx/internal/fixture"
)

var (
	git       = fx.Git
	writeFile = fx.WriteFile
)

// snapshot takes a snapshot with a safety net: a read that blocks fails
// the test instead of hanging it (the net is not what the tests assert).
func snapshot(t *testing.T, sc *Scanner) (s Snapshot, err error) {
	t.Helper()
	fx.Promptly(t, func() { s, err = sc.Snapshot(context.Background()) })
	return s, err
}

// TestProgress walks an agent's iterations through one repository and
// checks what each one counts as progress.
func TestProgress(t *testing.T) {
	ws := t.TempDir()
	git(t, ws, "init", "-q", "-b", "main")
	writeFile(t, filepath.Join(ws, "a.txt"), "v1\n")
	writeFile(t, filepath.Join(ws, ".gitignore"), "build/\n*.log\n")
	writeFile(t, filepath.Join(ws, "build/keep.txt"), "tracked though ignored\n")
	git(t, ws, "add", "a.txt", ".gitignore")
	git(t, ws, "add", "-f", "build/keep.txt")
	git(t, ws, "commit", "-q", "-m", "init")
	p := func(name string) string { return filepath.Join(ws, name) }
	steps := []struct {
		name     string
		do       func()
		progress bool
		files    int
		commits  int
	}{
		{"nothing", func() {}, false, 0, 0},
		{"edit a tracked file", func() { writeFile(t, p("a.txt"), "v2\n") }, true, 1, 0},
		{"edit it again", func() { writeFile(t, p("a.txt"), "v3\n") }, true, 1, 0},
		{"write the same content", func() { writeFile(t, p("a.txt"), "v3\n") }, false, 0, 0},
		{"add an untracked file", func() { writeFile(t, p("new.txt"), "new\n") }, true, 1, 0},
		{"add files in new directories", func() { writeFile(t, p("d/e/f.txt"), "f\n"); writeFile(t, p("d/g.txt"), "g\n") }, true, 2, 0},
		{"edit ignored files", func() { writeFile(t, p("x.log"), "log\n"); writeFile(t, p("build/out.bin"), "bin\n") }, false, 0, 0},
		{"edit a tracked file in an ignored directory", func() { writeFile(t, p("build/keep.txt"), "changed\n") }, true, 1, 0},
		{"make a file executable", func() { os.Chmod(p("a.txt"), 0o755) }, true, 1, 0},
		{"remove a file", func() { os.Remove(p("new.txt")) }, true, 1, 0},
		{"add a symlink", func() { os.Symlink("/etc/hostname", p("link")) }, true, 1, 0},
		{"retarget it", func() { os.Remove(p("link")); os.Symlink("/etc/hosts", p("link")) }, true, 1, 0},
		{"add a FIFO and an empty directory", func() {
			syscall.Mkfifo(p("fifo"), 0o644)
			os.Mkdir(p("empty"), 0o755)
		}, false, 0, 0},
		{"commit everything", func() {
			git(t, ws, "add", "-A")
			git(t, ws, "commit", "-q", "-m", "work")
		}, true, 0, 1},
		{"commit twice without changing files", func() {
			git(t, ws, "commit", "-q", "--allow-empty", "-m", "one")
			git(t, ws, "commit", "-q", "--allow-empty", "-m", "two")
		}, true, 0, 2},
		{"gc packs everything", func() { git(t, ws, "gc", "-q") }, false, 0, 0},
		{"commit after gc", func() { writeFile(t, p("a.txt"), "v4\n"); git(t, ws, "commit", "-q", "-am", "v4") }, true, 1, 1},
	}
	sc := NewScanner(ws)
	before, err := snapshot(t, sc)
	if err != nil {
		t.Fatal(err)
	}
	if before.Head != git(t, ws, "rev-parse", "HEAD") {
		t.Fatalf("Head = %q", before.Head)
	}
	for _, s := range steps {
		s.do()
		after, err := snapshot(t, sc)
		if err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		commits, err := CountCommits(context.Background(), hostSandbox{}, ws, before.Head, after.Head, 0)
		if err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		type outcome struct {
			Progress bool
			Files    int
			Commits  int
		}
		want := outcome{s.progress, s.files, s.commits}
		got := outcome{!before.Same(after), Changed(before, after), commits}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", s.name, diff)
		}
		before = after
	}
}

// TestProgressWithoutGit: outside a repository every file counts, by
// content.
func TestProgressWithoutGit(t *testing.T) {
	ws := t.TempDir()
	writeFile(t, filepath.Join(ws, "a.log"), "1")
	sc := NewScanner(ws)
	s1, err := snapshot(t, sc)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(ws, "a.log"), "2")
	s2, err := snapshot(t, sc)
	if err != nil {
		t.Fatal(err)
	}
	if s1.Same(s2) || s2.Head != "" || Changed(s1, s2) != 1 {
		t.Errorf("snapshots %+v, %+v", s1, s2)
	}
}

// TestScannerCache: a file whose stat has not changed is not read again.
func TestScannerCache(t *testing.T) {
	ws := t.TempDir()
	old := time.Now().Add(-time.Hour)
	for _, name := range []string{"a", "b", "c/d"} {
		writeFile(t, filepath.Join(ws, name), name)
		if err := os.Chtimes(filepath.Join(ws, name), old, old); err != nil {
			t.Fatal(err)
		}
	}
	writeFile(t, filepath.Join(ws, "fresh"), "just written")
	sc := NewScanner(ws)
	var hashed []int
	for range 2 {
		if _, err := snapshot(t, sc); err != nil {
			t.Fatal(err)
		}
		hashed = append(hashed, sc.hashed)
	}
	writeFile(t, filepath.Join(ws, "a"), "A")
	os.Chtimes(filepath.Join(ws, "a"), old, old) // the same mtime: the change time tells
	if _, err := snapshot(t, sc); err != nil {
		t.Fatal(err)
	}
	hashed = append(hashed, sc.hashed)
	// All four, then only the one modified too recently to trust its
	// stat, then that one and the one changed.
	if diff := cmp.Diff([]int{4, 1, 2}, hashed); diff != "" {
		t.Errorf("files read per snapshot (-want +got):\n%s", diff)
	}
}

// TestSnapshotHostileWorkspace plays an agent that leaves special files
// and symlinks in the workspace and its .git for the host to trip on.
func TestSnapshotHostileWorkspace(t *testing.T) {
	secret := filepath.Join(t.TempDir(), "secret")
	writeFile(t, secret, "host secret 0123456789012345678901234567890123456789\n")
	outside := t.TempDir()
	git(t, outside, "init", "-q")
	os.Remove(filepath.Join(outside, ".git/HEAD"))
	if err := syscall.Mkfifo(filepath.Join(outside, ".git/HEAD"), 0o644); err != nil {
		t.Fatal(err)
	}
	mkfifo := func(p string) {
		if err := syscall.Mkfifo(p, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	symlink := func(target, p string) {
		os.RemoveAll(p)
		if err := os.Symlink(target, p); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name    string
		do      func(ws string)
		wantErr string   // "" for none
		head    bool     // whether HEAD is still read
		paths   []string // the paths, when no error
	}{
		{"untracked FIFO", func(ws string) { mkfifo(filepath.Join(ws, "fifo")) }, "", true, []string{"sub/file"}},
		{"symlink to a FIFO", func(ws string) {
			mkfifo(filepath.Join(ws, "fifo"))
			symlink("fifo", filepath.Join(ws, "to-fifo"))
		}, "", true, []string{"sub/file", "to-fifo link"}},
		{"symlink to /dev/zero", func(ws string) { symlink("/dev/zero", filepath.Join(ws, "zero")) }, "", true, []string{"sub/file", "zero link"}},
		{"symlink to a host file", func(ws string) { symlink(secret, filepath.Join(ws, "secret")) }, "", true, []string{"secret link", "sub/file"}},
		{"huge sparse file", func(ws string) {
			f, err := os.Create(filepath.Join(ws, "huge"))
			if err != nil {
				t.Fatal(err)
			}
			f.Truncate(1 << 40)
			f.Close()
		}, "", true, []string{"huge file stat", "sub/file"}},
		{".gitignore is a FIFO", func(ws string) { mkfifo(filepath.Join(ws, "sub/.gitignore")) }, "", true, []string{"sub/file"}},
		{".gitignore is a symlink to a host file", func(ws string) { symlink(secret, filepath.Join(ws, ".gitignore")) }, "", true, []string{".gitignore link", "sub/file"}},
		{".git is a symlink to a repository outside", func(ws string) {
			symlink(filepath.Join(outside, ".git"), filepath.Join(ws, ".git"))
		}, "", false, []string{"sub/file"}},
		{".git is a worktree file pointing outside", func(ws string) {
			os.RemoveAll(filepath.Join(ws, ".git"))
			writeFile(t, filepath.Join(ws, ".git"), "gitdir: "+filepath.Join(outside, ".git")+"\n")
		}, "", false, []string{"sub/file"}},
		{".git/HEAD is a FIFO", func(ws string) {
			os.Remove(filepath.Join(ws, ".git/HEAD"))
			mkfifo(filepath.Join(ws, ".git/HEAD"))
		}, "reading HEAD: open HEAD: not a regular file (named pipe)", false, nil},
		{"packed-refs is a symlink to a host file", func(ws string) {
			git(t, ws, "pack-refs", "--all")
			symlink(secret, filepath.Join(ws, ".git/packed-refs"))
		}, "reading packed-refs: openat packed-refs: path escapes from parent", false, nil},
		{"the index is a FIFO", func(ws string) {
			os.Remove(filepath.Join(ws, ".git/index"))
			mkfifo(filepath.Join(ws, ".git/index"))
		}, "reading index: open index: not a regular file (named pipe)", false, nil},
		{"info/exclude is a symlink to a host file", func(ws string) {
			symlink(secret, filepath.Join(ws, ".git/info/exclude"))
		}, "reading info/exclude: openat info/exclude: path escapes from parent", false, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ws := t.TempDir()
			git(t, ws, "init", "-q")
			writeFile(t, filepath.Join(ws, "sub/file"), "tracked\n")
			git(t, ws, "add", ".")
			git(t, ws, "commit", "-q", "-m", "init")
			head := git(t, ws, "rev-parse", "HEAD")
			tt.do(ws)
			s, err := snapshot(t, NewScanner(ws))
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatal(err)
			case tt.wantErr != "":
				if want := "workspace " + ws + ": .git: " + tt.wantErr; err == nil || err.Error() != want {
					t.Fatalf("Snapshot = %v, want %s", err, want)
				}
				return
			}
			if got := s.Head == head; got != tt.head {
				t.Errorf("Head = %q, want HEAD read: %v", s.Head, tt.head)
			}
			// Each path with the kind of its fingerprint: a symlink by its
			// text, a huge file by its stat, never by what it leads to.
			var paths []string
			for p, fp := range s.paths {
				kind := strings.Fields(fp)
				if kind[0] == "file" && len(kind) > 1 && kind[1] == "stat" {
					paths = append(paths, p+" file stat")
				} else if kind[0] == "link" {
					paths = append(paths, p+" link")
				} else {
					paths = append(paths, p)
				}
			}
			sort.Strings(paths)
			if diff := cmp.Diff(tt.paths, paths); diff != "" {
				t.Errorf("paths (-want +got):\n%s", diff)
			}
		})
	}
}

// TestNoHostCommands arms every way git's repository config runs a
// command — core.fsmonitor, hooks through core.hooksPath, clean and smudge
// filters, a textconv driver, diff.external, core.sshCommand — and checks
// that snapshots and commit counting run none of them, where the git
// commands sbx used to run set most of them off.
func TestNoHostCommands(t *testing.T) {
	ws := t.TempDir()
	marks := t.TempDir()
	hooks := t.TempDir()
	git(t, ws, "init", "-q")
	writeFile(t, filepath.Join(ws, "a.txt"), "a\n")
	git(t, ws, "add", ".")
	git(t, ws, "commit", "-q", "-m", "init")
	for _, h := range []string{"post-index-change", "pre-commit", "post-commit", "post-checkout", "reference-transaction", "fsmonitor-watchman", "pre-auto-gc"} {
		script := "#!/bin/sh\ntouch " + filepath.Join(marks, "hook-"+h) + "\n"
		if err := os.WriteFile(filepath.Join(hooks, h), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	mark := func(name string) string { return "touch " + filepath.Join(marks, name) }
	// The agent's edits to the repository, made after its own commit.
	for _, kv := range [][2]string{
		{"core.fsmonitor", mark("fsmonitor") + "; false"},
		{"core.hooksPath", hooks},
		{"filter.evil.clean", mark("clean") + "; cat"},
		{"filter.evil.smudge", mark("smudge") + "; cat"},
		{"filter.evil.process", mark("process")},
		{"diff.evil.textconv", mark("textconv") + "; cat"},
		{"diff.external", mark("external") + "; true"},
		{"core.sshCommand", mark("ssh")},
		{"core.pager", mark("pager") + "; cat"},
	} {
		git(t, ws, "config", kv[0], kv[1])
	}
	writeFile(t, filepath.Join(ws, ".gitattributes"), "* filter=evil diff=evil\n")
	writeFile(t, filepath.Join(ws, "a.txt"), "changed\n")
	marked := func() []string {
		entries, err := os.ReadDir(marks)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
			os.Remove(filepath.Join(marks, e.Name()))
		}
		return names
	}
	// The fixture is armed: the commands the loop used to run on the
	// host set it off.
	for _, args := range [][]string{{"status", "--porcelain=v1", "--untracked-files=all"}, {"diff", "HEAD", "--binary"}} {
		cmd := exec.Command("git", append([]string{"-C", ws}, args...)...)
		cmd.Env = fx.GitEnv()
		cmd.Run()
	}
	if armed := marked(); len(armed) < 3 {
		t.Fatalf("git status and diff ran only %v: the fixture is not armed", armed)
	}

	sc := NewScanner(ws)
	before, err := snapshot(t, sc)
	if err != nil {
		t.Fatal(err)
	}
	// Commit with the hooks and filters out of the way, as an agent
	// inside the sandbox might, so that there are commits to count.
	git(t, ws, "-c", "core.hooksPath=/dev/null", "-c", "filter.evil.clean=cat", "-c", "filter.evil.process=", "-c", "core.fsmonitor=false",
		"commit", "-q", "-am", "agent")
	marked()
	after, err := snapshot(t, sc)
	if err != nil {
		t.Fatal(err)
	}
	if after.Head == before.Head {
		t.Errorf("the snapshot did not see the new HEAD")
	}
	if ran := marked(); len(ran) > 0 {
		t.Errorf("snapshots ran %v on the host", ran)
	}
}
