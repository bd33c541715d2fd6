package fakesbx

import (
	"bufio"
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

// DefaultVersion is the newest sbx release (evidence §4: v0.53.0).
const DefaultVersion = "0.53.0"

// The versions at which the fake's surface changes.
const (
	// vJSON: `--json` on read-only commands (`policy ls`, `policy check`,
	// `version`, `secret ls`), the tcp4 port default, one not-found
	// sentence, devin, pathless create (release notes 0.42.0; issue #290
	// "works in v0.42.1").
	vJSON = "0.42.0"
	// vAutoStop: "sbx create sandboxes now auto-stop when idle" (0.43.0).
	vAutoStop = "0.43.0"
	// vConfirm: "confirmations everywhere", declining exits non-zero
	// (0.45.0); `policy rm network` gains -f/--force (evidence §0 #3, the
	// 0.38.0 capture removed rules by ID without a prompt).
	vConfirm = "0.45.0"
	// vCaptured: the v0.47.0 captures (evidence §1.2, §2.1): errors as
	// "error: ..." with a "  try: ..." hint, rules with layer, provenance
	// and actions, `policy ls MISSING` answering with the global rules.
	vCaptured = "0.47.0"
	// vNoInput: the global --no-input flag. It is absent from the v0.47.0
	// root help and present on the live docs page (evidence §0 #2); the
	// first release with it is not pinned, the fake assumes 0.53.0.
	vNoInput = "0.53.0"
	// vGeminiRetired: "gemini retired as a built-in agent" (0.53.0).
	vGeminiRetired = "0.53.0"
)

// app is one invocation of the fake.
type app struct {
	*fakecli.Call
	noInput bool
}

var errf = fakecli.Errorf

var cli = &fakecli.CLI[*app]{
	Knobs:          "FAKE_SBX",
	DefaultVersion: DefaultVersion,
	Commands: []fakecli.Command[*app]{
		{Path: []string{"version"}, Run: (*app).versionCmd},
		{Path: []string{"ls"}, Run: (*app).ls},
		{Path: []string{"list"}, Run: (*app).ls},
		{Path: []string{"inspect"}, Run: (*app).inspect},
		{Path: []string{"create"}, Run: (*app).create},
		{Path: []string{"run"}, Run: (*app).run},
		{Path: []string{"stop"}, Run: (*app).stop},
		{Path: []string{"rm"}, Run: (*app).rm},
		{Path: []string{"exec"}, Run: (*app).exec},
		{Path: []string{"ports"}, Run: (*app).ports},
		{Path: []string{"policy", "allow", "network"}, Run: (*app).policyAdd},
		{Path: []string{"policy", "deny", "network"}, Run: (*app).policyAdd},
		{Path: []string{"policy", "rm", "network"}, Run: (*app).policyRm},
		{Path: []string{"policy", "check", "network"}, Run: (*app).policyCheck},
		{Path: []string{"policy", "ls"}, Run: (*app).policyLs},
		{Path: []string{"policy", "log"}, Run: (*app).policyLog},
		{Path: []string{"policy", "init"}, Run: (*app).policyInit},
		{Path: []string{"policy", "reset"}, Run: (*app).policyReset},
		{Path: []string{"secret", "set"}, Run: (*app).secretSet},
		{Path: []string{"secret", "set-custom"}, Run: (*app).secretSetCustom},
		{Path: []string{"secret", "ls"}, Run: (*app).secretLs},
		{Path: []string{"secret", "rm"}, Run: (*app).secretRm},
		{Path: []string{"template", "save"}, Run: (*app).templateSave},
		{Path: []string{"template", "load"}, Run: (*app).templateLoad},
		{Path: []string{"template", "ls"}, Run: (*app).templateLs},
		{Path: []string{"template", "rm"}, Run: (*app).templateRm},
		{Path: []string{"fake-add-log"}, Run: (*app).fakeAddLog, Hidden: true},
		{Path: []string{"fake-hide"}, Run: (*app).fakeHide, Hidden: true},
		{Path: []string{"fake-set-status"}, Run: (*app).fakeSetStatus, Hidden: true},
	},
	Route: func(args []string, known [][]string, _ func(string) string) ([]string, []string, bool) {
		// Command words may be interleaved with the global flags, as
		// cobra allows.
		path, rest := fakecli.Resolve(args, append(known, documented...), globalBool, globalValue)
		return path, rest, true
	},
	New:      func(c *fakecli.Call) *app { return &app{Call: c} },
	Unknown:  (*app).unknown,
	Injected: (*app).injected,
	Noise: func(c *fakecli.Call) fakecli.Noise {
		return fakecli.Noise{
			// Issue #201 (v0.31.3), verbatim: daemon start lines on stdout.
			Before: []string{
				"Starting sandboxd daemon...",
				`Daemon started (PID: 55276, socket: \\.\pipe\docker_kaname_sandboxd)`,
				`Logs: C:\Users\user\AppData\Local\DockerSandboxes\sandboxes\state\sandboxd\daemon.log`,
			},
			// "sbx appends notices (an update banner) to stdout after the
			// JSON" (evidence §1.1); the text is UNCONFIRMED.
			After: []string{"A new version of sbx is available: v99.0.0 (you have v" + c.Version.String() + "). Run 'brew upgrade docker/tap/sbx' to update."},
		}
	},
	Print: printError,
}

// Main runs the fake `sbx` with args (argv without argv[0]) and returns the
// exit status.
func Main(args []string, stdin io.Reader, stdout, stderr io.Writer, getenv func(string) string) int {
	return cli.Main(args, stdin, stdout, stderr, getenv)
}

// printError prints as sbx does: "ERROR: msg" (issues #290, #504, up to
// v0.39), then "error: msg" and a "  try: hint" line in the v0.47.0
// captures (evidence §2.1: `error: sandbox 'NAME' not found` + `  try: sbx
// ls`). Which release changed it is UNCONFIRMED; the fake uses 0.47.0.
func printError(c *fakecli.Call, w io.Writer, e *fakecli.Error) {
	if !c.Version.AtLeast(vCaptured) {
		fmt.Fprintf(w, "ERROR: %s\n", e.Msg)
		return
	}
	fmt.Fprintf(w, "error: %s\n", e.Msg)
	if e.Hint != "" {
		fmt.Fprintf(w, "  try: %s\n", e.Hint)
	}
}

// documented is the rest of the command tree (evidence §3, the v0.47.0
// help), which the fake does not implement.
var documented = [][]string{{"attach"}, {"completion"}, {"cp"}, {"daemon"}, {"diagnose"}, {"env"}, {"kit"},
	{"login"}, {"logout"}, {"mcp"}, {"mount"}, {"move"}, {"prune"}, {"reset"}, {"settings"}, {"setup"},
	{"skills"}, {"ttl"}, {"tui"}, {"umount"}, {"volume"}, {"policy", "inspect"}, {"policy", "profile"},
	{"secret", "import"}, {"template", "inspect"}}

var (
	globalBool  = []string{"--no-input", "-D", "--debug", "--cloud"}
	globalValue = []string{"--cloud-api-url"}
)

// globalFlags adds the global options: --cloud, -D/--debug and -h/--help
// (v0.47.0 root help), --cloud-api-url, and --no-input from vNoInput.
func (a *app) globalFlags(fs *pflag.FlagSet) *bool {
	if a.Version.AtLeast(vNoInput) {
		fs.BoolVar(&a.noInput, "no-input", false, "Never prompt; commands that need an answer fail with the command to run instead")
	}
	fs.Bool("cloud", false, "Dispatch to Docker Cloud Sandboxes API instead of local sandboxd")
	fs.String("cloud-api-url", "", "Cloud API URL")
	fs.BoolP("debug", "D", false, "Enable debug logging")
	return fs.BoolP("help", "h", false, "help for "+strings.Join(append([]string{"sbx"}, a.Path...), " "))
}

// parse adds the global options to fs and parses args. A flag the version
// does not have is cobra's "unknown flag: --x" (issue #290).
func (a *app) parse(fs *pflag.FlagSet, args []string) ([]string, error) {
	help := a.globalFlags(fs)
	if err := fs.Parse(args); err != nil {
		return nil, errf("%v", err)
	}
	if *help {
		fmt.Fprintf(a.Stdout, "Usage:\n  sbx %s [flags]\n\nFlags:\n%s", strings.Join(a.Path, " "), fs.FlagUsages())
		return nil, fakecli.ErrHelp
	}
	if fs.Changed("cloud") {
		return nil, errf("fake sbx: --cloud is not implemented")
	}
	return fs.Args(), nil
}

// unknown handles the root (help, unknown flags and commands) and the
// documented commands the fake lacks.
func (a *app) unknown(path, rest []string) error {
	if len(path) == 0 {
		fs := fakecli.Flags("sbx")
		help := a.globalFlags(fs)
		if err := fs.Parse(rest); err != nil {
			return errf("%v", err)
		}
		switch {
		case *help:
			a.rootHelp()
			return fakecli.ErrHelp
		case fs.NArg() == 0:
			// `sbx` alone opens the dashboard (sbx tui).
			return errf("fake sbx: the interactive dashboard (sbx tui) is not implemented")
		}
		return &fakecli.Error{Msg: fmt.Sprintf("unknown command %q for \"sbx\"", fs.Arg(0)), Hint: "sbx --help", Code: 1}
	}
	for _, d := range documented {
		if slices.Equal(d, path[:min(len(d), len(path))]) {
			return errf("fake sbx: %q is not implemented", "sbx "+strings.Join(path, " "))
		}
	}
	for _, r := range rest {
		if !strings.HasPrefix(r, "-") {
			return &fakecli.Error{Msg: fmt.Sprintf("unknown command %q for \"sbx %s\"", r, strings.Join(path, " ")),
				Hint: fmt.Sprintf("sbx %s --help", strings.Join(path, " ")), Code: 1}
		}
	}
	return errf("fake sbx: %q is not implemented", "sbx "+strings.Join(path, " "))
}

// rootHelp is cobra's root help. Its Flags section is the v0.47.0
// capture's three global flags (evidence §2.1) plus --no-input from
// vNoInput; it is what the driver probes for --no-input.
func (a *app) rootHelp() {
	noInput := ""
	if a.Version.AtLeast(vNoInput) {
		noInput = "      --no-input   Never prompt; commands that need an answer fail with the command to run instead\n"
	}
	fmt.Fprintf(a.Stdout, `Docker Sandboxes (fake sbx %s)

Usage:
  sbx [flags]
  sbx [command]

Available Commands:
  create      Create a sandbox
  exec        Run a command in a sandbox
  inspect     Show a sandbox
  ls          List sandboxes
  policy      Manage network policies
  ports       Manage published ports
  rm          Remove sandboxes
  run         Run an agent in a sandbox
  secret      Manage secrets
  stop        Stop sandboxes
  template    Manage templates
  version     Show the version

Flags:
      --cloud      Dispatch to Docker Cloud Sandboxes API instead of local sandboxd
  -D, --debug      Enable debug logging
  -h, --help       help for sbx
%s
Use "sbx [command] --help" for more information about a command.
`, a.Version, noInput)
}

// injected is the error for $FAKE_SBX_FAIL. create and run use the daemon
// 500s recorded in docker-sandboxes-cli.md §2.11.
func (a *app) injected(path, rest []string) error {
	switch path[0] {
	case "create":
		return errf("failed to create sandbox: request failed: 500 Internal Server Error: failed to create network")
	case "run":
		name := ""
		for i, r := range rest {
			if r == "--name" && i+1 < len(rest) {
				name = rest[i+1]
			}
		}
		// §2.11 prints this one without the error prefix.
		fmt.Fprintf(a.Stderr, "Failed to start sandbox %q: start runtime %q: start runtime: request failed: 500 Internal Server Error: failed to start runtime\n", name, name)
		return &fakecli.Exit{Code: 1}
	}
	return errf("%s: request failed: 500 Internal Server Error: injected by FAKE_SBX_FAIL", strings.Join(path, " "))
}

// argsCheck checks the positional count the way cobra words it.
func argsCheck(args []string, min, max int) error {
	switch {
	case len(args) < min && min == max, max >= 0 && len(args) > max && min == max:
		return errf("accepts %d arg(s), received %d", min, len(args))
	case len(args) < min:
		return errf("requires at least %d arg(s), only received %d", min, len(args))
	case max >= 0 && len(args) > max:
		return errf("accepts at most %d arg(s), received %d", max, len(args))
	}
	return nil
}

// notFound is the not-found error: issue #504's text before 0.42.0, then
// "sandbox 'NAME' not found" (0.42.0 release notes; `try: sbx ls` in the
// v0.47.0 capture, evidence §2.1).
func (a *app) notFound(name string) error {
	if a.Version.AtLeast(vJSON) {
		return &fakecli.Error{Msg: fmt.Sprintf("sandbox '%s' not found", name), Hint: "sbx ls", Code: 1}
	}
	return errf("no sandbox named '%s'\n\nTo create one:\n  sbx create AGENT WORKSPACE", name)
}

// lookup returns the sandbox or the not-found error.
func (a *app) lookup(st *fakestate.State, name string) (*fakestate.Sandbox, error) {
	if sb := st.Find(name); sb != nil {
		return sb, nil
	}
	return nil, a.notFound(name)
}

// confirm asks question unless force and reports the answer. With
// --no-input it fails naming the command to run instead (the flag's help
// text; wording UNCONFIRMED). The prompt's form is the v0.47.0 capture's
// "(y/N): " (evidence §2.1, template save).
func (a *app) confirm(force bool, question, instead string) (bool, error) {
	if force {
		return true, nil
	}
	if a.noInput {
		return false, errf("confirmation required; run: %s", instead)
	}
	fmt.Fprintf(a.Stdout, "%s (y/N): ", question)
	line, _ := bufio.NewReader(a.Stdin).ReadString('\n')
	switch strings.ToLower(strings.TrimSpace(line)) {
	case "y", "yes":
		fmt.Fprintln(a.Stdout)
		return true, nil
	}
	return false, nil
}

// autoStop reports whether a sandbox without a session stops itself
// ("auto-stop grace period expired", evidence §3.2).
func (a *app) autoStop() bool {
	switch a.Knob("AUTO_STOP") {
	case "1":
		return true
	case "0":
		return false
	}
	return a.Version.AtLeast(vAutoStop)
}

// settle is the state a sandbox rests in after a command that started it:
// stopped, unless it is detached or auto-stop is off.
func (a *app) settle(sb *fakestate.Sandbox) {
	if a.autoStop() && !sb.Detached {
		sb.Status = "stopped"
	}
}

// start marks a sandbox running (exec, run and ports --publish start a
// stopped one first).
func (a *app) start(sb *fakestate.Sandbox) {
	if sb.Status != "running" {
		sb.Status, sb.StartedAt = "running", a.Now
	}
	sb.LastUsedAt = a.Now
}

// commit is the build commit printed next to the version: the one recorded
// for v0.39.0 (docker-sandboxes-cli.md §2.10), else derived from the
// version.
func commit(v string) string {
	if v == "0.39.0" {
		return "def8cb0523a77e757bdd6ef52b459fe374f3783e"
	}
	h := sha1.Sum([]byte("sbx " + v))
	return hex.EncodeToString(h[:])
}

// versionCmd prints "vX.Y.Z COMMIT" (single line since 0.32.0,
// docker-sandboxes-cli.md §2.10) or, with --json (0.42.0+), evidence §1.5:
// {"client":{"version",…},"server":{"state","version"}}; client.commit is
// UNCONFIRMED.
func (a *app) versionCmd(args []string) error {
	fs := fakecli.Flags("version")
	jsonOut := new(bool)
	if a.Version.AtLeast(vJSON) {
		fs.BoolVar(jsonOut, "json", false, "Output in JSON format")
	}
	args, err := a.parse(fs, args)
	if err != nil {
		return err
	}
	if err := argsCheck(args, 0, 0); err != nil {
		return err
	}
	v := a.Version.String()
	if !*jsonOut {
		fmt.Fprintf(a.Stdout, "v%s %s\n", v, commit(v))
		return nil
	}
	state := a.Knob("SERVER_STATE")
	if state == "" {
		state = "running"
	}
	server := map[string]string{"state": state}
	if state == "running" {
		server["version"] = "v" + v
	}
	return a.JSON(map[string]any{
		"client": map[string]string{"version": "v" + v, "commit": commit(v)},
		"server": server,
	})
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
