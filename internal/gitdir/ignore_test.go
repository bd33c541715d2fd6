//go:build unix

package gitdir

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sbxhq/sbx/internal/fixture"
)

// TestIgnore checks ignore decisions against a table whose every row git
// check-ignore confirms on the same files.
func TestIgnore(t *testing.T) {
	type check struct {
		path string
		dir  bool
		want bool
	}
	tests := []struct {
		name   string
		files  map[string]string // ignore files by path: .gitignore, sub/.gitignore, .git/info/exclude
		checks []check
	}{
		{"basename glob", map[string]string{".gitignore": "*.log\n"}, []check{
			{"a.log", false, true}, {"dir/a.log", false, true}, {"a.log.txt", false, false}}},
		{"anchored", map[string]string{".gitignore": "/build\n"}, []check{
			{"build", true, true}, {"sub/build", true, false}}},
		{"directory only", map[string]string{".gitignore": "out/\n"}, []check{
			{"out", true, true}, {"x/out", true, true}, {"y/out", false, false}}},
		{"slash in the middle", map[string]string{".gitignore": "doc/*.txt\n"}, []check{
			{"doc/a.txt", false, true}, {"doc/sub/a.txt", false, false}, {"x/doc/a.txt", false, false}}},
		{"leading double star", map[string]string{".gitignore": "**/foo\n"}, []check{
			{"foo", false, true}, {"a/b/foo", false, true}, {"a/foox", false, false}}},
		{"trailing double star", map[string]string{".gitignore": "abc/**\n"}, []check{
			{"abc", true, false}, {"abc/x", false, true}, {"abc/y/z", false, true}}},
		{"middle double star", map[string]string{".gitignore": "a/**/b\n"}, []check{
			{"a/b", false, true}, {"a/x/b", false, true}, {"a/x/y/b", false, true}, {"a/xb", false, false}}},
		{"negation", map[string]string{".gitignore": "*.o\n!keep.o\n"}, []check{
			{"x.o", false, true}, {"keep.o", false, false}, {"d/keep.o", false, false}}},
		{"no re-including under an ignored directory", map[string]string{".gitignore": "dir/\n!dir/keep\n"}, []check{
			{"dir/keep", false, true}}},
		{"escapes", map[string]string{".gitignore": "\\#hash\n\\!bang\n# comment\nesc\\ \ntrailing  \n"}, []check{
			{"#hash", false, true}, {"!bang", false, true}, {"esc ", false, true}, {"trailing", false, true}, {"# comment", false, false}}},
		{"classes", map[string]string{".gitignore": "[a-c]x\n[!a]y\n[[:digit:]]z\n?.c\n[]]w\n"}, []check{
			{"bx", false, true}, {"dx", false, false}, {"by", false, true}, {"ay", false, false},
			{"1z", false, true}, {"az", false, false}, {"a.c", false, true}, {"ab.c", false, false}, {"]w", false, true}}},
		{"nested .gitignore", map[string]string{".gitignore": "*.tmp\n", "sub/.gitignore": "!keep.tmp\n/only\n"}, []check{
			{"sub/keep.tmp", false, false}, {"sub/other.tmp", false, true}, {"keep.tmp", false, true},
			{"sub/only", false, true}, {"sub/x/only", false, false}, {"only", false, false}}},
		{"info/exclude is weaker than .gitignore", map[string]string{".git/info/exclude": "secret\nlocal\n", ".gitignore": "!secret\n"}, []check{
			{"secret", false, false}, {"local", false, true}}},
		{"star then a directory", map[string]string{".gitignore": "foo/*\n"}, []check{
			{"foo/bar", false, true}, {"foo/baz/qux", false, true}, {"foo", true, false}}},
		{"allow-list", map[string]string{".gitignore": "*\n!*/\n!*.go\n"}, []check{
			{"a.go", false, false}, {"x/a.go", false, false}, {"x/a.txt", false, true}}},
		{"CRLF and BOM", map[string]string{".gitignore": "\xef\xbb\xbfbom\r\ncrlf\r\n"}, []check{
			{"bom", false, true}, {"crlf", false, true}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := newRepo(t, "sha1")
			for name, content := range tt.files {
				fixture.WriteFile(t, filepath.Join(dir, name), content)
			}
			for _, c := range tt.checks {
				if c.dir {
					if err := os.MkdirAll(filepath.Join(dir, c.path), 0o755); err != nil {
						t.Fatal(err)
					}
				} else {
					fixture.WriteFile(t, filepath.Join(dir, c.path), "")
				}
			}
			r := open(t, dir)
			for _, c := range tt.checks {
				if git := checkIgnore(t, dir, c.path); git != c.want {
					t.Fatalf("%s: the table says %v, git check-ignore %v", c.path, c.want, git)
				}
				if got := ignoredInWalk(t, r, dir, c.path, c.dir); got != c.want {
					t.Errorf("%s: ignored = %v, want %v", c.path, got, c.want)
				}
			}
		})
	}
}

func checkIgnore(t *testing.T, dir, path string) bool {
	t.Helper()
	cmd := exec.Command("git", "-C", dir, "check-ignore", "-q", "--no-index", path)
	cmd.Env = fixture.GitEnv()
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return true
	case errors.As(err, &exit) && exit.ExitCode() == 1:
		return false
	}
	t.Fatalf("git check-ignore %s: %v", path, err)
	return false
}

// ignoredInWalk decides path the way a walk does: each leading directory
// in turn (an ignored one hides what it holds), entering the .gitignore
// of each directory it walks into.
func ignoredInWalk(t *testing.T, r *Repo, dir, path string, isDir bool) bool {
	t.Helper()
	ig := &Ignore{}
	exclude, err := r.Exclude()
	if err != nil {
		t.Fatal(err)
	}
	ig.SetExclude(exclude)
	read := func(p string) []byte {
		data, _ := os.ReadFile(filepath.Join(dir, p, ".gitignore"))
		return data
	}
	ig.Enter("", read(""))
	parts := strings.Split(path, "/")
	for i := range parts {
		p := strings.Join(parts[:i+1], "/")
		d := i < len(parts)-1 || isDir
		m, err := ig.Match(p, d)
		if err != nil {
			t.Fatal(err)
		}
		if m {
			return true
		}
		if d {
			ig.Enter(p, read(p))
		}
	}
	return false
}

// TestWildmatchBounded: patterns built to make a backtracking matcher
// take exponential time are matched within the step bound or refused
// once it is spent, not left to run.
func TestWildmatchBounded(t *testing.T) {
	ig := &Ignore{}
	ig.Enter("", []byte(strings.Repeat("*a", 40)+"b\n"+strings.Repeat("**/", 40)+"x\n"))
	var errs []error
	fixture.Promptly(t, func() {
		for _, p := range []string{strings.Repeat("a", 200), strings.Repeat("a/", 100) + "y"} {
			if _, err := ig.Match(p, false); err != nil {
				errs = append(errs, err)
			}
		}
	})
	for _, err := range errs {
		if !strings.Contains(err.Error(), "steps to match") {
			t.Error(err)
		}
	}
	// Once the bound is spent each level of recursion, at most one per
	// pattern byte, takes one more step to return.
	if ig.steps > maxMatchSteps+maxPattern {
		t.Errorf("%d steps, more than %d", ig.steps, maxMatchSteps+maxPattern)
	}
}
