//go:build unix

package buildctx

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/sbxhq/sbx/internal/fixture"
	"github.com/sbxhq/sbx/spec"
)

// context writes a build context with explicit modes, so that its hash
// does not depend on the umask.
func buildContext(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	mk := func(name, content string, mode os.FileMode) {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
	}
	mk("Dockerfile", "FROM scratch\n", 0o644)
	mk("app/main.go", "package main\n", 0o644)
	mk("bin/run", "#!/bin/sh\n", 0o755)
	mk(".dockerignore", "logs/\n", 0o644)
	mk("logs/x.log", "noise", 0o644)
	for name, mode := range map[string]os.FileMode{"app": 0o755, "bin": 0o750} {
		if err := os.Chmod(filepath.Join(dir, name), mode); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("app/main.go", filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	return dir
}

// hash runs Hash with a safety net: a read that blocks fails the test
// instead of hanging it.
func hash(t *testing.T, b *spec.Build) (h string, err error) {
	t.Helper()
	fixture.Promptly(t, func() { h, err = Hash(b) })
	return h, err
}

// TestHashUnchanged: the safe walk hashes a context exactly as the
// filepath.WalkDir one before it did (the value below is what that one
// computed), so upgrading sbx does not rebuild every template.
func TestHashUnchanged(t *testing.T) {
	got, err := hash(t, &spec.Build{Context: buildContext(t), Dockerfile: "Dockerfile", Args: map[string]string{"A": "1"}, Target: "t"})
	if err != nil {
		t.Fatal(err)
	}
	if want := "sha256:a74e71db785a829eef8e305ee1444244be6f7f665d8eeeb7080fc33359a13b72"; got != want {
		t.Errorf("Hash = %s, want %s", got, want)
	}
}

// TestHashHostileContext plays an agent that can write the build context:
// a Dockerfile or .dockerignore that is a symlink to a host file or a
// FIFO is an error; a FIFO or a symlink to a host file elsewhere in the
// context is hashed by its name and link text, never opened.
func TestHashHostileContext(t *testing.T) {
	secret := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secret, []byte("host secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	mkfifo := func(p string) error { return syscall.Mkfifo(p, 0o644) }
	link := func(p string) error { return os.Symlink(secret, p) }
	tests := []struct {
		name    string
		path    string
		make    func(string) error
		wantErr string // "": no error; "*": any error
	}{
		{"Dockerfile fifo", "Dockerfile", mkfifo, "not a regular file (named pipe)"},
		{"Dockerfile symlink out", "Dockerfile", link, "*"},
		{".dockerignore fifo", ".dockerignore", mkfifo, "not a regular file (named pipe)"},
		{".dockerignore symlink out", ".dockerignore", link, "*"},
		{"fifo in the context", "app/pipe", mkfifo, ""},
		{"symlink out in the context", "app/secret", link, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := buildContext(t)
			b := &spec.Build{Context: dir, Dockerfile: "Dockerfile"}
			p := filepath.Join(dir, tt.path)
			if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
				t.Fatal(err)
			}
			if err := tt.make(p); err != nil {
				t.Fatal(err)
			}
			h1, err := hash(t, b)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatal(err)
			case tt.wantErr == "":
				// The host file's content is not part of the hash.
				if err := os.WriteFile(secret, []byte("changed"), 0o600); err != nil {
					t.Fatal(err)
				}
				if h2, err := hash(t, b); err != nil || h2 != h1 {
					t.Errorf("hash changed with a host file: %s, %s, %v", h1, h2, err)
				}
			case err == nil:
				t.Fatalf("Hash = %s, want an error", h1)
			case tt.wantErr != "*" && !strings.Contains(err.Error(), tt.wantErr):
				t.Errorf("error = %v, want %v", err, tt.wantErr)
			case strings.Contains(err.Error(), "host secret"):
				t.Errorf("error shows the host file: %v", err)
			}
		})
	}
}
