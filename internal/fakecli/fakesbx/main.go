package fakesbx

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/sbxhq/sbx/internal/fakecli"
	"github.com/sbxhq/sbx/internal/fakecli/fakestate"
)

// DefaultVersion is the newest sbx release in docker-sandboxes-cli.md §0.
const DefaultVersion = "0.53.0"

// cliError is an error with its own exit status. Messages are printed with
// sbx's "ERROR: " prefix (docker-sandboxes-cli.md §2.11, issue #290).
type cliError struct {
	msg  string
	code int
}

func (e *cliError) Error() string { return e.msg }

// errHelp ends a command after printing its help; exit status 0.
var errHelp = errors.New("help")

type app struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	getenv         func(string) string
	store          fakestate.Store
	now            time.Time
	version        fakecli.Version
	path           []string
	noInput        bool
	cloud          bool
}

type command struct {
	path []string
	run  func(a *app, args []string) error
	// hidden commands are test plumbing: not logged, not counted.
	hidden bool
}

func commands() []command {
	return []command{
		{path: []string{"version"}, run: (*app).versionCmd},
		{path: []string{"ls"}, run: (*app).ls},
		{path: []string{"list"}, run: (*app).ls},
		{path: []string{"inspect"}, run: (*app).inspect},
		{path: []string{"create"}, run: (*app).create},
		{path: []string{"run"}, run: (*app).run},
		{path: []string{"stop"}, run: (*app).stop},
		{path: []string{"rm"}, run: (*app).rm},
		{path: []string{"exec"}, run: (*app).exec},
		{path: []string{"ports"}, run: (*app).ports},
		{path: []string{"reset"}, run: (*app).reset},
		{path: []string{"policy", "allow", "network"}, run: (*app).policyAdd},
		{path: []string{"policy", "deny", "network"}, run: (*app).policyAdd},
		{path: []string{"policy", "rm", "network"}, run: (*app).policyRm},
		{path: []string{"policy", "check", "network"}, run: (*app).policyCheck},
		{path: []string{"policy", "ls"}, run: (*app).policyLs},
		{path: []string{"policy", "log"}, run: (*app).policyLog},
		{path: []string{"policy", "init"}, run: (*app).policyInit},
		{path: []string{"policy", "set-default"}, run: (*app).policyInit},
		{path: []string{"policy", "reset"}, run: (*app).policyReset},
		{path: []string{"secret", "set"}, run: (*app).secretSet},
		{path: []string{"secret", "set-custom"}, run: (*app).secretSetCustom},
		{path: []string{"secret", "ls"}, run: (*app).secretLs},
		{path: []string{"secret", "rm"}, run: (*app).secretRm},
		{path: []string{"fake-add-log"}, run: (*app).fakeAddLog, hidden: true},
		{path: []string{"fake-hide"}, run: (*app).fakeHide, hidden: true},
		{path: []string{"fake-set-status"}, run: (*app).fakeSetStatus, hidden: true},
	}
}

// documented lists the rest of the documented command tree
// (docker-sandboxes-cli.md §1.3), which the fake does not implement.
var documented = []string{"attach", "completion", "cp", "daemon", "diagnose", "env", "kit", "login",
	"logout", "mcp", "mount", "move", "prune", "settings", "setup", "skills", "template", "ttl", "tui",
	"umount", "volume", "policy inspect", "secret import"}

var (
	globalBool  = []string{"--no-input", "-D", "--debug", "--cloud"}
	globalValue = []string{"--cloud-api-url"}
)

// Main runs the fake `sbx` with args (argv without argv[0]) and returns the
// exit status.
func Main(args []string, stdin io.Reader, stdout, stderr io.Writer, getenv func(string) string) int {
	cmds := commands()
	known := make([][]string, 0, len(cmds)+len(documented))
	for _, c := range cmds {
		known = append(known, c.path)
	}
	for _, d := range documented {
		known = append(known, strings.Fields(d))
	}
	path, rest := fakecli.Resolve(args, known, globalBool, globalValue)
	var cmd *command
	for i := range cmds {
		if slices.Equal(cmds[i].path, path) {
			cmd = &cmds[i]
		}
	}
	if cmd == nil || !cmd.hidden {
		if err := fakecli.LogArgv(getenv("FAKE_SBX_LOG"), args); err != nil {
			fmt.Fprintf(stderr, "fake sbx: log: %v\n", err)
			return 1
		}
	}
	a := &app{stdin: stdin, stdout: stdout, stderr: stderr, getenv: getenv, path: path}
	code, err := a.main(cmd, path, rest)
	var ce *cliError
	switch {
	case err == nil:
		return code
	case errors.Is(err, errHelp):
		return 0
	case errors.As(err, &ce):
		fmt.Fprintf(stderr, "ERROR: %s\n", ce.msg)
		return ce.code
	default:
		fmt.Fprintf(stderr, "ERROR: %v\n", err)
		return 1
	}
}

