package session

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/sbxhq/sbx/driver"
	"github.com/sbxhq/sbx/driver/runner"
	"github.com/sbxhq/sbx/internal/fakecli/fakesbx"
	"github.com/sbxhq/sbx/reconcile"
	"github.com/sbxhq/sbx/state"
)

// fakeEnv, set in a command's environment, makes this test binary the fake
// of Docker's sbx (internal/fakecli/fakesbx) instead of running tests.
const fakeEnv = "SBX_SESSION_TEST_FAKE"

func TestMain(m *testing.M) {
	if os.Getenv(fakeEnv) == "sbx" {
		os.Exit(fakesbx.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr, os.Getenv))
	}
	os.Exit(m.Run())
}

// world is a workspace, a state directory and the fake of Docker's sbx
// (its exec runs on the host), for tests that open sessions on the sbx
// driver as sbx does.
type world struct {
	ws    string
	state state.Dir
	env   driver.Env
}

func newWorld(t *testing.T) *world {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	w := &world{ws: filepath.Join(dir, "ws"), state: state.Dir(filepath.Join(dir, "state"))}
	if err := os.MkdirAll(w.ws, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(w.ws, "PROMPT.md"), []byte("Do the task.\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := &runner.Runner{Env: []string{fakeEnv + "=sbx", "SBX_DOCKER_SBX=" + self,
		"FAKE_SBX_STATE=" + filepath.Join(dir, "fake.json"), "FAKE_SBX_LOG=" + filepath.Join(dir, "argv.log"),
		"HOME=" + dir, "PATH=" + os.Getenv("PATH")}}
	w.env = driver.Env{Runner: r, Self: self}
	// Docker's sbx asks for a global policy before the first sandbox
	// (docker-sbx-evidence.md §2.1): the user's one-time setup.
	if _, err := r.Output(context.Background(), self, "policy", "init", "deny-all"); err != nil {
		t.Fatal(err)
	}
	return w
}

// file writes a sandbox file in the workspace and returns its path.
func (w *world) file(t *testing.T, name, doc string) string {
	t.Helper()
	p := filepath.Join(w.ws, name)
	if err := os.WriteFile(p, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// open opens a session on files, taking the sandboxes' locks as sbx loop
// does.
func (w *world) open(t *testing.T, files ...string) *Session {
	t.Helper()
	s, err := Open(context.Background(), Options{Files: files, Lock: "sbx loop", Env: w.env, StateDir: w.state})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Release)
	return s
}

// apply converges the sandboxes of files as 'sbx apply -y' does.
func (w *world) apply(t *testing.T, files ...string) {
	t.Helper()
	s := w.open(t, files...)
	defer s.Release()
	p, err := s.Plan(false)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Apply(context.Background(), p, false, reconcile.ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
}
