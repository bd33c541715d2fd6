// Package clitest runs sbx's CLI scripts (testdata/script/*.txtar of
// cmd/sbx) with testscript against the fakes of Docker's CLIs: the
// parameters every script runs with, the argv command, and the versions of
// Docker's sbx the sbx driver's scripts run against. cmd/sbx runs the
// scripts that are not the sbx driver's, with its own binary as sbx; the
// packages under cmd/sbx/driverscripts run the sbx driver's, one version
// of Docker's sbx each, with sbx built, so that no package comes near go
// test's per-package limit.
package clitest

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/sbxhq/sbx/internal/fakecli"
	"github.com/sbxhq/sbx/internal/fakecli/fakedocker"
	"github.com/sbxhq/sbx/internal/fakecli/fakesbx"
	"github.com/sbxhq/sbx/internal/fixture"
)

// Commands are the fakes of Docker's CLIs, for testscript.Main: Docker's
// own sbx is docker-sbx here, so it never shadows ours; docker has the
// sandbox plugin.
var Commands = map[string]func(){
	"docker-sbx": func() { os.Exit(fakesbx.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr, os.Getenv)) },
	"docker":     func() { os.Exit(fakedocker.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr, os.Getenv)) },
}

// Versions are the releases of Docker's sbx the sbx driver's scenarios
// (testdata/script/*_sbx.txtar) run against: the oldest supported, the
// one the v0.47.0 captures record, and the newest (docker-sbx-evidence.md
// §4). The fake reproduces how they differ (internal/fakecli/fakesbx).
// A script about sbx's own logic that only happens to drive the fake sbx
// (approval, what is printed) is named without the suffix and runs once,
// at the fake's default version, the newest.
var Versions = []string{"0.42.0", "0.47.0", "0.53.0"}