func (a *app) main(cmd *command, path, rest []string) (int, error) {
	var err error
	a.now, err = fakecli.Now(a.getenv)
	if err != nil {
		return 1, err
	}
	v := a.getenv("FAKE_SBX_VERSION")
	if v == "" {
		v = DefaultVersion
	}
	if a.version, err = fakecli.ParseVersion(v); err != nil {
		return 1, fmt.Errorf("fake sbx: FAKE_SBX_VERSION: %v", err)
	}
	statePath := a.getenv("FAKE_SBX_STATE")
	if statePath == "" {
		return 1, errors.New("fake sbx: FAKE_SBX_STATE is not set")
	}
	a.store = fakestate.Store{Path: statePath}
	if cmd == nil {
		return 1, a.unknown(path, rest)
	}
	var runErr error
	if !cmd.hidden {
		rules, err := fakecli.ParseFail(a.getenv("FAKE_SBX_FAIL"))
		if err != nil {
			return 1, fmt.Errorf("fake sbx: FAKE_SBX_FAIL: %v", err)
		}
		var fail bool
		if err := a.store.Update(func(st *fakestate.State) error {
			fail = fakecli.CountCall(st, path, rules)
			return nil
		}); err != nil {
			return 1, err
		}
		if fail {
			runErr = a.injected(path, rest)
		}
	}
	if runErr == nil {
		runErr = cmd.run(a, rest)
	}
	var ec *exitCode
	if errors.As(runErr, &ec) {
		return ec.code, nil
	}
	return 0, runErr
}

// exitCode ends a command with a status and no message (exec).
type exitCode struct{ code int }

func (e *exitCode) Error() string { return fmt.Sprintf("exit status %d", e.code) }

// unknown reports a verb the fake does not have. Cobra's wording with sbx's
// ERROR prefix; the exact text is UNCONFIRMED (docker-sandboxes-cli.md §9).
func (a *app) unknown(path, rest []string) error {
	if len(path) == 0 && len(rest) == 0 {
		// §1.3: `sbx` with no command opens the dashboard (sbx tui).
		return &cliError{msg: "fake sbx: the interactive dashboard (sbx tui) is not implemented", code: 1}
	}
	if len(path) == 0 {
		first := rest[0]
		if first == "-h" || first == "--help" {
			fmt.Fprintln(a.stdout, usage)
			return errHelp
		}
		if strings.HasPrefix(first, "-") {
			return &cliError{msg: "unknown flag: " + first, code: 1}
		}
		return &cliError{msg: fmt.Sprintf("unknown command %q for \"sbx\"\nRun 'sbx --help' for usage.", first), code: 1}
	}
	if slices.Contains(documented, path[0]) || slices.Contains(documented, strings.Join(path, " ")) {
		return &cliError{msg: fmt.Sprintf("fake sbx: %q is not implemented", "sbx "+strings.Join(path, " ")), code: 1}
	}
	for _, r := range rest {
		if !strings.HasPrefix(r, "-") {
			return &cliError{msg: fmt.Sprintf("unknown command %q for \"sbx %s\"\nRun 'sbx %s --help' for usage.", r, strings.Join(path, " "), strings.Join(path, " ")), code: 1}
		}
	}
	return &cliError{msg: fmt.Sprintf("fake sbx: %q is not implemented", "sbx "+strings.Join(path, " ")), code: 1}
}

// injected is the error for $FAKE_SBX_FAIL. create and run use the daemon
// 500s recorded in docker-sandboxes-cli.md §2.11.
func (a *app) injected(path, rest []string) error {
	name := ""
	for i, r := range rest {
		if v, ok := strings.CutPrefix(r, "--name="); ok {
			name = v
			break
		}
		if r == "--name" && i+1 < len(rest) {
			name = rest[i+1]
			break
		}
		if name == "" && !strings.HasPrefix(r, "-") {
			name = r
		}
	}
	switch path[0] {
	case "create":
		return &cliError{msg: "failed to create sandbox: request failed: 500 Internal Server Error: failed to create network", code: 1}
	case "run":
		// §2.11 prints this one without the ERROR prefix.
		fmt.Fprintf(a.stderr, "Failed to start sandbox %q: start runtime %q: start runtime: request failed: 500 Internal Server Error: failed to start runtime\n", name, name)
		return &exitCode{code: 1}
	}
	return &cliError{msg: fmt.Sprintf("%s: request failed: 500 Internal Server Error: injected by FAKE_SBX_FAIL", strings.Join(path, " ")), code: 1}
}

const usage = `Docker Sandboxes (fake)

Usage:
  sbx [command]

Available Commands:
  create      Create a sandbox
  exec        Run a command in a sandbox
  inspect     Show a sandbox
  ls          List sandboxes
  policy      Manage network policies
  ports       Manage published ports
  reset       Reset Docker Sandboxes
  rm          Remove sandboxes
  run         Run an agent in a sandbox
  secret      Manage secrets
  stop        Stop sandboxes
  version     Show the version`

