//go:build unix

package docker

import (
	"archive/tar"
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sbxhq/sbx/spec"
)

// TestGitSeed: the seed of a sandbox's own .git holds the host's HEAD,
// refs and index and sbx's config and alternates. Written into the host's
// .git by an earlier sandbox (one without this model), a ref that is a
// link to a host file, a packed-refs that is a link, and a FIFO for
// shallow are neither followed nor waited on.
func TestGitSeed(t *testing.T) {
	ws := t.TempDir()
	secret := filepath.Join(t.TempDir(), "secret")
	write := func(name, content string) {
		t.Helper()
		p := filepath.Join(ws, ".git", name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile(secret, []byte("HOST-SECRET\n"), 0o600)
	write("HEAD", "ref: refs/heads/main\n")
	write("refs/heads/main", strings.Repeat("a", 40)+"\n")
	write("refs/heads/topic/x", strings.Repeat("b", 40)+"\n")
	write("index", "DIRC")
	write("config", "[core]\n\trepositoryformatversion = 1\n[extensions]\n\tObjectFormat = SHA256\n")
	os.MkdirAll(filepath.Join(ws, ".git", "objects"), 0o755)
	os.Symlink(secret, filepath.Join(ws, ".git", "refs", "heads", "leak"))
	os.Symlink(secret, filepath.Join(ws, ".git", "packed-refs"))
	if err := syscall.Mkfifo(filepath.Join(ws, ".git", "shallow"), 0o644); err != nil {
		t.Fatal(err)
	}
	seed, err := gitSeed(&spec.Spec{Workspace: spec.Workspace{Path: ws}}, true)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	tr := tar.NewReader(bytes.NewReader(seed))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		data, _ := io.ReadAll(tr)
		got[h.Name] = string(data)
	}
	for name, content := range got {
		if strings.Contains(content, "HOST-SECRET") {
			t.Errorf("the seed holds the host file a link in .git points at, as %s", name)
		}
	}
	want := map[string]string{
		".git/HEAD":                    "ref: refs/heads/main\n",
		".git/refs/heads/main":         strings.Repeat("a", 40) + "\n",
		".git/refs/heads/topic/x":      strings.Repeat("b", 40) + "\n",
		".git/index":                   "DIRC",
		".git/objects/info/alternates": "../" + hostObjectsDir + "\n",
	}
	for name, content := range want {
		if got[name] != content {
			t.Errorf("%s = %q, want %q", name, got[name], content)
		}
	}
	for _, name := range []string{".git/refs/heads/leak", ".git/packed-refs", ".git/shallow"} {
		if _, ok := got[name]; ok {
			t.Errorf("the seed has %s, which is no regular file on the host", name)
		}
	}
	if diff := cmp.Diff("[core]\n\trepositoryformatversion = 1\n\tfilemode = true\n\tbare = false\n\tlogallrefupdates = true\n[extensions]\n\tobjectformat = sha256\n", got[".git/config"]); diff != "" {
		t.Errorf("config of a sha256 repository (-want +got):\n%s", diff)
	}
}
