//go:build unix

package spec_test

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/sbxhq/sbx/internal/fixture"
	"github.com/sbxhq/sbx/spec"
)

// TestSpecialFilesAreNotRead plays an agent that replaces the overlay the
// next sbx command loads with a FIFO (which would block a plain open until
// someone writes to it) or a directory: Load reports it at once.
func TestSpecialFilesAreNotRead(t *testing.T) {
	tests := []struct {
		name string
		make func(t *testing.T, path string)
		want string
	}{
		{"fifo", func(t *testing.T, p string) {
			if err := syscall.Mkfifo(p, 0o644); err != nil {
				t.Fatal(err)
			}
		}, "cannot read: not a regular file (named pipe)"},
		{"directory", func(t *testing.T, p string) {
			if err := os.Mkdir(p, 0o755); err != nil {
				t.Fatal(err)
			}
		}, "cannot read: not a regular file (directory)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			base := filepath.Join(dir, "sandbox.yaml")
			if err := os.WriteFile(base, []byte("version: 1\nagent: claude\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			local := filepath.Join(dir, "sandbox.local.yaml")
			tt.make(t, local)
			var err error
			fixture.Promptly(t, func() { _, err = spec.Load([]string{base}, spec.Options{Schema: compile(t)}) })
			if want := local + ": " + tt.want; err == nil || err.Error() != want {
				t.Errorf("Load = %v, want %s", err, want)
			}
		})
	}
}
