package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/sbxhq/sbx/internal/fakecli/fakedocker"
	"github.com/sbxhq/sbx/internal/fakecli/fakesbx"
)

func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){
		"sbx": func() { os.Exit(run()) },
		// Fakes of Docker's CLIs (internal/fakecli): Docker's own sbx is
		// docker-sbx here, so it never shadows ours; docker has the sandbox
		// plugin.
		"docker-sbx": func() { os.Exit(fakesbx.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr, os.Getenv)) },
		"docker":     func() { os.Exit(fakedocker.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr, os.Getenv)) },
	})
}

// TestScripts runs the end-to-end CLI scripts in testdata/script, one per
// behaviour, named after the verb. Each script gets its own state dir and
// fake backends; argv logs are in $WORK/sbx.log and $WORK/docker.log.
func TestScripts(t *testing.T) {
	testscript.Run(t, testscript.Params{
		Dir: "testdata/script",
		Setup: func(e *testscript.Env) error {
			bin := strings.Split(e.Getenv("PATH"), string(os.PathListSeparator))[0]
			e.Setenv("HOME", filepath.Join(e.WorkDir, "home"))
			e.Setenv("SBX_STATE_DIR", filepath.Join(e.WorkDir, ".sbx-state"))
			e.Setenv("SBX_DOCKER_SBX", filepath.Join(bin, "docker-sbx"))
			e.Setenv("FAKE_SBX_STATE", filepath.Join(e.WorkDir, ".fake", "sbx.json"))
			e.Setenv("FAKE_SBX_LOG", filepath.Join(e.WorkDir, "sbx.log"))
			e.Setenv("FAKE_DOCKER_STATE", filepath.Join(e.WorkDir, ".fake", "docker.json"))
			e.Setenv("FAKE_DOCKER_LOG", filepath.Join(e.WorkDir, "docker.log"))
			return os.MkdirAll(filepath.Join(e.WorkDir, ".fake"), 0o755)
		},
		Cmds:          map[string]func(ts *testscript.TestScript, neg bool, args []string){"argv": argvCmd},
		UpdateScripts: os.Getenv("SBX_UPDATE_SCRIPTS") == "1",
	})
}

// argvCmd prints a fake CLI's argv log (one JSON array per line) as one
// shell-quoted command per line, with $WORK and temporary env-file names
// and the loop's per-iteration pid files replaced so scripts can cmp the
// exact, ordered commands sbx issued:
//
//	argv sbx.log
func argvCmd(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: argv LOGFILE")
	}
	data := ts.ReadFile(args[0])
	work := ts.Getenv("WORK")
	tmpEnv := regexp.MustCompile(`^.*/sbx-env-[0-9]+$`)
	pidfile := regexp.MustCompile(`^/tmp/sbx-loop-[0-9TZ]+-[0-9a-f]+-([0-9]+)\.pid$`)
	for _, line := range strings.Split(strings.TrimSpace(data), "\n") {
		if line == "" {
			continue
		}
		var argv []string
		if err := json.Unmarshal([]byte(line), &argv); err != nil {
			ts.Fatalf("%s: %v", args[0], err)
		}
		for i, a := range argv {
			a = strings.ReplaceAll(a, work, "$WORK")
			a = pidfile.ReplaceAllString(a, "$$PIDFILE$1")
			argv[i] = tmpEnv.ReplaceAllString(a, "$$ENVFILE")
		}
		ts.Stdout().Write([]byte(strings.Join(argv, " ") + "\n"))
	}
}
