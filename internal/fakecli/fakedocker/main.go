package fakedocker

import (
	"bufio"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/sbxhq/sbx/internal/fakecli"
	"github.com/sbxhq/sbx/internal/fakecli/fakestate"
)

// DefaultVersion is the newest plugin version the reference shows working
// (v0.12.0, the [3P] conflicts register, docker-sandboxes-cli.md §11);
// v0.13.0 is only seen in Desktop 4.80, where the command prints a notice
// (§0).
const DefaultVersion = "0.12.0"

// dockerError is an error printed as docker prints them: the bare message
// (the docker CLI's plugin runner prints err and exits with its status).
type dockerError struct {
	msg  string
	code int
}

func (e *dockerError) Error() string { return e.msg }

func errf(format string, args ...any) error {
	return &dockerError{msg: fmt.Sprintf(format, args...), code: 1}
}

var errHelp = errors.New("help")

type app struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	getenv         func(string) string
	store          fakestate.Store
	now            time.Time
	version        fakecli.Version
	path           []string
}

type command struct {
	path   []string
	run    func(a *app, args []string) error
	hidden bool
}

// commands is the G2 tree (docker-sandboxes-cli.md §1.2): create, exec, ls,
// network (log, proxy), reset, rm, run, save, stop, version. No inspect.
func commands() []command {
	return []command{
		{path: []string{"create"}, run: (*app).create},
		{path: []string{"run"}, run: (*app).run},
		{path: []string{"exec"}, run: (*app).exec},
		{path: []string{"ls"}, run: (*app).ls},
		{path: []string{"list"}, run: (*app).ls},
		{path: []string{"network", "proxy"}, run: (*app).networkProxy},
		{path: []string{"network", "log"}, run: (*app).networkLog},
		{path: []string{"reset"}, run: (*app).reset},
		{path: []string{"rm"}, run: (*app).rm},
		{path: []string{"remove"}, run: (*app).rm},
		{path: []string{"save"}, run: (*app).save},
		{path: []string{"stop"}, run: (*app).stop},
		{path: []string{"version"}, run: (*app).versionCmd},
		{path: []string{"fake-add-log"}, run: (*app).fakeAddLog, hidden: true},
		{path: []string{"fake-set-status"}, run: (*app).fakeSetStatus, hidden: true},
	}
}

var (
	dockerBool  = []string{"-D", "--debug", "--tls", "--tlsverify"}
	dockerValue = []string{"--context", "-c", "-H", "--host", "--config", "-l", "--log-level",
		"--tlscacert", "--tlscert", "--tlskey"}
	pluginBool  = []string{"-D", "--debug"}
	pluginValue = []string{"--socket"}
)

// Main runs the fake `docker` with args (argv without argv[0]) and returns
// the exit status.
func Main(args []string, stdin io.Reader, stdout, stderr io.Writer, getenv func(string) string) int {
	rest := skipGlobals(args)
	cmds := commands()
	var known [][]string
	for _, c := range cmds {
		known = append(known, c.path)
	}
	var path, leafArgs []string
	var cmd *command
	isSandbox := len(rest) > 0 && rest[0] == "sandbox" && getenv("FAKE_DOCKER_NO_SANDBOX") != "1"
	if isSandbox {
		path, leafArgs = fakecli.Resolve(rest[1:], known, pluginBool, pluginValue)
		for i := range cmds {
			if slices.Equal(cmds[i].path, path) {
				cmd = &cmds[i]
			}
		}
	}
	if cmd == nil || !cmd.hidden {
		if err := fakecli.LogArgv(getenv("FAKE_DOCKER_LOG"), args); err != nil {
			fmt.Fprintf(stderr, "fake docker: log: %v\n", err)
			return 1
		}
	}
	if !isSandbox {
		return notDocker(rest, stdout, stderr)
	}
	a := &app{stdin: stdin, stdout: stdout, stderr: stderr, getenv: getenv, path: path}
	code, err := a.main(cmd, path, leafArgs)
	var de *dockerError
	switch {
	case err == nil:
		return code
	case errors.Is(err, errHelp):
		return 0
	case errors.As(err, &de):
		fmt.Fprintln(stderr, de.msg)
		return de.code
	default:
		fmt.Fprintln(stderr, err)
		return 1
	}
}

