package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/pflag"

	"github.com/sbxhq/sbx/driver/kubernetes/inpod"
	"github.com/sbxhq/sbx/driver/runner"
	"github.com/sbxhq/sbx/schema"
	"github.com/sbxhq/sbx/session"
)

// Exit codes, as documented in the README.
const (
	exitOK      = 0
	exitError   = 1
	exitChanges = 2 // plan --detailed-exitcode only
)

// app is one invocation: its streams and environment. Nothing here outlives
// the call to Main.
type app struct {
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
	// env is the environment sbx was given: the only one its backend
	// commands and host secret commands see.
	env []string

	run     *runner.Runner // lazily made by runner()
	closers []io.Closer    // closed when Main returns
	// hostValues are what the declarations read from the host
	// environment, kept out of what the verbs that describe declarations
	// print (redacting).
	hostValues hostValues
}

// verb is one sbx command.
type verb struct {
	name    string
	summary string
	usage   string // after "sbx NAME"
	help    string // paragraphs after the usage line
	hidden  bool
	// dockerForm, when set, recognises Docker's own use of the verb's
	// name (`sbx stop NAME`, `sbx ls -q`), which runs Docker's sbx when
	// it is installed: sbx keeps every Docker verb working.
	dockerForm func(args []string) bool
	// setup registers the verb's flags on a fresh flag set and returns the
	// function that runs it with the remaining arguments.
	setup func(fs *pflag.FlagSet) runFunc
}

type runFunc func(ctx context.Context, a *app, args []string) int

// run parses args with a fresh flag set and runs the verb.
func (v *verb) run(ctx context.Context, a *app, args []string) int {
	fs := pflag.NewFlagSet("sbx "+v.name, pflag.ContinueOnError)
	fs.SortFlags = false
	run := v.setup(fs)
	if code, ok := a.parse(v, fs, args); !ok {
		return code
	}
	if redacts(v.name) {
		a.stdout = &redactor{w: a.stdout, vals: &a.hostValues}
		a.stderr = &redactor{w: a.stderr, vals: &a.hostValues}
	}
	return run(ctx, a, fs.Args())
}

// redacts reports whether a verb's output goes through the redactor,
// which shows a host value as "(from $VAR)". Every verb that reads a
// declaration prints something of it (a name in stop, start, ls, loop and
// checkpoint lines, a backend error quoting a port, a doctor diagnostic),
// so all do; a verb that read no host value prints unchanged. Only shell
// hands the terminal to the sandbox as is: its raw byte stream can split
// a value between writes, and an agent can print any host value it was
// given anyway.
func redacts(verb string) bool {
	return verb != "shell"
}

func verbs() []*verb {
	return []*verb{
		planVerb(),
		applyVerb(),
		destroyVerb(),
		statusVerb(),
		lsVerb(),
		stopVerb(),
		startVerb(),
		checkpointVerb(),
		loopVerb(),
		shellVerb(),
		netlogVerb(),
		pullVerb(),
		pushVerb(),
		validateVerb(),
		initVerb(),
		schemaVerb(),
		doctorVerb(),
		completionVerb(),
		versionVerb(),
	}
}

