package tarball

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// entry is one member of a stream a test makes.
type entry struct {
	name, link string
	typ        byte
	mode       int64
	body       string
	size       int64 // when not len(body): a header that lies
}

func stream(t *testing.T, es ...entry) *bytes.Buffer {
	t.Helper()
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, e := range es {
		h := &tar.Header{Name: e.name, Linkname: e.link, Typeflag: e.typ, Mode: e.mode, Size: int64(len(e.body))}
		if h.Typeflag == 0 {
			h.Typeflag = tar.TypeReg
		}
		if h.Typeflag != tar.TypeReg {
			h.Size = 0
		}
		if h.Mode == 0 {
			h.Mode = 0o644
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			tw.Write([]byte(e.body))
		}
	}
	tw.Close()
	return &b
}

func open(t *testing.T, dir string) *os.Root {
	t.Helper()
	r, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

// tree lists what is under dir: "name" for a file (with its content),
// "name/" for a directory, "name -> target" for a link.
func tree(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		rel = filepath.ToSlash(rel)
		switch {
		case fi.Mode()&os.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			out = append(out, rel+" -> "+target)
		case fi.IsDir():
			out = append(out, rel+"/")
		default:
			b, _ := os.ReadFile(p)
			out = append(out, rel+"="+string(b))
		}
		return nil
	})
	sort.Strings(out)
	return out
}

var small = Limits{MaxBytes: 1 << 20, MaxFile: 1 << 16, MaxEntries: 100}

