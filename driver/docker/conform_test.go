package docker

import (
	"context"
	"os/exec"
	"testing"

	"github.com/sbxhq/sbx/driver"
	"github.com/sbxhq/sbx/driver/drivertest"
)

// TestConformance runs the driver conformance suite against the real
// daemon. The docker driver's plan calls summarise Engine API requests
// rather than quote commands, so the suite does not compare them with
// what ran.
func TestConformance(t *testing.T) {
	requireDocker(t)
	drivertest.Run(t, drivertest.Harness{
		New: func(t *testing.T) driver.Backend {
			d := New(Options{Binary: env.binary})
			if _, err := d.Identify(context.Background()); err != nil {
				t.Fatal(err)
			}
			return d
		},
		Head: "template: " + testImage + "\n",
		Name: func(t *testing.T, base string) string { return uniq(base) },
		Cleanup: func(name string) {
			exec.Command("docker", "rm", "-f", containerName(name), egressName(name)).Run()
		},
		Leftovers: func(t *testing.T, name string) []string {
			if left := labelled(name); left != "" {
				return []string{left}
			}
			return nil
		},
	})
}