// Main runs sbx with args (without the program name) in the environment
// env (NAME=VALUE entries) and returns the exit code. It never calls
// os.Exit, so tests run it in-process; env is the only environment the
// commands it runs see.
func Main(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, env []string) int {
	a := &app{stdin: stdin, stdout: stdout, stderr: stderr, env: env}
	defer func() {
		for _, c := range a.closers {
			c.Close()
		}
	}()
	if len(args) == 0 {
		a.usage(stderr)
		return exitError
	}
	args, global, err := splitGlobal(args)
	if err != nil {
		fmt.Fprintf(stderr, "sbx: %v\nRun 'sbx help' for usage.\n", err)
		return exitError
	}
	name := args[0]
	switch name {
	case "-h", "--help", "help":
		if global != nil {
			// sbx -f x help apply: help is about the verb, not the files.
			args = slices.Delete(args, 1, 1+globalTokens(global))
		}
		if len(args) > 1 && name == "help" {
			if v := findVerb(args[1]); v != nil {
				v.printHelp(stdout)
				return exitOK
			}
			return a.unknown(args[1])
		}
		a.usage(stdout)
		return exitOK
	case "--version":
		return findVerb("version").run(ctx, a, nil)
	}
	if global != nil {
		// Flags before the verb are sbx's own: they never reach Docker's
		// sbx or an internal verb.
		v := findVerb(name)
		if v == nil {
			return a.unknown(name)
		}
		fs := v.flags()
		for _, g := range global {
			if fs.Lookup(g) == nil {
				return a.errorf("%q takes no --%s (a flag before the command is the command's)", name, g)
			}
		}
		return v.run(ctx, a, args[1:])
	}
	if h, ok := hiddenVerbs()[name]; ok {
		return h(ctx, a, args[1:])
	}
	if h, ok := inpod.Verbs()[name]; ok {
		return h(ctx, args[1:], stdin, stdout, stderr)
	}
	v := findVerb(name)
	if v == nil {
		if path, err := session.DockerSbx(a.driverEnv()); err == nil && !strings.HasPrefix(name, "-") && !a.nearMiss(name) {
			return a.passThrough(ctx, path, args)
		}
		return a.unknown(name)
	}
	if v.dockerForm != nil && v.dockerForm(args[1:]) {
		if path, err := session.DockerSbx(a.driverEnv()); err == nil {
			return a.passThrough(ctx, path, args)
		}
	}
	return v.run(ctx, a, args[1:])
}

func findVerb(name string) *verb {
	for _, v := range verbs() {
		if v.name == name {
			return v
		}
	}
	return nil
}

// dockerVerbs are the commands of Docker's sbx seen in its help and in use
// (../shared/reference/docker-sbx-evidence.md, docker-sandboxes-cli.md):
// one of these is Docker's even when it is a near miss of one of ours.
var dockerVerbs = []string{
	"cp", "create", "daemon", "diagnose", "env", "exec", "inspect", "kit",
	"list", "load", "login", "logout", "ls", "mount", "move", "netlog",
	"policy", "ports", "prune", "reset", "rm", "run", "save", "secret",
	"settings", "start", "stop", "template", "tui", "umount", "version",
}

// nearMiss reports whether name is a misspelling of one of sbx's own verbs
// (sbx aply) rather than a verb of Docker's sbx: those stop here with a
// suggestion instead of reaching Docker's CLI, where "aply" would be an
// error about a command the user never meant.
func (a *app) nearMiss(name string) bool {
	if slices.Contains(dockerVerbs, name) {
		return false
	}
	return schema.Suggest(name, verbNames()) != ""
}

func verbNames() []string {
	var names []string
	for _, v := range verbs() {
		if !v.hidden {
			names = append(names, v.name)
		}
	}
	return names
}

func (a *app) unknown(name string) int {
	names := verbNames()
	msg := fmt.Sprintf("sbx: unknown command %q", name)
	if s := schema.Suggest(name, names); s != "" {
		msg += fmt.Sprintf(" (did you mean %q?)", s)
	}
	fmt.Fprintln(a.stderr, msg)
	fmt.Fprintf(a.stderr, "sbx commands: %s\nRun 'sbx help' for usage.\n", strings.Join(names, ", "))
	return exitError
}

func (a *app) usage(w io.Writer) {
	fmt.Fprint(w, `sbx declares an AI-agent sandbox in sandbox.yaml and keeps it that way.

Usage:
  sbx COMMAND [flags]

Commands:
`)
	for _, v := range verbs() {
		if !v.hidden {
			fmt.Fprintf(w, "  %-10s %s\n", v.name, v.summary)
		}
	}
	fmt.Fprint(w, `
Run 'sbx help COMMAND' for a command's flags.
Exit codes: 0 success, 1 error, 2 changes pending (plan --detailed-exitcode).
`)
}