// skipGlobals drops docker's own global options, which come before the
// command.
func skipGlobals(args []string) []string {
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case slices.Contains(dockerBool, a):
		case slices.Contains(dockerValue, a):
			i++
		case strings.HasPrefix(a, "-") && strings.Contains(a, "=") && slices.Contains(dockerValue, a[:strings.Index(a, "=")]):
		default:
			return args[i:]
		}
	}
	return nil
}

// notDocker answers everything but `docker sandbox` the way the docker CLI
// answers an unknown command ("docker: 'x' is not a docker command.").
func notDocker(rest []string, stdout, stderr io.Writer) int {
	if len(rest) == 0 {
		fmt.Fprintln(stdout, "\nUsage:  docker [OPTIONS] COMMAND\n\nA self-sufficient runtime for containers (fake: only `docker sandbox`)")
		return 0
	}
	if strings.HasPrefix(rest[0], "-") {
		fmt.Fprintf(stderr, "unknown flag: %s\nSee 'docker --help'.\n", rest[0])
		return 125
	}
	fmt.Fprintf(stderr, "docker: '%s' is not a docker command.\nSee 'docker --help'\n", rest[0])
	return 1
}

func (a *app) main(cmd *command, path, rest []string) (int, error) {
	var err error
	if a.now, err = fakecli.Now(a.getenv); err != nil {
		return 1, err
	}
	v := a.getenv("FAKE_DOCKER_SANDBOX_VERSION")
	if v == "" {
		v = DefaultVersion
	}
	if a.version, err = fakecli.ParseVersion(v); err != nil {
		return 1, fmt.Errorf("fake docker: FAKE_DOCKER_SANDBOX_VERSION: %v", err)
	}
	statePath := a.getenv("FAKE_DOCKER_STATE")
	if statePath == "" {
		return 1, errors.New("fake docker: FAKE_DOCKER_STATE is not set")
	}
	a.store = fakestate.Store{Path: statePath}
	if cmd == nil {
		return a.unknown(path, rest)
	}
	if a.version.AtLeast("0.13.0") && path[0] != "version" && !cmd.hidden {
		// docker-sandboxes-cli.md §0: [3P] Desktop 4.80.0's plugin only
		// prints a notice; the text is the docs' deprecation sentence
		// (UNCONFIRMED as the printed text).
		return 1, errf("The Docker Desktop-integrated `docker sandbox` commands are deprecated and replaced by the standalone `sbx` CLI.")
	}
	if !cmd.hidden {
		rules, err := fakecli.ParseFail(a.getenv("FAKE_DOCKER_FAIL"))
		if err != nil {
			return 1, fmt.Errorf("fake docker: FAKE_DOCKER_FAIL: %v", err)
		}
		var fail bool
		if err := a.store.Update(func(st *fakestate.State) error {
			fail = fakecli.CountCall(st, path, rules)
			return nil
		}); err != nil {
			return 1, err
		}
		if fail {
			// A daemon failure in the style of §2.11; UNCONFIRMED for G2.
			return 1, errf("%s: request failed: 500 Internal Server Error: injected by FAKE_DOCKER_FAIL", strings.Join(path, " "))
		}
	}
	err = cmd.run(a, rest)
	var ec *exitCode
	if errors.As(err, &ec) {
		return ec.code, nil
	}
	return 0, err
}

type exitCode struct{ code int }

func (e *exitCode) Error() string { return fmt.Sprintf("exit status %d", e.code) }

// unknown handles `docker sandbox` alone (usage) and unknown subcommands,
// including `inspect`, which the G2 tree does not have (§0, §1.2). The
// wording follows docker's unknown-command message (UNCONFIRMED for the
// plugin).
func (a *app) unknown(path, rest []string) (int, error) {
	words := append([]string{"sandbox"}, path...)
	for _, r := range rest {
		if r == "-h" || r == "--help" || r == "--version" && len(path) == 0 {
			fmt.Fprintln(a.stdout, usage)
			return 0, nil
		}
		if !strings.HasPrefix(r, "-") {
			words = append(words, r)
			return 1, errf("docker: '%s' is not a docker command.\nSee 'docker --help'", strings.Join(words, " "))
		}
		return 125, &dockerError{msg: fmt.Sprintf("unknown flag: %s\nSee 'docker %s --help'.", r, strings.Join(words, " ")), code: 125}
	}
	fmt.Fprintln(a.stdout, usage)
	return 0, nil
}

