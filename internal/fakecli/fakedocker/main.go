package fakedocker

import (
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/pflag"

	"github.com/sbxhq/sbx/internal/fakecli"
	"github.com/sbxhq/sbx/internal/fakecli/fakestate"
)

// DefaultVersion is the newest plugin version the reference shows working
// (v0.12.0, the [3P] conflicts register, docker-sandboxes-cli.md §11);
// v0.13.0 is only seen in Desktop 4.80, where the command prints a notice
// (§0).
const DefaultVersion = "0.12.0"

// app is one invocation of the fake plugin.
type app struct {
	*fakecli.Call
}

var errf = fakecli.Errorf

// cli is the part of the G2 tree (docker-sandboxes-cli.md §1.2) the
// docker-sandbox driver uses: create, exec, ls, network (log, proxy), rm,
// stop, version. The plugin has no inspect; run, reset and save exist but
// are not modelled.
var cli = &fakecli.CLI[*app]{
	Knobs:          "FAKE_DOCKER",
	VersionKnob:    "FAKE_DOCKER_SANDBOX_VERSION",
	DefaultVersion: DefaultVersion,
	Commands: []fakecli.Command[*app]{
		{Path: []string{"create"}, Run: (*app).create},
		{Path: []string{"exec"}, Run: (*app).exec},
		{Path: []string{"ls"}, Run: (*app).ls},
		{Path: []string{"list"}, Run: (*app).ls},
		{Path: []string{"network", "proxy"}, Run: (*app).networkProxy},
		{Path: []string{"network", "log"}, Run: (*app).networkLog},
		{Path: []string{"rm"}, Run: (*app).rm},
		{Path: []string{"remove"}, Run: (*app).rm},
		{Path: []string{"stop"}, Run: (*app).stop},
		{Path: []string{"version"}, Run: (*app).versionCmd},
		{Path: []string{"fake-add-log"}, Run: (*app).fakeAddLog, Hidden: true},
		{Path: []string{"fake-set-status"}, Run: (*app).fakeSetStatus, Hidden: true},
	},
	Route:    route,
	Foreign:  notDocker,
	New:      func(c *fakecli.Call) *app { return &app{c} },
	Unknown:  (*app).unknown,
	Before:   (*app).deprecated,
	Injected: (*app).injected,
	Noise: func(*fakecli.Call) fakecli.Noise {
		return fakecli.Noise{Before: []string{"Starting sandboxd..."},
			After: []string{"A new version of Docker Desktop is available. Update to get the latest sandbox features."}}
	},
	// The docker CLI's plugin runner prints the bare message.
	Print: func(_ *fakecli.Call, w io.Writer, e *fakecli.Error) { fmt.Fprintln(w, e.Msg) },
}

// Main runs the fake `docker` with args (argv without argv[0]) and returns
// the exit status.
func Main(args []string, stdin io.Reader, stdout, stderr io.Writer, getenv func(string) string) int {
	return cli.Main(args, stdin, stdout, stderr, getenv)
}

var (
	dockerBool  = []string{"-D", "--debug", "--tls", "--tlsverify"}
	dockerValue = []string{"--context", "-c", "-H", "--host", "--config", "-l", "--log-level",
		"--tlscacert", "--tlscert", "--tlskey"}
	pluginBool  = []string{"-D", "--debug"}
	pluginValue = []string{"--socket"}
)