// parse adds the global options (docker-sandboxes-cli.md §1.3) to fs and
// parses args.
func (a *app) parse(fs *pflag.FlagSet, args []string) ([]string, error) {
	fs.BoolVar(&a.noInput, "no-input", false, "Never prompt; commands that need an answer fail with the command to run instead")
	fs.BoolP("debug", "D", false, "Enable debug logging")
	fs.BoolVar(&a.cloud, "cloud", false, "Dispatch to Docker Cloud Sandboxes API instead of local sandboxd")
	fs.String("cloud-api-url", "", "Cloud API URL")
	help := fs.BoolP("help", "h", false, "help")
	if err := fs.Parse(args); err != nil {
		return nil, &cliError{msg: err.Error(), code: 1}
	}
	if *help {
		fmt.Fprintf(a.stdout, "Usage:\n  sbx %s [flags]\n", strings.Join(a.path, " "))
		return nil, errHelp
	}
	if a.cloud {
		return nil, &cliError{msg: "fake sbx: --cloud is not implemented", code: 1}
	}
	return fs.Args(), nil
}

// args checks the positional count the way cobra words it.
func argsCheck(args []string, min, max int) error {
	switch {
	case len(args) < min && min == max:
		return &cliError{msg: fmt.Sprintf("accepts %d arg(s), received %d", min, len(args)), code: 1}
	case len(args) < min:
		return &cliError{msg: fmt.Sprintf("requires at least %d arg(s), only received %d", min, len(args)), code: 1}
	case max >= 0 && len(args) > max && min == max:
		return &cliError{msg: fmt.Sprintf("accepts %d arg(s), received %d", min, len(args)), code: 1}
	case max >= 0 && len(args) > max:
		return &cliError{msg: fmt.Sprintf("accepts at most %d arg(s), received %d", max, len(args)), code: 1}
	}
	return nil
}

// notFound is the not-found error of docker-sandboxes-cli.md §2.11: the
// issue #504 text before 0.42.0, the standardised sentence after (the
// "ERROR: " prefix of the new form is UNCONFIRMED but kept, as every other
// recorded sbx error has it).
func (a *app) notFound(name string) error {
	if a.version.AtLeast("0.42.0") {
		return &cliError{msg: fmt.Sprintf("sandbox '%s' not found", name), code: 1}
	}
	return &cliError{msg: fmt.Sprintf("no sandbox named '%s'\n\nTo create one:\n  sbx create AGENT WORKSPACE", name), code: 1}
}

// lookup returns the sandbox or the not-found error.
func (a *app) lookup(st *fakestate.State, name string) (*fakestate.Sandbox, error) {
	sb := st.Find(name)
	if sb == nil {
		return nil, a.notFound(name)
	}
	return sb, nil
}

// confirm asks question unless force; with --no-input it fails naming the
// command to run instead (§1.3 --no-input); a declined or unanswered prompt
// exits non-zero (0.25.0, 0.45.0). Wording UNCONFIRMED.
func (a *app) confirm(force bool, question, instead string) error {
	if force {
		return nil
	}
	if a.noInput {
		return &cliError{msg: fmt.Sprintf("confirmation required; run: %s", instead), code: 1}
	}
	fmt.Fprintf(a.stdout, "%s [y/N]: ", question)
	line, _ := bufio.NewReader(a.stdin).ReadString('\n')
	fmt.Fprintln(a.stdout)
	switch strings.ToLower(strings.TrimSpace(line)) {
	case "y", "yes":
		return nil
	}
	return &cliError{msg: "cancelled", code: 1}
}

// noise returns the non-JSON lines $FAKE_SBX_NOISE asks for: the daemon
// start lines of issue #201 (§2.6, verbatim) and an update notice (§8; its
// text is UNCONFIRMED).
func (a *app) noise() fakecli.Noise {
	var n fakecli.Noise
	mode := a.getenv("FAKE_SBX_NOISE")
	if mode == "1" || mode == "both" || mode == "before" {
		n.Before = []string{
			"Starting sandboxd daemon...",
			`Daemon started (PID: 55276, socket: \\.\pipe\docker_kaname_sandboxd)`,
			`Logs: C:\Users\user\AppData\Local\DockerSandboxes\sandboxes\state\sandboxd\daemon.log`,
		}
	}
	if mode == "1" || mode == "both" || mode == "after" {
		n.After = []string{"A new version of sbx is available: v99.0.0 (you have v" + a.version.String() + "). Run 'brew upgrade docker/tap/sbx' to update."}
	}
	return n
}

func (a *app) json(v any) error { return fakecli.JSON(a.stdout, v, a.noise()) }

// format resolves --json / --format into "table" or "json".
func format(jsonFlag bool, f string) (string, error) {
	if jsonFlag {
		return "json", nil
	}
	switch f {
	case "", "table":
		return "table", nil
	case "json":
		return "json", nil
	case "yaml":
		return "", &cliError{msg: "fake sbx: --format yaml is not implemented", code: 1}
	}
	return "", &cliError{msg: fmt.Sprintf("invalid format %q: must be table, json or yaml", f), code: 1}
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