// Scripts are cmd/sbx's scripts, from dir (its testdata/script): the sbx
// driver's (*_sbx.txtar), which run at every version, and the others.
func Scripts(t *testing.T, dir string) (sbxFiles, others []string) {
	all, err := filepath.Glob(filepath.Join(dir, "*.txtar"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range all {
		if strings.HasSuffix(f, "_sbx.txtar") {
			sbxFiles = append(sbxFiles, f)
		} else {
			others = append(others, f)
		}
	}
	return sbxFiles, others
}

// builtEnv names a built sbx binary that scripts run as sbx (build).
const builtEnv = "SBX_CLITEST_BINARY"

// MainBuilt is the TestMain of a package that runs scripts with sbx
// built from cmd/sbx (build) and the fakes of Docker's CLIs.
func MainBuilt(m *testing.M) {
	testscript.Main(built{m}, Commands)
}

// built builds sbx before the tests run (not in the processes testscript
// starts as the fakes), and removes it after.
type built struct{ m *testing.M }

func (b built) Run() int {
	fixture.SweepTemp()
	dir, err := fixture.TempDir("sbx-clitest-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	if err := build(dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return b.m.Run()
}

// DriverScripts runs the sbx driver's scripts of cmd/sbx (dir is its
// testdata/script) against Docker's sbx at version, with sbx built
// (MainBuilt): one package per version, so that none comes near go
// test's per-package limit.
func DriverScripts(t *testing.T, dir, version string) {
	sbxFiles, _ := Scripts(t, dir)
	t.Run("sbx-"+version, func(t *testing.T) { testscript.Run(t, Params(t, sbxFiles, version)) })
}

// build builds sbx into dir and makes it the sbx of the scripts Params
// runs in this process.
func build(dir string) error {
	out := filepath.Join(dir, "sbx")
	if b, err := exec.Command("go", "build", "-o", out, "github.com/sbxhq/sbx/cmd/sbx").CombinedOutput(); err != nil {
		return fmt.Errorf("building sbx: %v: %s", err, b)
	}
	return os.Setenv(builtEnv, out)
}

// Params runs files with the fake sbx at version ("" for its
// default). SBX_NOINPUT tells argvCmd whether that sbx has --no-input.
// The condition [sbx:X.Y.Z] holds when that sbx is X.Y.Z or newer, for
// the few commands that differ by version.
//
// The scripts' work directories live in t's temporary directory, removed
// with it: testscript's own (go-test-script* in $TMPDIR) is left behind
// whenever -run selects only some of the scripts.
func Params(t *testing.T, files []string, version string) testscript.Params {
	v, err := fakecli.ParseVersion(version)
	if version == "" {
		v, err = fakecli.ParseVersion(fakesbx.DefaultVersion)
	}
	if err != nil {
		panic(err)
	}
	noInput := "0"
	if v.AtLeast("0.53.0") {
		noInput = "1"
	}
	return testscript.Params{
		Files:       files,
		WorkdirRoot: t.TempDir(),
		Condition: func(cond string) (bool, error) {
			min, ok := strings.CutPrefix(cond, "sbx:")
			if !ok {
				return false, fmt.Errorf("unknown condition %q", cond)
			}
			if _, err := fakecli.ParseVersion(min); err != nil {
				return false, err
			}
			return v.AtLeast(min), nil
		},
		Setup: func(e *testscript.Env) error {
			bin := strings.Split(e.Getenv("PATH"), string(os.PathListSeparator))[0]
			e.Setenv("HOME", filepath.Join(e.WorkDir, "home"))
			e.Setenv("SBX_STATE_DIR", filepath.Join(e.WorkDir, ".sbx-state"))
			e.Setenv("SBX_DOCKER_SBX", filepath.Join(bin, "docker-sbx"))
			own := filepath.Join(bin, "sbx")
			if built := os.Getenv(builtEnv); built != "" {
				// sbx is a built binary, not the test's own: first on
				// PATH, before testscript's commands.
				e.Setenv("PATH", filepath.Dir(built)+string(os.PathListSeparator)+e.Getenv("PATH"))
				own = built
			}
			e.Setenv("OWN_SBX", own) // this sbx, by path
			if u, err := user.Current(); err == nil {
				e.Setenv("HOST_USER", u.Username) // whom sbx records as a sandbox's owner
			}
			e.Setenv("FAKE_SBX_STATE", filepath.Join(e.WorkDir, ".fake", "sbx.json"))
			e.Setenv("FAKE_SBX_LOG", filepath.Join(e.WorkDir, "sbx.log"))
			e.Setenv("FAKE_SBX_VERSION", version)
			e.Setenv("SBX_NOINPUT", noInput)
			e.Setenv("FAKE_DOCKER_STATE", filepath.Join(e.WorkDir, ".fake", "docker.json"))
			e.Setenv("FAKE_DOCKER_LOG", filepath.Join(e.WorkDir, "docker.log"))
			return os.MkdirAll(filepath.Join(e.WorkDir, ".fake"), 0o755)
		},
		Cmds:          map[string]func(ts *testscript.TestScript, neg bool, args []string){"argv": argvCmd},
		UpdateScripts: os.Getenv("SBX_UPDATE_SCRIPTS") == "1",
	}
}

// argvCmd prints a fake CLI's argv log (one JSON array per line) as one
// shell-quoted command per line, with $WORK and temporary env-file names,
// the loop's per-iteration pid files and the private archives of
// checkpoints ($ARCHIVE) replaced so scripts can cmp the
// exact, ordered commands sbx issued:
//
//	argv sbx.log
//
// It leaves out sbx's global --no-input, so one expected list serves every
// version, after checking where it stands: first, on exactly the commands
// the driver runs that change something, and only when the version has the
// flag ($SBX_NOINPUT, set per version by Params).
func argvCmd(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: argv LOGFILE")
	}
	data := ts.ReadFile(args[0])
	work := ts.Getenv("WORK")
	expectNoInput := ts.Getenv("SBX_NOINPUT") == "1"
	tmpEnv := regexp.MustCompile(`^.*/sbx-env-[0-9]+$`)
	archive := regexp.MustCompile(`^.*/sbx-(checkpoint|import)-[0-9]+/checkpoint\.tar$`)
	pidfile := regexp.MustCompile(`^/tmp/sbx-loop-[0-9TZ]+-[0-9a-f]+-([0-9]+)\.pid$`)
	for _, line := range strings.Split(strings.TrimSpace(data), "\n") {
		if line == "" {
			continue
		}
		var argv []string
		if err := json.Unmarshal([]byte(line), &argv); err != nil {
			ts.Fatalf("%s: %v", args[0], err)
		}
		has := len(argv) > 0 && argv[0] == "--no-input"
		if has {
			argv = argv[1:]
		}
		switch {
		case slices.Contains(argv, "--no-input"):
			ts.Fatalf("%s: --no-input is not the first argument", line)
		case has && !expectNoInput:
			ts.Fatalf("%s: --no-input sent to an sbx without it", line)
		case has != (expectNoInput && changes(argv)):
			ts.Fatalf("%s: --no-input on a read, or missing on a change", line)
		}
		for i, a := range argv {
			a = strings.ReplaceAll(a, work, "$WORK")
			a = pidfile.ReplaceAllString(a, "$$PIDFILE$1")
			a = archive.ReplaceAllString(a, "$$ARCHIVE")
			argv[i] = tmpEnv.ReplaceAllString(a, "$$ENVFILE")
		}
		ts.Stdout().Write([]byte(strings.Join(argv, " ") + "\n"))
	}
}

// changes reports whether an argv of Docker's sbx is one of the commands
// the sbx driver runs that change something.
func changes(argv []string) bool {
	if len(argv) == 0 {
		return false
	}
	switch argv[0] {
	case "create", "stop", "rm", "run":
		return true
	case "ports":
		return slices.Contains(argv, "--publish") || slices.Contains(argv, "--unpublish")
	case "policy":
		return len(argv) > 1 && (argv[1] == "allow" || argv[1] == "deny" || argv[1] == "rm")
	case "template":
		return len(argv) > 1 && (argv[1] == "load" || argv[1] == "save" || argv[1] == "rm")
	case "secret":
		return len(argv) > 1 && (argv[1] == "set" || argv[1] == "set-custom" || argv[1] == "rm")
	}
	return false
}
