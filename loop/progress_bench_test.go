//go:build unix

package loop

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	fx "github.com/sbxhq/sbx/internal/fixture"
)

// benchRepo makes a repository of n committed files in nested
// directories, a few of them modified and a few untracked, as a workspace
// mid-iteration looks.
func benchRepo(b *testing.B, n int) string {
	b.Helper()
	ws := b.TempDir()
	for i := range n {
		p := filepath.Join(ws, fmt.Sprintf("pkg%02d/sub%d/file%04d.go", i%40, i%7, i))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(p, bytes.Repeat([]byte(fmt.Sprintf("line %d\n", i)), 200), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	os.WriteFile(filepath.Join(ws, ".gitignore"), []byte("*.o\nbuild/\n"), 0o644)
	for _, args := range [][]string{{"init", "-q"}, {"add", "."}, {"commit", "-q", "-m", "files"}} {
		fx.Git(b, ws, args...)
	}
	for i := range 5 {
		os.WriteFile(filepath.Join(ws, fmt.Sprintf("pkg%02d/sub%d/file%04d.go", i%40, i%7, i)), []byte("modified\n"), 0o644)
		os.WriteFile(filepath.Join(ws, fmt.Sprintf("untracked%d.go", i)), []byte("new\n"), 0o644)
	}
	return ws
}

// BenchmarkSnapshot is the per-iteration cost of a snapshot of a
// 3,000-file repository: the Scanner with a warm stat cache (as from the
// second iteration on; the files are older than the racy window), and
// the git commands the loop ran before (rev-parse, status, diff).
func BenchmarkSnapshot(b *testing.B) {
	ws := benchRepo(b, 3000)
	b.Run("scanner", func(b *testing.B) {
		// The files were just written: age them past the racy window
		// so that the cache holds them, as it does for files the
		// iteration did not touch.
		ageFiles(b, ws)
		sc := NewScanner(ws)
		if _, err := sc.Snapshot(context.Background()); err != nil {
			b.Fatal(err)
		}
		b.ResetTimer()
		for b.Loop() {
			if _, err := sc.Snapshot(context.Background()); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("scanner-cold", func(b *testing.B) {
		for b.Loop() {
			if _, err := NewScanner(ws).Snapshot(context.Background()); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("git", func(b *testing.B) {
		for b.Loop() {
			gitSnapshot(b, ws)
		}
	})
}

func ageFiles(b *testing.B, dir string) {
	b.Helper()
	old := time.Now().Add(-time.Hour)
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Name() == ".git" {
			return fs.SkipDir
		}
		return os.Chtimes(p, old, old)
	})
	if err != nil {
		b.Fatal(err)
	}
}

// gitSnapshot runs what the loop ran on the host before it stopped
// running git: the comparison for BenchmarkSnapshot only.
func gitSnapshot(b *testing.B, dir string) {
	run := func(args ...string) string {
		var out bytes.Buffer
		cmd := exec.Command("git", append([]string{"-C", dir}, args...)...)
		cmd.Stdout = &out
		if err := cmd.Run(); err != nil {
			b.Fatalf("git %v: %v", args, err)
		}
		return out.String()
	}
	run("rev-parse", "--show-toplevel")
	run("rev-parse", "--verify", "-q", "HEAD")
	status := run("status", "--porcelain=v1", "--untracked-files=all")
	run("diff", "HEAD", "--binary")
	for _, line := range strings.Split(status, "\n") {
		if name, ok := strings.CutPrefix(line, "?? "); ok {
			os.ReadFile(filepath.Join(dir, name))
		}
	}
}
