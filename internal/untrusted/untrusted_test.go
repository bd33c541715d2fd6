//go:build unix

package untrusted

import (
	"context"
	"errors"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sbxhq/sbx/internal/fixture"
)

func mkfifo(t *testing.T, path string) {
	t.Helper()
	if err := syscall.Mkfifo(path, 0o644); err != nil {
		t.Fatal(err)
	}
}

func symlink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}

// hostFile is a file outside every root the tests open, standing for a
// host secret.
func hostFile(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "secret")
	fixture.WriteFile(t, p, "host secret")
	return p
}

func TestReadFile(t *testing.T) {
	dir := t.TempDir()
	secret := hostFile(t)
	fixture.WriteFile(t, filepath.Join(dir, "prompt.md"), "do it\n")
	fixture.WriteFile(t, filepath.Join(dir, "sub", "other.md"), "other\n")
	fixture.WriteFile(t, filepath.Join(dir, "big"), strings.Repeat("x", 101))
	fixture.WriteFile(t, filepath.Join(dir, "exact"), strings.Repeat("x", 100))
	symlink(t, "sub/other.md", filepath.Join(dir, "inside"))
	symlink(t, "../../"+filepath.Base(filepath.Dir(secret))+"/secret", filepath.Join(dir, "relative-out"))
	symlink(t, secret, filepath.Join(dir, "absolute-out"))
	symlink(t, "/dev/zero", filepath.Join(dir, "zero"))
	mkfifo(t, filepath.Join(dir, "fifo"))
	symlink(t, "fifo", filepath.Join(dir, "to-fifo"))
	ln, err := net.Listen("unix", filepath.Join(dir, "sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	os.Mkdir(filepath.Join(dir, "adir"), 0o755)
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()

	tests := []readCase{
		{name: "prompt.md", want: "do it\n", ok: true},
		{name: "inside", want: "other\n", ok: true},
		{name: "exact", want: strings.Repeat("x", 100), ok: true},
		{name: "big", wantErr: ErrTooLarge},
		{name: "relative-out"},
		{name: "absolute-out"},
		{name: "zero"},
		{name: "fifo", wantErr: ErrNotRegular},
		{name: "to-fifo", wantErr: ErrNotRegular},
		{name: "sock"}, // open(2) of a socket fails: ENXIO
		{name: "adir", wantErr: ErrNotRegular},
		{name: "missing", wantErr: fs.ErrNotExist},
		{name: "../" + filepath.Base(dir) + "/prompt.md"},
	}
	checkReads(t, tests, func(name string) ([]byte, error) { return ReadFile(root, name, 100) })
}

// readCase is a read and what it must give.
type readCase struct {
	name    string
	want    string
	wantErr error // nil: any error
	ok      bool
}

// checkReads reads each case's name, promptly, and checks the outcome.
func checkReads(t *testing.T, tests []readCase, read func(name string) ([]byte, error)) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var data []byte
			var err error
			fixture.Promptly(t, func() { data, err = read(tt.name) })
			if tt.ok {
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(tt.want, string(data)); diff != "" {
					t.Errorf("content (-want +got):\n%s", diff)
				}
				return
			}
			if err == nil {
				t.Fatalf("read %q, want an error", data)
			}
			if tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
				t.Errorf("error = %v, want %v", err, tt.wantErr)
			}
			if data != nil {
				t.Errorf("data = %q with the error", data)
			}
		})
	}
}

func TestNotRegularMessage(t *testing.T) {
	dir := t.TempDir()
	mkfifo(t, filepath.Join(dir, "p"))
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	_, err = ReadFile(root, "p", 10)
	if want := "open p: not a regular file (named pipe)"; err == nil || err.Error() != want {
		t.Errorf("error = %v, want %q", err, want)
	}
}

func TestOpenPath(t *testing.T) {
	dir := t.TempDir()
	secret := hostFile(t)
	mkfifo(t, filepath.Join(dir, "fifo"))
	symlink(t, secret, filepath.Join(dir, "link"))
	var err error
	fixture.Promptly(t, func() { _, _, err = OpenPath(filepath.Join(dir, "fifo")) })
	if !errors.Is(err, ErrNotRegular) {
		t.Errorf("fifo: error = %v, want ErrNotRegular", err)
	}
	// OpenPath trusts the path: a symlink named by the user is followed.
	f, info, err := OpenPath(filepath.Join(dir, "link"))
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	if info.Size() != int64(len("host secret")) {
		t.Errorf("size = %d", info.Size())
	}
}

