//go:build unix

package docker

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sbxhq/sbx/spec"
)

// TestLostProtection: every way a protected path stops being the file its
// read-only bind pins, from the host or from inside, is reported, once,
// at the topmost path that changed; a path still in place is not.
func TestLostProtection(t *testing.T) {
	tests := []struct {
		name   string
		change func(t *testing.T, ws string)
		want   []string
	}{
		{"untouched", func(*testing.T, string) {}, nil},
		{"written in place", func(t *testing.T, ws string) {
			must(t, os.WriteFile(filepath.Join(ws, "sandbox.yaml"), []byte("name: edited\n"), 0o644))
		}, nil},
		{"replaced on the host", func(t *testing.T, ws string) {
			must(t, os.WriteFile(filepath.Join(ws, "new"), []byte("name: x\n"), 0o644))
			must(t, os.Rename(filepath.Join(ws, "new"), filepath.Join(ws, "sandbox.yaml")))
		}, []string{"workspace.protect: sandbox.yaml was replaced since the sandbox was created (its read-only bind no longer covers it)"}},
		{"removed", func(t *testing.T, ws string) {
			must(t, os.Remove(filepath.Join(ws, "sandbox.yaml")))
		}, []string{"workspace.protect: sandbox.yaml was removed or renamed since the sandbox was created (its read-only bind no longer covers it)"}},
		{"a link now", func(t *testing.T, ws string) {
			must(t, os.Remove(filepath.Join(ws, "sandbox.yaml")))
			must(t, os.Symlink("/etc/hostname", filepath.Join(ws, "sandbox.yaml")))
		}, []string{"workspace.protect: sandbox.yaml became a symbolic link since the sandbox was created (its read-only bind no longer covers it)"}},
		{"parent renamed", func(t *testing.T, ws string) {
			must(t, os.Rename(filepath.Join(ws, "prompts"), filepath.Join(ws, "p-old")))
			must(t, os.MkdirAll(filepath.Join(ws, "prompts", "deep"), 0o755))
			must(t, os.WriteFile(filepath.Join(ws, "prompts", "deep", "task.md"), []byte("mine\n"), 0o644))
		}, []string{"workspace.protect: prompts, a parent of prompts/deep/task.md, was replaced since the sandbox was created (the read-only bind no longer covers prompts/deep/task.md)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ws := t.TempDir()
			must(t, os.MkdirAll(filepath.Join(ws, "prompts", "deep"), 0o755))
			must(t, os.WriteFile(filepath.Join(ws, "sandbox.yaml"), []byte("name: x\n"), 0o644))
			must(t, os.WriteFile(filepath.Join(ws, "prompts", "deep", "task.md"), []byte("do it\n"), 0o644))
			sp := &spec.Spec{Workspace: spec.Workspace{Path: ws}, Protect: true}
			prot := &protection{sources: []string{filepath.Join(ws, "sandbox.yaml"), filepath.Join(ws, "prompts", "deep", "task.md")}}
			label, err := recordIdentities(sp, prot)
			if err != nil {
				t.Fatal(err)
			}
			tt.change(t, ws)
			labels := map[string]string{labelProtect: "true", labelWS: ws, labelIdentity: label}
			if diff := cmp.Diff(tt.want, lostProtection(labels)); diff != "" {
				t.Errorf("lostProtection (-want +got):\n%s", diff)
			}
		})
	}
}

// TestLostProtectionUnrecorded: a protected sandbox without the record
// cannot be checked, and says so; an unprotected one has nothing to lose.
func TestLostProtectionUnrecorded(t *testing.T) {
	if got := lostProtection(map[string]string{labelProtect: "true"}); len(got) != 1 {
		t.Errorf("a protected sandbox without %s: %q, want one line", labelIdentity, got)
	}
	if got := lostProtection(map[string]string{labelProtect: "false"}); got != nil {
		t.Errorf("an unprotected sandbox: %q, want nothing", got)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