func (v *verb) printHelp(w io.Writer) {
	fmt.Fprintf(w, "Usage: sbx %s %s\n\n%s\n", v.name, v.usage, v.summary)
	if v.help != "" {
		fmt.Fprintf(w, "\n%s\n", strings.TrimSpace(v.help))
	}
	if fs := v.flags(); fs.HasFlags() {
		fmt.Fprintf(w, "\nFlags:\n%s", flagUsages(fs))
	}
}

// longFlags accepts Terraform's single-dash spelling of long flags
// (-auto-approve, -detailed-exitcode, -out=FILE): an argument before "--"
// whose name after one dash is a long flag of the verb gets the second
// dash pflag wants. Shorthand clusters (-y) are not long flag names and
// pass unchanged.
func longFlags(fs *pflag.FlagSet, args []string) []string {
	out := make([]string, 0, len(args))
	for i, arg := range args {
		if arg == "--" {
			return append(out, args[i:]...)
		}
		name, _, _ := strings.Cut(strings.TrimPrefix(arg, "-"), "=")
		if strings.HasPrefix(arg, "-") && !strings.HasPrefix(arg, "--") && len(name) > 1 && fs.Lookup(name) != nil {
			arg = "-" + arg
		}
		out = append(out, arg)
	}
	return out
}

// flagUsages lists a verb's flags as Docker's CLIs do: a boolean flag is
// written bare (pflag 1.1 adds "[=true|false]" to every one), a flag with a
// value names it, and a non-zero default is shown.
func flagUsages(fs *pflag.FlagSet) string {
	type row struct{ left, usage string }
	var rows []row
	width := 0
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Hidden {
			return
		}
		left := "      --" + f.Name
		if f.Shorthand != "" {
			left = "  -" + f.Shorthand + ", --" + f.Name
		}
		varname, usage := pflag.UnquoteUsage(f)
		if f.Value.Type() != "bool" && varname != "" {
			left += " " + varname
		}
		if d := f.DefValue; d != "" && d != "false" && d != "0" && d != "[]" && d != "0s" {
			if f.Value.Type() == "string" {
				usage += fmt.Sprintf(" (default %q)", d)
			} else {
				usage += " (default " + d + ")"
			}
		}
		rows = append(rows, row{left, usage})
		width = max(width, len(left))
	})
	var b strings.Builder
	for _, r := range rows {
		fmt.Fprintf(&b, "%-*s   %s\n", width, r.left, r.usage)
	}
	return b.String()
}

func (v *verb) flags() *pflag.FlagSet {
	fs := pflag.NewFlagSet("sbx "+v.name, pflag.ContinueOnError)
	fs.SortFlags = false
	v.setup(fs)
	fs.BoolP("help", "h", false, "show this help")
	return fs
}

// parse parses a verb's flags. It returns ok=false with the exit code when
// the verb should stop (a usage error, or --help).
func (a *app) parse(v *verb, fs *pflag.FlagSet, args []string) (code int, ok bool) {
	fs.SetOutput(io.Discard)
	help := fs.BoolP("help", "h", false, "show this help")
	if err := fs.Parse(longFlags(fs, args)); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			v.printHelp(a.stdout)
			return exitOK, false
		}
		fmt.Fprintf(a.stderr, "sbx: %s\nUsage: sbx %s %s\nRun 'sbx help %s' for details.\n", flagError(v.name, fs, err), v.name, v.usage, v.name)
		return exitError, false
	}
	if *help {
		v.printHelp(a.stdout)
		return exitOK, false
	}
	return 0, true
}

// errorf prints a runtime error, prefixed as every sbx message is.
func (a *app) errorf(format string, args ...any) int {
	fmt.Fprintf(a.stderr, "sbx: "+format+"\n", args...)
	return exitError
}
