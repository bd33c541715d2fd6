package atomicfile

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// TestReplace: a planted link is replaced, not written through; a failed
// write leaves the old file and no temporary one; the mode is perm.
func TestReplace(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("symbolic links need privileges on Windows")
	}
	dir := t.TempDir()
	victim := filepath.Join(dir, "host-file")
	if err := os.WriteFile(victim, []byte("host"), 0o644); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "sandbox.yaml")
	if err := os.Symlink(victim, path); err != nil {
		t.Fatal(err)
	}
	if err := ReplaceBytes(path, []byte("new"), 0o600); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(victim); string(b) != "host" {
		t.Errorf("wrote through the link: host file now %q", b)
	}
	fi, err := os.Lstat(path)
	if err != nil || fi.Mode()&os.ModeSymlink != 0 || fi.Mode().Perm() != 0o600 {
		t.Errorf("path: %v, %v; want a regular 0600 file", fi.Mode(), err)
	}
	boom := errors.New("boom")
	if err := Replace(path, 0o600, func(w io.Writer) error { io.WriteString(w, "half"); return boom }); !errors.Is(err, boom) {
		t.Errorf("err = %v", err)
	}
	if b, _ := os.ReadFile(path); string(b) != "new" {
		t.Errorf("a failed write changed the file: %q", b)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, ".*tmp-*")); len(left) > 0 {
		t.Errorf("left behind: %v", left)
	}
}
