package docker

import (
	"context"
	"os/exec"
	"testing"

	"github.com/sbxhq/sbx/driver"
	"github.com/sbxhq/sbx/driver/drivertest"
	"github.com/sbxhq/sbx/internal/dockertest"
)

// TestConformance runs the driver conformance suite against the real
// daemon. The docker driver's plan calls summarise Engine API requests
// rather than quote commands, so the suite does not compare them with
// what ran.
func TestConformance(t *testing.T) {
	env.Require(t)
	drivertest.Run(t, drivertest.Harness{
		New: func(t *testing.T) driver.Backend {
			d := New(Options{Binary: env.Binary})
			if _, err := d.Identify(context.Background()); err != nil {
				t.Fatal(err)
			}
			return d
		},
		Head: "template: " + env.Image + "\n",
		Name: func(t *testing.T, base string) string { return env.Uniq(base) },
		Cleanup: func(name string) {
			exec.Command("docker", "rm", "-f", ContainerName(name), EgressName(name)).Run()
		},
		Leftovers: func(t *testing.T, name string) []string {
			if left := dockertest.Leftovers(name); left != "" {
				return []string{left}
			}
			return nil
		},
	})
}
