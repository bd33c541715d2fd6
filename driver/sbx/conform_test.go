package sbx

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/sbxhq/sbx/driver"
	"github.com/sbxhq/sbx/driver/drivertest"
	"github.com/sbxhq/sbx/driver/runner"
	"github.com/sbxhq/sbx/internal/fakecli/fakesbx"
)

// fakeEnv, set in a command's environment, makes this test binary the fake
// of Docker's sbx (internal/fakecli/fakesbx) instead of running tests.
const fakeEnv = "SBX_DRIVER_TEST_FAKE"

func TestMain(m *testing.M) {
	if os.Getenv(fakeEnv) == "sbx" {
		os.Exit(fakesbx.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr, os.Getenv))
	}
	os.Exit(m.Run())
}

// versions are the releases of Docker's sbx the driver supports and the
// fake reproduces: the oldest, the captured one, the newest (evidence §4).
var versions = []string{"0.42.0", "0.47.0", "0.53.0"}

// TestConformance runs the driver conformance suite against the fake of
// Docker's sbx at each version, checking that apply runs exactly the
// commands each plan shows.
func TestConformance(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range versions {
		t.Run(v, func(t *testing.T) {
			dir := t.TempDir()
			log := filepath.Join(dir, "argv.log")
			env := []string{fakeEnv + "=sbx", "FAKE_SBX_VERSION=" + v,
				"FAKE_SBX_STATE=" + filepath.Join(dir, "state.json"), "FAKE_SBX_LOG=" + log,
				"HOME=" + dir, "PATH=" + os.Getenv("PATH")}
			// Docker's sbx asks for a global policy before the first
			// sandbox (evidence §2.1): the user's one-time setup.
			init := &runner.Runner{Env: env}
			if _, err := init.Output(context.Background(), self, "policy", "init", "deny-all"); err != nil {
				t.Fatal(err)
			}
			drivertest.Run(t, drivertest.Harness{
				New: func(t *testing.T) driver.Backend {
					d := New(Options{Runner: &runner.Runner{Env: env}, Binary: self})
					if _, err := d.Identify(context.Background()); err != nil {
						t.Fatal(err)
					}
					return d
				},
				Head:     "template: docker/sandbox-templates:shell\n",
				Name:     func(t *testing.T, base string) string { return base },
				Commands: drivertest.ArgvLog(t, log, self),
			})
		})
	}
}
