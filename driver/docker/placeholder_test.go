package docker

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/sbxhq/sbx/spec"
)

// TestPlaceholderHostile plays the agent that swapped the directory of
// its sandbox.yaml for a link out of the workspace before the sandbox
// stopped: putting the placeholder back refuses the link and writes
// nothing where it points. Without a link, the placeholder comes back;
// a file that is there is kept as it is.
func TestPlaceholderHostile(t *testing.T) {
	ws, outside := t.TempDir(), t.TempDir()
	sp := &spec.Spec{Protect: true, Workspace: spec.Workspace{Path: ws},
		Declarations: []spec.Declaration{{Path: filepath.Join(ws, "conf", "sandbox.yaml")}}}
	if err := os.Symlink(outside, filepath.Join(ws, "conf")); err != nil {
		t.Fatal(err)
	}
	if err := restorePlaceholder(sp); err == nil {
		t.Error("the placeholder was made through a link out of the workspace")
	}
	if _, err := os.Lstat(filepath.Join(outside, "sandbox.local.yaml")); !os.IsNotExist(err) {
		t.Errorf("a file appeared where the link points: %v", err)
	}

	if err := os.Remove(filepath.Join(ws, "conf")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(ws, "conf"), 0o755); err != nil {
		t.Fatal(err)
	}
	local := filepath.Join(ws, "conf", "sandbox.local.yaml")
	if err := restorePlaceholder(sp); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(local); err != nil || string(b) != localPlaceholder {
		t.Errorf("the placeholder: %q, %v", b, err)
	}
	if err := os.WriteFile(local, []byte("name: mine\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := restorePlaceholder(sp); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(local); string(b) != "name: mine\n" {
		t.Errorf("an existing file was replaced: %q", b)
	}
}