// TestExtractHostile plays the agent that makes the stream sbx pulls back:
// each attack either is skipped and reported or stops the extraction, and
// nothing outside the workspace, nor a protected path inside it, changes.
func TestExtractHostile(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("symlinks need privileges on Windows")
	}
	prot := func(n string) bool { return n == "sandbox.yaml" }
	const gitConf = ": " + `git's configuration (of a .git only objects, refs, logs, HEAD, index and packed-refs are copied)`
	tests := []struct {
		name    string
		before  func(ws, outside string)
		entries []entry
		want    []string // the workspace after
		skipped []string
		err     error
	}{
		{
			name:    "ordinary files",
			entries: []entry{{name: "src/", typ: tar.TypeDir, mode: 0o755}, {name: "src/main.go", body: "package main"}, {name: "README", body: "hi"}, {name: "link", typ: tar.TypeSymlink, link: "src/main.go"}},
			want:    []string{"README=hi", "link -> src/main.go", "src/", "src/main.go=package main"},
		},
		{
			name:    "dot-dot and absolute names",
			entries: []entry{{name: "../escape", body: "x"}, {name: "/etc/escape", body: "x"}, {name: "a/../../escape", body: "x"}, {name: "ok", body: "y"}},
			want:    []string{"ok=y"},
			skipped: []string{`"../escape": not a path inside the workspace`, `"/etc/escape": not a path inside the workspace`, `"a/../../escape": not a path inside the workspace`},
		},
		{
			name:    "a link out, then a file through it",
			entries: []entry{{name: "out", typ: tar.TypeSymlink, link: "../outside"}, {name: "out/planted", body: "x"}, {name: "abs", typ: tar.TypeSymlink, link: "/etc"}},
			// The refused link is not made, so the file lands in a real
			// directory of that name, inside.
			want:    []string{"out/", "out/planted=x"},
			skipped: []string{`out: a symbolic link to "../outside", outside the workspace or absolute`, `abs: a symbolic link to "/etc", outside the workspace or absolute`},
		},
		{
			// Each link looks local on its own; the kernel resolves t
			// through s (the root itself), so t's ".." and leak climb out.
			name:    "a chain of links that only the kernel's resolution takes out",
			entries: []entry{{name: "s", typ: tar.TypeSymlink, link: "."}, {name: "t", typ: tar.TypeSymlink, link: "s/.."}, {name: "leak", typ: tar.TypeSymlink, link: "t/outside/victim"}},
			want:    []string{"leak -> t/outside/victim", "s -> ."},
			skipped: []string{`t: a symbolic link to "s/..", outside the workspace or absolute`},
		},
		{
			// The same chain in another order: t and leak are made while
			// s does not exist yet, and lead out once it does.
			name:    "the chain made before the link it goes through",
			entries: []entry{{name: "t", typ: tar.TypeSymlink, link: "s/.."}, {name: "d/leak", typ: tar.TypeSymlink, link: "../t/outside/victim"}, {name: "s", typ: tar.TypeSymlink, link: "."}, {name: "ok", typ: tar.TypeSymlink, link: "s/d"}},
			want:    []string{"d/", "ok -> s/d", "s -> ."},
			skipped: []string{
				`t: a symbolic link to "s/.." that leads outside the workspace (or round a loop) once the other links are made: removed`,
				`d/leak: a symbolic link to "../t/outside/victim" that leads outside the workspace (or round a loop) once the other links are made: removed`,
			},
		},
		{
			name: "a link through a host link that leads out",
			before: func(ws, outside string) {
				os.Symlink(outside, filepath.Join(ws, "cache"))
				os.Symlink("..", filepath.Join(ws, "up"))
			},
			entries: []entry{{name: "c", typ: tar.TypeSymlink, link: "cache/victim"}, {name: "sub/u", typ: tar.TypeSymlink, link: "../up/outside/victim"}, {name: "loop", typ: tar.TypeSymlink, link: "loop"}},
			want:    []string{"cache -> OUTSIDE", "sub/", "up -> .."},
			skipped: []string{
				`c: a symbolic link to "cache/victim", outside the workspace or absolute`,
				`sub/u: a symbolic link to "../up/outside/victim", outside the workspace or absolute`,
				`loop: a symbolic link to "loop" that leads outside the workspace (or round a loop) once the other links are made: removed`,
			},
		},
		{
			name:    "a link inside to a protected path, then a file through it",
			entries: []entry{{name: "g", typ: tar.TypeSymlink, link: ".git/hooks"}, {name: "g/pre-commit", body: "evil"}, {name: ".git/hooks/post-checkout", body: "evil"}, {name: "sandbox.yaml", body: "evil"}},
			before: func(ws, _ string) {
				os.MkdirAll(filepath.Join(ws, ".git/hooks"), 0o755)
				os.WriteFile(filepath.Join(ws, "sandbox.yaml"), []byte("mine"), 0o644)
			},
			want:    []string{".git/", ".git/hooks/", "g -> .git/hooks", "sandbox.yaml=mine"},
			skipped: []string{"g/pre-commit: g is a symbolic link, not a directory", ".git/hooks/post-checkout: git's configuration (of a .git only objects, refs, logs, HEAD, index and packed-refs are copied)", "sandbox.yaml: protected (the sandbox's declaration)"},
		},
		{
			name: "a link already on the host is replaced, not written through",
			before: func(ws, outside string) {
				os.Symlink(filepath.Join(outside, "victim"), filepath.Join(ws, "notes"))
			},
			entries: []entry{{name: "notes", body: "agent"}},
			want:    []string{"notes=agent"},
		},
		{
			name: "a host directory that is a link is not entered",
			before: func(ws, outside string) {
				os.Symlink(outside, filepath.Join(ws, "cache"))
			},
			entries: []entry{{name: "cache/x", body: "agent"}},
			want:    []string{"cache -> OUTSIDE"},
			skipped: []string{"cache/x: cache is a symbolic link, not a directory"},
		},
		{
			name:    "devices, pipes and hard links",
			entries: []entry{{name: "dev", typ: tar.TypeChar}, {name: "fifo", typ: tar.TypeFifo}, {name: "hard", typ: tar.TypeLink, link: "/etc/shadow"}},
			skipped: []string{"dev: a character device", "fifo: a named pipe", "hard: a hard link"},
		},
		{
			name:    "setuid bits are dropped",
			entries: []entry{{name: "tool", body: "#!", mode: 0o6777}},
			want:    []string{"tool=#!"},
		},
		{
			name:    "a file over the bound stops it",
			entries: []entry{{name: "a", body: "first"}, {name: "big", body: strings.Repeat("x", 1<<16+1)}, {name: "z", body: "after"}},
			want:    []string{"a=first"},
			err:     ErrLimit,
		},
		{
			name: "too many entries stop it",
			entries: func() []entry {
				var es []entry
				for i := range 101 {
					es = append(es, entry{name: filepath.Join("d", string(rune('a'+i%26))+strings.Repeat("x", i/26)), body: ""})
				}
				return es
			}(),
			err: ErrLimit,
		},
		{
			// THREATS.md #3a: nothing the host's git takes configuration
			// from, in the workspace's .git or any other, comes back; the
			// repository's data does.
			name: "git's configuration surface",
			before: func(ws, _ string) {
				os.MkdirAll(filepath.Join(ws, ".git/refs/heads"), 0o755)
				os.WriteFile(filepath.Join(ws, ".git/config"), []byte("[core]\n"), 0o644)
			},
			entries: []entry{
				{name: ".git/config", body: "[core]\n\tfsmonitor = touch pwned"},
				{name: ".git/config.worktree", body: "[core]\n\tfsmonitor = touch pwned"},
				{name: ".git/commondir", body: "../evil"},
				{name: ".git/hooks/", typ: tar.TypeDir, mode: 0o755},
				{name: ".git/info/attributes", body: "* filter=evil"},
				{name: ".git/worktrees/w/config.worktree", body: "evil"},
				{name: ".git/modules/m/config", body: "evil"},
				{name: ".git/objects/info/alternates", body: "/etc"},
				{name: ".GIT/Config", body: "evil"},
				{name: "sub/.git", body: "gitdir: ../evil"},
				{name: "nested/.git/config", body: "evil"},
				{name: "evil/config", body: "[core]\n\tfsmonitor = touch pwned"},
				{name: ".git/HEAD", body: "ref: refs/heads/main\n"},
				{name: ".git/refs/heads/main", body: "0123\n"},
				{name: ".git/objects/01/23", body: "obj"},
			},
			want: []string{".git/", ".git/HEAD=ref: refs/heads/main\n", ".git/config=[core]\n", ".git/objects/", ".git/objects/01/", ".git/objects/01/23=obj", ".git/refs/", ".git/refs/heads/", ".git/refs/heads/main=0123\n", "evil/", "evil/config=[core]\n\tfsmonitor = touch pwned"},
			skipped: []string{
				".git/config" + gitConf, ".git/config.worktree" + gitConf, ".git/commondir" + gitConf, ".git/hooks" + gitConf,
				".git/info/attributes" + gitConf, ".git/worktrees/w/config.worktree" + gitConf, ".git/modules/m/config" + gitConf,
				".git/objects/info/alternates" + gitConf, ".GIT/Config" + gitConf, "sub/.git" + gitConf, "nested/.git/config" + gitConf,
			},
		},
		{
			name:    "a directory is not replaced by a file",
			before:  func(ws, _ string) { os.MkdirAll(filepath.Join(ws, "keep", "inner"), 0o755) },
			entries: []entry{{name: "keep", body: "file"}},
			want:    []string{"keep/", "keep/inner/"},
			skipped: []string{"keep: a directory is there"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			base := t.TempDir()
			ws, outside := filepath.Join(base, "ws"), filepath.Join(base, "outside")
			os.Mkdir(ws, 0o755)
			os.Mkdir(outside, 0o755)
			os.WriteFile(filepath.Join(outside, "victim"), []byte("host"), 0o644)
			if tt.before != nil {
				tt.before(ws, outside)
			}
			st, err := Extract(context.Background(), stream(t, tt.entries...), open(t, ws), ExtractOptions{Limits: small, Protected: prot})
			if tt.err != nil {
				if !errors.Is(err, tt.err) {
					t.Fatalf("Extract: %v, want %v", err, tt.err)
				}
			} else if err != nil {
				t.Fatal(err)
			}
			got := tree(t, ws)
			for i := range got {
				got[i] = strings.ReplaceAll(got[i], outside, "OUTSIDE")
			}
			if tt.name == "too many entries stop it" {
				got = nil // what came before the bound stays; its count is not the point
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("workspace (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.skipped, st.Skipped); diff != "" {
				t.Errorf("skipped (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff([]string{"victim=host"}, tree(t, outside)); diff != "" {
				t.Errorf("outside the workspace (-want +got):\n%s", diff)
			}
			if fi, err := os.Stat(filepath.Join(ws, "tool")); err == nil && fi.Mode()&(os.ModeSetuid|os.ModeSetgid|0o022) != 0 {
				t.Errorf("tool has mode %v", fi.Mode())
			}
		})
	}
}

// TestExtractProtectedSame: a protected entry the sandbox left as the host
// has it is counted, not reported; one the agent changed (same size, other
// bytes; another kind; a new file under a protected directory) is
// reported, and neither is written. The host's side is read only where it
// is a regular file of the workspace: a host link to a file outside with
// the same bytes is no match, so the count tells the agent nothing about
// files outside the workspace.
func TestExtractProtectedSame(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("symlinks need privileges on Windows")
	}
	base := t.TempDir()
	ws, outside := filepath.Join(base, "ws"), filepath.Join(base, "outside")
	os.Mkdir(ws, 0o755)
	os.Mkdir(outside, 0o755)
	os.WriteFile(filepath.Join(outside, "victim"), []byte("host secret"), 0o644)
	host := map[string]string{
		"sandbox.yaml":   "version: 1\n",
		"PROMPT.md":      "mine",
		"ctx/Dockerfile": "FROM x\n",
		"plink":          "a file",
		"big":            strings.Repeat("b", 1<<16+1),
	}
	for name, body := range host {
		os.MkdirAll(filepath.Dir(filepath.Join(ws, name)), 0o755)
		os.WriteFile(filepath.Join(ws, name), []byte(body), 0o644)
	}
	os.Symlink("sandbox.yaml", filepath.Join(ws, "l"))
	os.Symlink(filepath.Join(outside, "victim"), filepath.Join(ws, "sec"))
	prot := func(n string) bool {
		switch n {
		case "sandbox.yaml", "PROMPT.md", "ctx", "l", "plink", "sec", "big":
			return true
		}
		return false
	}
	entries := []entry{
		{name: "sandbox.yaml", body: "version: 1\n"},
		{name: "PROMPT.md", body: "evil"},
		{name: "ctx/", typ: tar.TypeDir, mode: 0o755},
		{name: "ctx/Dockerfile", body: "FROM x\n"},
		{name: "ctx/new", body: "planted"},
		{name: "l", typ: tar.TypeSymlink, link: "sandbox.yaml"},
		{name: "plink", typ: tar.TypeSymlink, link: "sandbox.yaml"},
		{name: "sec", body: "host secret"},
		{name: "big", body: strings.Repeat("b", 1<<16+1)},
		{name: "work.txt", body: "agent work"},
	}
	before := tree(t, ws)
	st, err := Extract(context.Background(), stream(t, entries...), open(t, ws), ExtractOptions{Limits: small, Protected: prot})
	if err != nil {
		t.Fatal(err)
	}
	const why = ": protected (the sandbox's declaration)"
	if diff := cmp.Diff([]string{"PROMPT.md" + why, "ctx/new" + why, "plink" + why, "sec" + why, "big" + why}, st.Skipped); diff != "" {
		t.Errorf("skipped (-want +got):\n%s", diff)
	}
	// sandbox.yaml, ctx/Dockerfile and l; the directory ctx is no line.
	if st.ProtectedSame != 3 {
		t.Errorf("ProtectedSame = %d, want 3", st.ProtectedSame)
	}
	after := tree(t, ws)
	if diff := cmp.Diff(append(before, "work.txt=agent work"), after, cmpopts.SortSlices(func(a, b string) bool { return a < b })); diff != "" {
		t.Errorf("workspace (-before +after):\n%s", diff)
	}
}