// route claims `docker [GLOBALS] sandbox ...` unless FAKE_DOCKER_NO_SANDBOX
// is "1".
func route(args []string, known [][]string, getenv func(string) string) (path, rest []string, ok bool) {
	args = skipGlobals(args)
	if len(args) == 0 || args[0] != "sandbox" || getenv("FAKE_DOCKER_NO_SANDBOX") == "1" {
		return nil, nil, false
	}
	path, rest = fakecli.Resolve(args[1:], known, pluginBool, pluginValue)
	return path, rest, true
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
func notDocker(args []string, stdout, stderr io.Writer) int {
	rest := skipGlobals(args)
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

// deprecated models Desktop 4.80 (docker-sandboxes-cli.md §0): [3P] its
// plugin only prints a notice; the text is the docs' deprecation sentence
// (UNCONFIRMED as the printed text).
func (a *app) deprecated(path []string) error {
	if a.Version.AtLeast("0.13.0") && path[0] != "version" {
		return errf("The Docker Desktop-integrated `docker sandbox` commands are deprecated and replaced by the standalone `sbx` CLI.")
	}
	return nil
}

// injected is a daemon failure in the style of §2.11; UNCONFIRMED for G2.
func (a *app) injected(path, _ []string) error {
	return errf("%s: request failed: 500 Internal Server Error: injected by FAKE_DOCKER_FAIL", strings.Join(path, " "))
}

// unknown handles `docker sandbox` alone (usage) and unknown subcommands,
// including `inspect`, which the G2 tree does not have (§0, §1.2). The
// wording follows docker's unknown-command message (UNCONFIRMED for the
// plugin).
func (a *app) unknown(path, rest []string) error {
	words := append([]string{"sandbox"}, path...)
	for _, r := range rest {
		if r == "-h" || r == "--help" || r == "--version" && len(path) == 0 {
			break
		}
		if !strings.HasPrefix(r, "-") {
			words = append(words, r)
			return errf("docker: '%s' is not a docker command.\nSee 'docker --help'", strings.Join(words, " "))
		}
		return &fakecli.Error{Msg: fmt.Sprintf("unknown flag: %s\nSee 'docker %s --help'.", r, strings.Join(words, " ")), Code: 125}
	}
	fmt.Fprintln(a.Stdout, usage)
	return fakecli.ErrHelp
}

const usage = `
Usage:  docker sandbox [OPTIONS] COMMAND

Docker Sandbox (fake)

Commands:
  create      Create a sandbox for an agent
  exec        Execute a command inside a sandbox
  ls          List VMs
  network     Manage sandbox networking
  rm          Remove one or more sandboxes
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
		return nil, &fakecli.Error{Msg: fmt.Sprintf("%v\nSee 'docker sandbox %s --help'.", err, strings.Join(a.Path, " ")), Code: 125}
	}
	if *help {
		fmt.Fprintf(a.Stdout, "\nUsage:  docker sandbox %s [OPTIONS]\n", strings.Join(a.Path, " "))
		return nil, fakecli.ErrHelp
	}
	return fs.Args(), nil
}

// minArgs is docker's cli.RequiresMinArgs message.
func (a *app) minArgs(args []string, n int, usage string) error {
	if len(args) >= n {
		return nil
	}
	return a.argsError("at least", n, usage)
}

// exactArgs is docker's cli.ExactArgs message.
func (a *app) exactArgs(args []string, n int, usage string) error {
	if len(args) == n {
		return nil
	}
	return a.argsError("exactly", n, usage)
}

func (a *app) argsError(how string, n int, usage string) error {
	s := "s"
	if n == 1 {
		s = ""
	}
	cp := "docker sandbox " + strings.Join(a.Path, " ")
	return errf("%q requires %s %d argument%s.\nSee '%s --help'.\n\nUsage:  %s", cp, how, n, s, cp, usage)
}

// notFound is UNCONFIRMED: the reference records no G2 not-found text.
func notFound(name string) error { return errf("sandbox %q not found", name) }

func (a *app) lookup(st *fakestate.State, name string) (*fakestate.Sandbox, error) {
	if sb := st.Find(name); sb != nil {
		return sb, nil
	}
	return nil, notFound(name)
}

// versionCmd prints the plugin version line of docker-sandboxes-cli.md §2.3.
func (a *app) versionCmd(args []string) error {
	args, err := a.parse(fakecli.Flags("version"), args)
	if err != nil {
		return err
	}
	if len(args) > 0 {
		return errf("\"docker sandbox version\" accepts no arguments.")
	}
	v := a.Version.String()
	c := "f00f0d6473647c2201cd0507ce31613345c48ae6"
	if v != "0.7.1" {
		h := sha1.Sum([]byte("cli-plugin " + v))
		c = hex.EncodeToString(h[:])
	}
	fmt.Fprintf(a.Stdout, "github.com/docker/sandboxes/cli-plugin v%s %s\n", v, c)
	return nil
}
