package k8stest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/sbxhq/sbx/internal/fixture"
)

// RunID names, for this run of a test process, what its tests make
// outside their namespaces (images, registries' repositories, sandbox
// names a CLI test picks): unique, so that runs sharing the cluster and
// the Docker daemon never meet.
var RunID = randomHex(4)

// HelperBuilder builds the kubernetes driver's helper image from a static
// sbx under tag, with labels (docker build --label flags) on it:
// kubernetes.BuildHelperImage, which this package cannot import (the
// driver's own tests import this package).
type HelperBuilder func(ctx context.Context, binary, tag string, labels ...string) error

// sbx is the test process's static sbx and its helper image: built once,
// loaded into the cluster once, for all of the package's tests; Main
// removes them.
var sbx struct {
	once   sync.Once
	err    error
	dir    string
	binary string
	helper string

	load       sync.Once
	loadErr    error
	loadedInto *Env // the cluster the helper image was loaded into
}

// Sbx builds the static sbx and its helper image (tagged for this run and
// labelled for pkg, fixture.Labels) once per test process, loads the image
// into the cluster once, and returns both. The package's TestMain is Main,
// which removes them.
func Sbx(t testing.TB, e *Env, pkg string, build HelperBuilder) (binary, helper string) {
	t.Helper()
	sbx.once.Do(func() {
		sbx.dir, sbx.err = fixture.TempDir("sbx-k8s-e2e-")
		if sbx.err != nil {
			return
		}
		sbx.binary = filepath.Join(sbx.dir, "sbx")
		if sbx.err = fixture.BuildStatic(sbx.binary, "github.com/sbxhq/sbx/cmd/sbx"); sbx.err != nil {
			return
		}
		sbx.helper = "sbx-helper-test:" + RunID
		sbx.err = build(context.Background(), sbx.binary, sbx.helper, fixture.Labels(pkg)...)
	})
	if sbx.err != nil {
		t.Fatal(sbx.err)
	}
	sbx.load.Do(func() {
		// Set before the load: one that fails half way may still have
		// left the image in the cluster.
		sbx.loadedInto = e
		sbx.loadErr = e.LoadImageCtx(context.Background(), sbx.helper)
	})
	if sbx.loadErr != nil {
		t.Fatal(sbx.loadErr)
	}
	return sbx.binary, sbx.helper
}

// Main is the TestMain of a package of cluster tests: it removes what
// killed runs left in docker and the temporary directory, runs the tests,
// then removes the helper image (from the cluster and docker) and the
// static sbx that Sbx made.
func Main(m *testing.M) {
	fixture.SweepDocker()
	fixture.SweepTemp()
	code := m.Run()
	if sbx.loadedInto != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		if err := sbx.loadedInto.UnloadImage(ctx, sbx.helper); err != nil {
			fmt.Fprintf(os.Stderr, "removing the helper image from the cluster: %v\n", err)
			code = 1
		}
		cancel()
	}
	if sbx.helper != "" {
		exec.Command("docker", "rmi", "-f", sbx.helper).Run()
	}
	if sbx.dir != "" {
		os.RemoveAll(sbx.dir)
	}
	os.Exit(code)
}