// TestRoundTrip writes a tree and extracts it elsewhere: directories,
// files with their modes, and links by their text; a FIFO is skipped.
func TestRoundTrip(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("symlinks need privileges on Windows")
	}
	src, dst := t.TempDir(), t.TempDir()
	os.MkdirAll(filepath.Join(src, "a", "b"), 0o755)
	os.WriteFile(filepath.Join(src, "a", "b", "f"), []byte("content"), 0o755)
	os.WriteFile(filepath.Join(src, "top"), nil, 0o600)
	os.Symlink("a/b/f", filepath.Join(src, "l"))
	os.Symlink("/etc/passwd", filepath.Join(src, "abs"))
	var buf bytes.Buffer
	st, err := Write(context.Background(), open(t, src), &buf, small)
	if err != nil {
		t.Fatal(err)
	}
	if st.Files != 2 || st.Dirs != 2 || st.Links != 2 {
		t.Errorf("wrote %+v", st)
	}
	if _, err := Extract(context.Background(), &buf, open(t, dst), ExtractOptions{Limits: small}); err != nil {
		t.Fatal(err)
	}
	want := []string{"a/", "a/b/", "a/b/f=content", "l -> a/b/f", "top="}
	if diff := cmp.Diff(want, tree(t, dst)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if fi, _ := os.Stat(filepath.Join(dst, "a", "b", "f")); fi.Mode().Perm() != 0o755 {
		t.Errorf("mode %v", fi.Mode())
	}
}

