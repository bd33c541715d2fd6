// Package versions runs the sbx driver's CLI scripts (cmd/sbx's
// testdata/script/*_sbx.txtar) against the older releases of Docker's sbx
// (clitest.Versions but the newest, which cmd/sbx runs), with sbx built
// from cmd/sbx: the same scripts, in a package of their own so that
// neither comes near go test's per-package limit.
package versions

import (
	"fmt"
	"os"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/sbxhq/sbx/internal/clitest"
)

func TestMain(m *testing.M) {
	testscript.Main(wrap{m}, clitest.Commands)
}

// wrap builds sbx before the tests run (not in the processes testscript
// starts as the fakes), and removes it after.
type wrap struct{ m *testing.M }

func (w wrap) Run() int {
	dir, err := os.MkdirTemp("", "sbx-versions-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	if err := clitest.Build(dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return w.m.Run()
}

func TestScripts(t *testing.T) {
	sbxFiles, _ := clitest.Scripts(t, "../testdata/script")
	for _, v := range clitest.Versions[:len(clitest.Versions)-1] {
		t.Run("sbx-"+v, func(t *testing.T) { testscript.Run(t, clitest.Params(t, sbxFiles, v)) })
	}
}
