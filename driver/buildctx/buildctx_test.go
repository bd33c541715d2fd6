package buildctx

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/sbxhq/sbx/spec"
)

func TestHash(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("Dockerfile", "FROM scratch\nCOPY app /app\n")
	write("app", "v1")
	write(".dockerignore", "logs/\n*.tmp\n")
	b := &spec.Build{Context: dir, Dockerfile: "Dockerfile", Args: map[string]string{"V": "1"}}
	h := func() string {
		t.Helper()
		s, err := Hash(b)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	base := h()
	if base != h() {
		t.Fatal("hash is not deterministic")
	}
	write("logs/today.log", "noise")
	write("scratch.tmp", "noise")
	if got := h(); got != base {
		t.Error("an ignored file changed the hash")
	}
	write("app", "v2")
	changed := h()
	if changed == base {
		t.Error("a changed file did not change the hash")
	}
	b.Args["V"] = "2"
	if h() == changed {
		t.Error("a changed build arg did not change the hash")
	}
}