// TestWriteBounded stops at the limits rather than reading on.
func TestWriteBounded(t *testing.T) {
	src := t.TempDir()
	os.WriteFile(filepath.Join(src, "big"), bytes.Repeat([]byte("x"), 1<<16+1), 0o644)
	if _, err := Write(context.Background(), open(t, src), &bytes.Buffer{}, small); !errors.Is(err, ErrLimit) {
		t.Errorf("Write: %v, want ErrLimit", err)
	}
}

// TestExtractHostGit copies the host's own .git whole into a sandbox's
// copy (push), so that git there works as on the host; only a stream from
// the host says HostGit.
func TestExtractHostGit(t *testing.T) {
	dst := t.TempDir()
	s := stream(t, entry{name: ".git/config", body: "[core]\n"}, entry{name: ".git/hooks/pre-commit", body: "mine"})
	if _, err := Extract(context.Background(), s, open(t, dst), ExtractOptions{Limits: small, HostGit: true}); err != nil {
		t.Fatal(err)
	}
	want := []string{".git/", ".git/config=[core]\n", ".git/hooks/", ".git/hooks/pre-commit=mine"}
	if diff := cmp.Diff(want, tree(t, dst)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// TestExtractErrorNames plays the agent that names a file to forge sbx's
// lines where an extraction error quotes it (sbx pull prints the error): a
// clipboard write, a carriage return, a line feed and a bidirectional
// override in the name are escaped in the error.
func TestExtractErrorNames(t *testing.T) {
	name := "big\x1b]52;c;ZXZpbA==\x07\r\nsbx loop: iteration 3: verify passed\u202e"
	ws := t.TempDir()
	_, err := Extract(context.Background(), stream(t, entry{name: name, body: strings.Repeat("x", 1<<16+1)}), open(t, ws), ExtractOptions{Limits: small})
	if !errors.Is(err, ErrLimit) {
		t.Fatalf("err = %v, want ErrLimit", err)
	}
	if msg := err.Error(); strings.ContainsAny(msg, "\x1b\x07\r\n\u202e") {
		t.Errorf("the error holds the name raw: %q", msg)
	}
}