func TestReadPath(t *testing.T) {
	dir := t.TempDir()
	secret := hostFile(t)
	fixture.WriteFile(t, filepath.Join(dir, "sandbox.yaml"), "version: 1\n")
	fixture.WriteFile(t, filepath.Join(dir, "big"), strings.Repeat("x", 101))
	fixture.WriteFile(t, filepath.Join(dir, "exact"), strings.Repeat("x", 100))
	fixture.WriteFile(t, filepath.Join(dir, "empty"), "")
	symlink(t, secret, filepath.Join(dir, "link"))
	symlink(t, "/dev/zero", filepath.Join(dir, "zero"))
	mkfifo(t, filepath.Join(dir, "fifo"))
	ln, err := net.Listen("unix", filepath.Join(dir, "sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	os.Mkdir(filepath.Join(dir, "adir"), 0o755)

	tests := []readCase{
		{name: "sandbox.yaml", want: "version: 1\n", ok: true},
		{name: "exact", want: strings.Repeat("x", 100), ok: true},
		{name: "empty", want: "", ok: true},
		// ReadPath trusts the path: a symlink named by the user is followed.
		{name: "link", want: "host secret", ok: true},
		{name: "big", wantErr: ErrTooLarge},
		{name: "zero", wantErr: ErrNotRegular},
		{name: "fifo", wantErr: ErrNotRegular},
		{name: "sock"}, // open(2) of a socket fails: ENXIO
		{name: "adir", wantErr: ErrNotRegular},
		{name: "missing", wantErr: fs.ErrNotExist},
	}
	checkReads(t, tests, func(name string) ([]byte, error) { return ReadPath(filepath.Join(dir, name), 100) })
	_, err = ReadPath(filepath.Join(dir, "fifo"), 100)
	if want := "open " + filepath.Join(dir, "fifo") + ": not a regular file (named pipe)"; err == nil || err.Error() != want {
		t.Errorf("error = %v, want %q", err, want)
	}
}

// walked lists what Walk reports: path and kind, or path and error.
func walked(t *testing.T, root *os.Root, fn func(*Entry) error) []string {
	t.Helper()
	var got []string
	err := Walk(context.Background(), root, func(e *Entry) error {
		if e.Err != nil {
			got = append(got, e.Path+" error")
		} else {
			got = append(got, e.Path+" "+Kind(e.Info.Mode()))
		}
		if fn != nil {
			return fn(e)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func TestWalkNeverFollowsSymlinks(t *testing.T) {
	dir := t.TempDir()
	outside := t.TempDir()
	fixture.WriteFile(t, filepath.Join(outside, "host.txt"), "host")
	fixture.WriteFile(t, filepath.Join(dir, "a", "b.txt"), "b")
	fixture.WriteFile(t, filepath.Join(dir, "c.txt"), "c")
	symlink(t, outside, filepath.Join(dir, "out"))
	symlink(t, "a", filepath.Join(dir, "in"))
	mkfifo(t, filepath.Join(dir, "a", "fifo"))
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	var opened []string
	got := walked(t, root, func(e *Entry) error {
		if e.Err == nil && e.Info.Mode().IsRegular() {
			data, err := e.ReadFile(10)
			if err != nil {
				return err
			}
			opened = append(opened, e.Path+"="+string(data))
		}
		return nil
	})
	want := []string{"a directory", "a/b.txt regular file", "a/fifo named pipe", "c.txt regular file", "in symbolic link", "out symbolic link"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("walk (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"a/b.txt=b", "c.txt=c"}, opened); diff != "" {
		t.Errorf("read (-want +got):\n%s", diff)
	}
}

func TestWalkSkipDir(t *testing.T) {
	dir := t.TempDir()
	fixture.WriteFile(t, filepath.Join(dir, "a", "x"), "")
	fixture.WriteFile(t, filepath.Join(dir, "b", "y"), "")
	fixture.WriteFile(t, filepath.Join(dir, "c"), "")
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	got := walked(t, root, func(e *Entry) error {
		if e.Path == "a" {
			return fs.SkipDir
		}
		return nil
	})
	want := []string{"a directory", "b directory", "b/y regular file", "c regular file"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("walk (-want +got):\n%s", diff)
	}
}

// TestWalkRaces plays an agent that swaps entries between Walk's lstat and
// the open: a file becomes a FIFO or a symlink to a host file or to
// another file; a directory, once open, becomes a symlink to a host
// directory or to another directory.
func TestWalkRaces(t *testing.T) {
	dir := t.TempDir()
	outside := t.TempDir()
	secret := hostFile(t)
	fixture.WriteFile(t, filepath.Join(outside, "host.txt"), "host")
	fixture.WriteFile(t, filepath.Join(dir, "to-fifo"), "x")
	fixture.WriteFile(t, filepath.Join(dir, "to-link"), "x")
	fixture.WriteFile(t, filepath.Join(dir, "to-inside"), "x")
	fixture.WriteFile(t, filepath.Join(dir, "z", "ok"), "x")
	fixture.WriteFile(t, filepath.Join(dir, "d", "f"), "x")
	fixture.WriteFile(t, filepath.Join(dir, "e", "f"), "x")
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	swap := func(name string, make func(p string)) {
		p := filepath.Join(dir, name)
		if err := os.RemoveAll(p); err != nil {
			t.Fatal(err)
		}
		make(p)
	}
	errs := map[string]error{}
	var dirErr []string
	var got []string
	fixture.Promptly(t, func() {
		got = walked(t, root, func(e *Entry) error {
			if e.Err != nil {
				dirErr = append(dirErr, e.Path)
				errs[e.Path] = e.Err
				return nil
			}
			switch e.Path {
			case "to-fifo":
				swap(e.Path, func(p string) { mkfifo(t, p) })
			case "to-link":
				swap(e.Path, func(p string) { symlink(t, secret, p) })
			case "to-inside":
				swap(e.Path, func(p string) { symlink(t, "z/ok", p) })
			case "d":
				swap(e.Path, func(p string) { symlink(t, outside, p) })
				return nil
			case "e":
				swap(e.Path, func(p string) { symlink(t, "z", p) })
				return nil
			}
			if e.Info.Mode().IsRegular() {
				data, err := e.ReadFile(100)
				if err == nil && string(data) != "x" {
					t.Errorf("%s: read %q", e.Path, data)
				}
				errs[e.Path] = err
			}
			return nil
		})
	})
	if diff := cmp.Diff([]string{"d", "e"}, dirErr); diff != "" {
		t.Errorf("directories reported unreadable (-want +got):\n%s", diff)
	}
	// The directories opened before the swap are walked as they are
	// now, removed: nothing under them, nothing where the symlinks lead.
	want := []string{"d directory", "d error", "e directory", "e error", "to-fifo regular file", "to-inside regular file", "to-link regular file", "z directory", "z/ok regular file"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("walk (-want +got):\n%s", diff)
	}
	for name, want := range map[string]error{"to-fifo": ErrNotRegular, "to-inside": ErrChanged, "z/ok": nil} {
		if !errors.Is(errs[name], want) {
			t.Errorf("%s: error = %v, want %v", name, errs[name], want)
		}
	}
	if errs["to-link"] == nil {
		t.Error("to-link: read through a symlink to the host swapped in")
	}
}

func TestReadRegular(t *testing.T) {
	dir := t.TempDir()
	fixture.WriteFile(t, filepath.Join(dir, "sub", "file"), "content")
	symlink(t, "file", filepath.Join(dir, "sub", "link"))
	mkfifo(t, filepath.Join(dir, "sub", "fifo"))
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	got := map[string]string{}
	walked(t, root, func(e *Entry) error {
		if e.Path != "sub" {
			return nil
		}
		for _, name := range []string{"file", "link", "fifo", "missing"} {
			var data []byte
			var err error
			fixture.Promptly(t, func() { data, err = e.ReadChild(name, 100) })
			switch {
			case errors.Is(err, fs.ErrNotExist):
				got[name] = "not exist"
			case errors.Is(err, ErrNotRegular):
				got[name] = "not regular"
			case err != nil:
				got[name] = err.Error()
			default:
				got[name] = string(data)
			}
		}
		return nil
	})
	want := map[string]string{"file": "content", "link": "not regular", "fifo": "not regular", "missing": "not exist"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ReadChild (-want +got):\n%s", diff)
	}
}

func TestWalkCancelled(t *testing.T) {
	dir := t.TempDir()
	fixture.WriteFile(t, filepath.Join(dir, "a"), "")
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := Walk(ctx, root, func(*Entry) error { return nil }); !errors.Is(err, context.Canceled) {
		t.Errorf("error = %v, want context.Canceled", err)
	}
}

func TestReadDirNames(t *testing.T) {
	dir := t.TempDir()
	fixture.WriteFile(t, filepath.Join(dir, "d", "b"), "")
	fixture.WriteFile(t, filepath.Join(dir, "d", "a"), "")
	fixture.WriteFile(t, filepath.Join(dir, "many", "1"), "")
	fixture.WriteFile(t, filepath.Join(dir, "many", "2"), "")
	fixture.WriteFile(t, filepath.Join(dir, "many", "3"), "")
	mkfifo(t, filepath.Join(dir, "fifo"))
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	got := map[string]string{}
	for _, name := range []string{"d", "many", "fifo"} {
		var names []string
		var err error
		fixture.Promptly(t, func() { names, err = ReadDirNames(root, name, 2) })
		if err != nil {
			got[name] = err.Error()
		} else {
			got[name] = strings.Join(names, " ")
		}
	}
	want := map[string]string{"d": "a b", "many": "readdir many: more than 2 names", "fifo": "open fifo: not a directory (named pipe)"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ReadDirNames (-want +got):\n%s", diff)
	}
}
