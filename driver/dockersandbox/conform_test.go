package dockersandbox

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/sbxhq/sbx/driver"
	"github.com/sbxhq/sbx/driver/drivertest"
	"github.com/sbxhq/sbx/driver/runner"
	"github.com/sbxhq/sbx/internal/fakecli/fakedocker"
)

// fakeEnv, set in a command's environment, makes this test binary the fake
// docker with the sandbox plugin (internal/fakecli/fakedocker) instead of
// running tests.
const fakeEnv = "SBX_DRIVER_TEST_FAKE"

func TestMain(m *testing.M) {
	if os.Getenv(fakeEnv) == "docker" {
		os.Exit(fakedocker.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr, os.Getenv))
	}
	os.Exit(m.Run())
}

// TestConformance runs the driver conformance suite against the fake
// plugin, checking that apply runs exactly the commands each plan shows.
func TestConformance(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	log := filepath.Join(dir, "argv.log")
	env := []string{fakeEnv + "=docker", "FAKE_DOCKER_STATE=" + filepath.Join(dir, "state.json"),
		"FAKE_DOCKER_LOG=" + log, "HOME=" + dir, "PATH=" + os.Getenv("PATH")}
	drivertest.Run(t, drivertest.Harness{
		New: func(t *testing.T) driver.Backend {
			d := New(Options{Runner: &runner.Runner{Env: env}, Docker: self})
			if _, err := d.Identify(context.Background()); err != nil {
				t.Fatal(err)
			}
			return d
		},
		Head:     "template: docker/sandbox-templates:shell\n",
		Name:     func(t *testing.T, base string) string { return base },
		Commands: drivertest.ArgvLog(t, log, self),
	})
}
