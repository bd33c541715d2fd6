// Package sbx053 runs the sbx driver's CLI scripts (cmd/sbx's
// testdata/script/*_sbx.txtar) against Docker's sbx 0.53.0
// (clitest.Versions[2]), with sbx built from cmd/sbx: one version per
// package, so that none comes near go test's per-package limit.
package sbx053

import (
	"testing"

	"github.com/sbxhq/sbx/internal/clitest"
)

func TestMain(m *testing.M) { clitest.MainBuilt(m) }

func TestScripts(t *testing.T) {
	clitest.DriverScripts(t, "../../testdata/script", clitest.Versions[2])
}
