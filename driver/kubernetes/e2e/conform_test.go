package e2e

import (
	"context"
	"testing"

	"github.com/sbxhq/sbx/driver"
	"github.com/sbxhq/sbx/driver/drivertest"
)

// TestConformance runs the driver conformance suite on the test cluster,
// with NetworkPolicy enforcement emulated (so the sandbox's egress is
// enforced, as the suite's files ask by default). The namespace is the
// test's own, so the suite's base name is unique to the run; Leftovers
// lists every kind the driver makes, labelled for the sandbox. The plan's
// create call summarises several commands, so the suite does not compare
// the plan's calls with what ran.
func TestConformance(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	c.enforce()
	d := c.driver()
	drivertest.Run(t, drivertest.Harness{
		New: func(t *testing.T) driver.Backend {
			if _, err := d.Identify(context.Background()); err != nil {
				t.Fatal(err)
			}
			return d
		},
		Head:      c.Head(),
		Name:      func(t *testing.T, base string) string { return base },
		Leftovers: func(t *testing.T, name string) []string { return c.Labelled(name) },
	})
}
