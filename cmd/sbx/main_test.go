package main

import (
	"maps"
	"os"
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
// behaviour, named after the verb: the others once, and the sbx driver's
// at the newest of clitest.Versions (cmd/sbx/versions runs them at the
// older ones). Each script gets its own state dir and fake backends; argv
// logs are in $WORK/sbx.log and $WORK/docker.log.
func TestScripts(t *testing.T) {
	sbxFiles, others := clitest.Scripts(t, "testdata/script")
	t.Run("default", func(t *testing.T) { testscript.Run(t, clitest.Params(t, others, "")) })
	v := clitest.Versions[len(clitest.Versions)-1]
	t.Run("sbx-"+v, func(t *testing.T) { testscript.Run(t, clitest.Params(t, sbxFiles, v)) })
}
