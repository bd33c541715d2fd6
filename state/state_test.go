package state

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestDefault(t *testing.T) {
	tests := []struct {
		env  map[string]string
		want Dir
	}{
		{map[string]string{"SBX_STATE_DIR": "/s", "XDG_STATE_HOME": "/x", "HOME": "/h"}, "/s"},
		{map[string]string{"XDG_STATE_HOME": "/x", "HOME": "/h"}, Dir(filepath.Join("/x", "sbx"))},
		{map[string]string{"HOME": "/h"}, Dir(filepath.Join("/h", ".local", "state", "sbx"))},
	}
	for _, tc := range tests {
		got, err := Default(func(k string) string { return tc.env[k] })
		if err != nil || got != tc.want {
			t.Errorf("%v: got %q, %v; want %q", tc.env, got, err, tc.want)
		}
	}
	if _, err := Default(func(string) string { return "" }); err == nil {
		t.Error("no error without HOME")
	}
}

// TestLayout: every path of the directory is spelled here, as the
// package doc lays it out.
func TestLayout(t *testing.T) {
	d := Dir("/s")
	got := []string{d.Key(), d.Record("sbx", "api"), d.Records("sbx"), d.Approved("api"), d.Approvals(), d.Locks(),
		d.Identities(), d.Checkpoint("docker", "c1"), d.Checkpoints("docker"), d.Loops(), string(d.Loop("api"))}
	l := d.Loop("api")
	r := l.Run("R")
	got = append(got, d.CA("docker", "api"), l.Latest(), l.Hints(), l.Hint("h.txt"), l.RunLock(), string(r), string(l.RunAt("api/runs/R")),
		r.Status(), r.Stop(), r.Log(), r.Records(), r.IterationLog(7))
	want := []string{"/s/key", "/s/records/sbx/api.json", "/s/records/sbx", "/s/approved/api.json", "/s/approved", "/s/locks",
		"/s/identities.json", "/s/checkpoints/docker/c1.json", "/s/checkpoints/docker", "/s/loops", "/s/loops/api",
		"/s/cas/docker/api.pem", "/s/loops/api/latest", "/s/loops/api/hints", "/s/loops/api/hints/h.txt", "/s/loops/api/locks/run.lock",
		"/s/loops/api/runs/R", "/s/loops/api/runs/R", "/s/loops/api/runs/R/status.json", "/s/loops/api/runs/R/stop",
		"/s/loops/api/runs/R/run.log", "/s/loops/api/runs/R/records.jsonl", "/s/loops/api/runs/R/iter-007.log"}
	for i := range want {
		want[i] = filepath.FromSlash(want[i])
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("layout (-want +got):\n%s", diff)
	}
}

// TestWrite: a write makes its directories private and its file 0600,
// replaces the file whole, and a write that fails leaves the old content
// and nothing else.
func TestWrite(t *testing.T) {
	d := Dir(filepath.Join(t.TempDir(), "state"))
	path := d.Record("sbx", "api")
	if err := WriteJSON(path, map[string]int{"v": 1}); err != nil {
		t.Fatal(err)
	}
	if err := Write(path, []byte("second\n")); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(path); err != nil || string(b) != "second\n" {
		t.Errorf("content = %q, %v", b, err)
	}
	if err := d.Check(); err != nil {
		t.Errorf("Check after writes: %v", err)
	}
	// A write into a directory that cannot take it fails and leaves what
	// was there.
	if runtime.GOOS != "windows" && os.Geteuid() != 0 {
		os.Chmod(filepath.Dir(path), 0o500)
		if err := Write(path, []byte("third\n")); err == nil {
			t.Error("a write into a read-only directory succeeded")
		}
		os.Chmod(filepath.Dir(path), 0o700)
		if b, _ := os.ReadFile(path); string(b) != "second\n" {
			t.Errorf("a failed write changed the file: %q", b)
		}
	}
	entries, _ := os.ReadDir(filepath.Dir(path))
	if len(entries) != 1 {
		t.Errorf("the record's directory holds %d entries, want the record only", len(entries))
	}
	if runtime.GOOS != "windows" {
		os.Chmod(path, 0o644)
		if err := d.Check(); err == nil || !strings.Contains(err.Error(), "api.json has mode 0644, want 0600") {
			t.Errorf("Check of a readable record: %v", err)
		}
	}
}

// TestWriteReplacesALink: a link at a state path is replaced, never
// written through.
func TestWriteReplacesALink(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("symbolic links need privileges on Windows")
	}
	d := Dir(t.TempDir())
	target := filepath.Join(t.TempDir(), "host-file")
	os.WriteFile(target, []byte("host\n"), 0o600)
	os.MkdirAll(filepath.Dir(d.Identities()), 0o700)
	if err := os.Symlink(target, d.Identities()); err != nil {
		t.Fatal(err)
	}
	if err := Write(d.Identities(), []byte("{}")); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(target); string(b) != "host\n" {
		t.Errorf("the write went through the link: %q", b)
	}
	if fi, err := os.Lstat(d.Identities()); err != nil || fi.Mode()&fs.ModeSymlink != 0 {
		t.Errorf("the link is still there: %v", err)
	}
}

// TestReadKey: the key is made once, private, and read back the same; a
// corrupt key is an error, never replaced.
func TestReadKey(t *testing.T) {
	d := Dir(filepath.Join(t.TempDir(), "state"))
	k1, err := d.ReadKey()
	if err != nil || len(k1) != KeySize {
		t.Fatalf("first key: %x, %v", k1, err)
	}
	k2, err := d.ReadKey()
	if err != nil || string(k1) != string(k2) {
		t.Errorf("second read = %x, %v; want %x", k2, err, k1)
	}
	if err := d.Check(); err != nil {
		t.Errorf("Check: %v", err)
	}
	os.WriteFile(d.Key(), []byte("not hex\n"), 0o600)
	if _, err := d.ReadKey(); err == nil || errors.Is(err, io.EOF) {
		t.Errorf("a corrupt key read as %v", err)
	}
	if b, _ := os.ReadFile(d.Key()); string(b) != "not hex\n" {
		t.Errorf("the corrupt key was replaced: %q", b)
	}
}

// TestReadOrCreate: of processes making a file at once, one wins and all
// read its content; the file is private, and one that exists is read,
// never made again.
func TestReadOrCreate(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cas", "docker", "api.pem")
	var wg sync.WaitGroup
	got := make([]string, 8)
	for i := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			b, err := ReadOrCreate(path, func() ([]byte, error) { return []byte(fmt.Sprintf("content %d", i)), nil })
			if err != nil {
				t.Error(err)
			}
			got[i] = string(b)
		}()
	}
	wg.Wait()
	for _, g := range got {
		if g != got[0] || !strings.HasPrefix(g, "content ") {
			t.Fatalf("readers got %q", got)
		}
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, %v", fi.Mode(), err)
	}
	b, err := ReadOrCreate(path, func() ([]byte, error) { t.Error("made again"); return nil, nil })
	if err != nil || string(b) != got[0] {
		t.Errorf("second read: %q, %v", b, err)
	}
	if entries, _ := os.ReadDir(filepath.Dir(path)); len(entries) != 1 {
		t.Errorf("left %d files beside it", len(entries))
	}
}
