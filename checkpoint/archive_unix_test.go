//go:build unix

package checkpoint

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func TestSanitizeSource(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "export.tar")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	// A FIFO with no writer would block a plain open forever.
	if err := Sanitize(fifo, "sbx-checkpoint:x", nil, Limits{}, &out); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Fatalf("a FIFO: err = %v", err)
	}
	if err := Sanitize(dir, "sbx-checkpoint:x", nil, Limits{}, &out); err == nil {
		t.Fatal("a directory was read as an archive")
	}
	junk := filepath.Join(dir, "junk.tar")
	os.WriteFile(junk, []byte("this is not a tar archive at all, it is host data\n"), 0o600)
	if err := Sanitize(junk, "sbx-checkpoint:x", nil, Limits{}, &out); err == nil || !errors.Is(err, ErrInvalid) {
		t.Fatalf("junk: err = %v", err)
	}
	if out.Len() != 0 {
		t.Errorf("a refused archive wrote %d bytes", out.Len())
	}
}
