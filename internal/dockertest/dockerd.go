package dockertest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sbxhq/sbx/internal/fixture"
)

// GVisorRuntime is the name of the runtime the tests of a Docker daemon
// of the agent's own run under: a gVisor recent enough for Docker in
// gVisor (Debian bookworm's runsc, of 2022, has no devices cgroup, which
// dockerd needs). .ci/run registers it: runsc built from gVisor's Go
// module at a pinned version.
const GVisorRuntime = "gvisor"

// RequireGVisorRuntime is Require for a test that needs GVisorRuntime.
func (e *Env) RequireGVisorRuntime(t testing.TB) {
	t.Helper()
	e.requireRuntime(t, GVisorRuntime)
}

// dockerBinaries are what the daemon image holds of this machine's
// Docker (Debian's docker.io and containerd, which CI installs): the
// daemon, the runtime it starts containers with, and the CLI.
var dockerBinaries = []string{"dockerd", "containerd", "containerd-shim-runc-v2", "runc", "docker"}

// DockerdImage is an image shaped like docker:dind (which no registry
// here serves), built once per run and removed by Run: the busybox test
// image with this machine's dockerd, containerd, runc and docker CLI in
// /usr/local/bin and the shared libraries they load at the paths ldd
// names.
func (e *Env) DockerdImage(t testing.TB) string {
	t.Helper()
	e.dockerd.Do(func() { e.dockerdImage, e.dockerdErr = e.buildDockerdImage() })
	if e.dockerdErr != nil {
		t.Fatal(e.dockerdErr)
	}
	return e.dockerdImage
}

func (e *Env) buildDockerdImage() (string, error) {
	dir, err := os.MkdirTemp(e.Workdir, "dockerd-image-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(dir)
	root := filepath.Join(dir, "root")
	copyFile := func(src, dst string) error {
		data, err := os.ReadFile(src)
		if err != nil {
			return err
		}
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		return os.WriteFile(dst, data, 0o755)
	}
	libs := map[string]bool{}
	for _, name := range dockerBinaries {
		p, err := exec.LookPath(name)
		if err != nil {
			return "", fmt.Errorf("%s is not installed (Debian's docker.io): %v", name, err)
		}
		if err := copyFile(p, filepath.Join(root, "usr/local/bin", name)); err != nil {
			return "", err
		}
		// ldd fails for a static binary, which needs nothing.
		out, _ := exec.Command("ldd", p).Output()
		for _, l := range sharedLibraries(string(out)) {
			libs[l] = true
		}
	}
	for l := range libs {
		if err := copyFile(l, filepath.Join(root, l)); err != nil {
			return "", err
		}
	}
	df := fmt.Sprintf("FROM %s\nCOPY root/ /\nENV PATH=/usr/local/bin:/bin\n", e.Image)
	if err := os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte(df), 0o644); err != nil {
		return "", err
	}
	image := "sbx-test-" + e.pkg + "-dockerd:" + e.RunID
	args := append(append([]string{"build", "-q"}, fixture.Labels(e.pkg)...), "-t", image, dir)
	if out, err := exec.Command("docker", args...).CombinedOutput(); err != nil {
		return "", fmt.Errorf("building the daemon's image: %v: %s", err, out)
	}
	return image, nil
}

// sharedLibraries are the absolute paths in ldd's output: each
// "NAME => PATH (ADDRESS)" and the loader's "PATH (ADDRESS)".
func sharedLibraries(ldd string) []string {
	var out []string
	for _, line := range strings.Split(ldd, "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) == 4 && f[1] == "=>" && filepath.IsAbs(f[2]):
			out = append(out, f[2])
		case len(f) == 2 && filepath.IsAbs(f[0]):
			out = append(out, f[0])
		}
	}
	return out
}