const usage = `
Usage:  docker sandbox [OPTIONS] COMMAND

Docker Sandbox (fake)

Commands:
  create      Create a sandbox for an agent
  exec        Execute a command inside a sandbox
  ls          List VMs
  network     Manage sandbox networking
  reset       Reset all VM sandboxes and clean up state
  rm          Remove one or more sandboxes
  run         Run an agent in a sandbox
  save        Save a snapshot of the sandbox as a template
  stop        Stop one or more sandboxes without removing them
  version     Show Docker Sandbox version information`

// parse adds the plugin root options (§1.2: -D/--debug, hidden --socket)
// and parses. Flag errors are docker's: message, "See '... --help'.",
// status 125 (docker CLI convention; UNCONFIRMED for the plugin).
func (a *app) parse(fs *pflag.FlagSet, args []string) ([]string, error) {
	fs.BoolP("debug", "D", false, "Enable debug logging")
	fs.String("socket", "", "Connect to daemon at specific socket path")
	_ = fs.MarkHidden("socket")
	help := fs.BoolP("help", "h", false, "help")
	if err := fs.Parse(args); err != nil {
		return nil, &dockerError{msg: fmt.Sprintf("%v\nSee 'docker sandbox %s --help'.", err, strings.Join(a.path, " ")), code: 125}
	}
	if *help {
		fmt.Fprintf(a.stdout, "\nUsage:  docker sandbox %s [OPTIONS]\n", strings.Join(a.path, " "))
		return nil, errHelp
	}
	return fs.Args(), nil
}

// minArgs is docker's cli.RequiresMinArgs message.
func (a *app) minArgs(args []string, n int, usage string) error {
	if len(args) >= n {
		return nil
	}
	s := "s"
	if n == 1 {
		s = ""
	}
	cp := "docker sandbox " + strings.Join(a.path, " ")
	return errf("%q requires at least %d argument%s.\nSee '%s --help'.\n\nUsage:  %s", cp, n, s, cp, usage)
}

// exactArgs is docker's cli.ExactArgs message.
func (a *app) exactArgs(args []string, n int, usage string) error {
	if len(args) == n {
		return nil
	}
	s := "s"
	if n == 1 {
		s = ""
	}
	cp := "docker sandbox " + strings.Join(a.path, " ")
	return errf("%q requires exactly %d argument%s.\nSee '%s --help'.\n\nUsage:  %s", cp, n, s, cp, usage)
}

// notFound is UNCONFIRMED: the reference records no G2 not-found text.
func notFound(name string) error { return errf("sandbox %q not found", name) }

func (a *app) lookup(st *fakestate.State, name string) (*fakestate.Sandbox, error) {
	if sb := st.Find(name); sb != nil {
		return sb, nil
	}
	return nil, notFound(name)
}

func (a *app) noise() fakecli.Noise {
	var n fakecli.Noise
	mode := a.getenv("FAKE_DOCKER_NOISE")
	if mode == "1" || mode == "both" || mode == "before" {
		n.Before = []string{"Starting sandboxd..."}
	}
	if mode == "1" || mode == "both" || mode == "after" {
		n.After = []string{"A new version of Docker Desktop is available. Update to get the latest sandbox features."}
	}
	return n
}

func (a *app) json(v any) error { return fakecli.JSON(a.stdout, v, a.noise()) }

// versionCmd prints the plugin version line of docker-sandboxes-cli.md §2.3.
func (a *app) versionCmd(args []string) error {
	args, err := a.parse(fakecli.Flags("version"), args)
	if err != nil {
		return err
	}
	if len(args) > 0 {
		return errf("\"docker sandbox version\" accepts no arguments.")
	}
	v := a.version.String()
	c := "f00f0d6473647c2201cd0507ce31613345c48ae6"
	if v != "0.7.1" {
		h := sha1.Sum([]byte("cli-plugin " + v))
		c = hex.EncodeToString(h[:])
	}
	fmt.Fprintf(a.stdout, "github.com/docker/sandboxes/cli-plugin v%s %s\n", v, c)
	return nil
}

// confirm asks on stdout and reads stdin; anything but y/yes cancels.
func (a *app) confirm(force bool, question string) error {
	if force {
		return nil
	}
	fmt.Fprintf(a.stdout, "%s [y/N] ", question)
	line, _ := bufio.NewReader(a.stdin).ReadString('\n')
	switch strings.ToLower(strings.TrimSpace(line)) {
	case "y", "yes":
		return nil
	}
	return errf("cancelled")
}
