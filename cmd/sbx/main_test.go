package main

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"
	"github.com/sbxhq/sbx/internal/clitest"
)

func TestMain(m *testing.M) {
	cmds := map[string]func(){"sbx": func() { os.Exit(run()) }}
	maps.Copy(cmds, clitest.Commands)
	testscript.Main(m, cmds)
}

// TestScripts runs the end-to-end CLI scripts in testdata/script, one per
// behaviour, named after the verb: all but the sbx driver's, which the
// packages under driverscripts run at each of clitest.Versions. Each
// script gets its own state dir and fake backends; argv logs are in
// $WORK/sbx.log and $WORK/docker.log.
func TestScripts(t *testing.T) {
	_, others := clitest.Scripts(t, "testdata/script")
	t.Run("default", func(t *testing.T) { testscript.Run(t, clitest.Params(t, others, "")) })
}

// TestEveryVersionHasItsPackage: the sbx driver's scripts run in one
// package per version of Docker's sbx (driverscripts/sbxXYZ); a version
// added to clitest.Versions without its package would never run.
func TestEveryVersionHasItsPackage(t *testing.T) {
	for i, v := range clitest.Versions {
		dir := filepath.Join("driverscripts", "sbx"+strings.ReplaceAll(v, ".", "")[:3])
		b, err := os.ReadFile(filepath.Join(dir, "scripts_test.go"))
		if err != nil {
			t.Errorf("version %s: %v", v, err)
			continue
		}
		if want := fmt.Sprintf("clitest.Versions[%d]", i); !strings.Contains(string(b), want) {
			t.Errorf("%s does not run %s", dir, want)
		}
	}
}
