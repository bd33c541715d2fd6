// Package dockertest is the setup the docker driver's end-to-end tests
// share, so that they can live in more than one package (each package is
// one test binary, and go test gives each ten minutes): a static sbx
// built from this tree, a busybox template image built from Debian's
// busybox-static (nothing is pulled), a web server container for a
// sandbox to reach or be refused, and a workspace driven through the
// built sbx as a user runs it (Workspace).
//
// Every object a run makes carries its run id and the package's test
// label (fixture.Labels), so runs sharing a daemon never collide; each is
// removed by the run, and fixture.SweepDocker removes what killed runs
// left behind.
package dockertest

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/sbxhq/sbx/driver"
	"github.com/sbxhq/sbx/internal/fixture"
)

// Env is one test process's daemon-side fixtures. New names them; Run
// makes them, runs the tests and removes them.
type Env struct {
	Binary  string // static sbx
	Image   string // busybox template
	WebName string // the test web server's container
	WebIP   string // its address on Docker's default bridge
	RunID   string
	Workdir string // the run's scratch directory (Binary is in it), removed by Run

	pkg    string
	ok     bool
	reason string

	// dockerd builds DockerdImage once.
	dockerd      sync.Once
	dockerdImage string
	dockerdErr   error
}

// New names a package's fixtures for this run; pkg labels them
// (fixture.Labels) and prefixes their names.
func New(pkg string) *Env {
	b := make([]byte, 4)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	id := hex.EncodeToString(b)
	return &Env{
		RunID:   id,
		pkg:     pkg,
		Image:   "sbx-test-" + pkg + ":" + id,
		WebName: "sbx-test-" + pkg + "-web-" + id,
	}
}

// SandboxPrefix starts the name of every sandbox and checkpoint the docker
// tests make (then Uniq's run id), so that fixture.SweepDocker finds those
// a killed run left: a sandbox made from a checkpoint carries no test
// label.
const SandboxPrefix = "e2e-"

// Run is a package's TestMain: it clears what killed runs left (their
// sandboxes by SandboxPrefix too), makes the fixtures, runs the tests and
// removes the fixtures. A setup that fails (no daemon) is reported by
// Require in each test. It returns m.Run's
// code.
func (e *Env) Run(m *testing.M) int {
	fixture.SweepDocker(SandboxPrefix)
	err := e.setup()
	defer func() {
		exec.Command("docker", "rm", "-f", e.WebName).Run()
		if e.dockerdImage != "" {
			exec.Command("docker", "rmi", "-f", e.dockerdImage).Run()
		}
		exec.Command("docker", "rmi", "-f", e.Image).Run()
		if e.Workdir != "" {
			os.RemoveAll(e.Workdir)
		}
	}()
	if err != nil {
		e.reason = err.Error()
	} else {
		e.ok = true
	}
	return m.Run()
}

func (e *Env) setup() error {
	if out, err := exec.Command("docker", "version", "--format", "{{.Server.Version}}").CombinedOutput(); err != nil {
		return fmt.Errorf("no Docker daemon: %v: %s", err, out)
	}
	fixture.SweepTemp()
	dir, err := fixture.TempDir("sbx-" + e.pkg + "-e2e-")
	if err != nil {
		return err
	}
	e.Workdir = dir
	e.Binary = filepath.Join(dir, "sbx")
	if err := fixture.BuildStatic(e.Binary, "github.com/sbxhq/sbx/cmd/sbx"); err != nil {
		return err
	}
	ctxDir := filepath.Join(dir, "image")
	if err := os.MkdirAll(ctxDir, 0o755); err != nil {
		return err
	}
	bb, err := exec.LookPath("busybox")
	if err != nil {
		return fmt.Errorf("busybox-static is not installed: %v", err)
	}
	data, err := os.ReadFile(bb)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(ctxDir, "busybox"), data, 0o755); err != nil {
		return err
	}
	df := "FROM scratch\nCOPY busybox /bin/busybox\nRUN [\"/bin/busybox\", \"--install\", \"-s\", \"/bin\"]\nENV PATH=/bin\n"
	if err := os.WriteFile(filepath.Join(ctxDir, "Dockerfile"), []byte(df), 0o644); err != nil {
		return err
	}
	args := append(append([]string{"build", "-q"}, fixture.Labels(e.pkg)...), "-t", e.Image, ctxDir)
	if out, err := exec.Command("docker", args...).CombinedOutput(); err != nil {
		return fmt.Errorf("building the test image: %v: %s", err, out)
	}
	exec.Command("docker", "rm", "-f", e.WebName).Run()
	if e.WebIP, err = fixture.WebServer(e.WebName, e.Image); err != nil {
		return err
	}
	return nil
}

// Require skips t when the setup failed, and fails it instead under
// SBX_E2E=1 (CI).
func (e *Env) Require(t testing.TB) {
	t.Helper()
	if e.ok {
		return
	}
	if os.Getenv("SBX_E2E") == "1" {
		t.Fatalf("SBX_E2E=1 but the docker e2e setup failed: %s", e.reason)
	}
	t.Skipf("no usable Docker daemon (%s); set SBX_E2E=1 to make this a failure", e.reason)
}

// RequireRunsc is Require for a test of gVisor's runsc runtime.
func (e *Env) RequireRunsc(t testing.TB) {
	t.Helper()
	e.requireRuntime(t, "runsc")
}

// requireRuntime is Require for a test of the daemon's runtime name.
func (e *Env) requireRuntime(t testing.TB, name string) {
	t.Helper()
	e.Require(t)
	if fixture.HasRuntime(name) {
		return
	}
	if os.Getenv("SBX_E2E") == "1" {
		t.Fatalf("SBX_E2E=1 but the daemon has no %s runtime (see .ci/run)", name)
	}
	t.Skipf("the daemon has no %s runtime", name)
}

// Uniq names a test's sandbox (or image, or network) for this run.
func (e *Env) Uniq(name string) string { return name + "-" + e.RunID }

// Leftovers lists the containers, volumes and networks that carry sandbox
// name's label ("" when there are none): what a destroy or a failed plan
// must not leave.
func Leftovers(name string) string {
	var left []string
	for _, kind := range [][]string{{"ps", "-a"}, {"volume", "ls"}, {"network", "ls"}} {
		out, _ := exec.Command("docker", append(kind, "-q", "--filter", "label="+driver.LabelSandbox+"="+name)...).Output()
		if s := strings.TrimSpace(string(out)); s != "" {
			left = append(left, kind[0]+": "+strings.Join(strings.Fields(s), " "))
		}
	}
	return strings.Join(left, "; ")
}

// ContainerID is the ID of the container name, failing t when there is
// none.
func ContainerID(t testing.TB, name string) string {
	t.Helper()
	out, err := exec.Command("docker", "inspect", "-f", "{{.Id}}", name).Output()
	if err != nil {
		t.Fatalf("inspect %s: %v", name, err)
	}
	return strings.TrimSpace(string(out))
}

// RemoveBuiltTemplates removes the images sbx built for sandbox name's
// template.build (sbx-template-NAME:HASH).
func RemoveBuiltTemplates(name string) {
	out, _ := exec.Command("docker", "images", "-q", "sbx-template-"+name).Output()
	for _, img := range strings.Fields(string(out)) {
		exec.Command("docker", "rmi", "-f", img).Run()
	}
}
