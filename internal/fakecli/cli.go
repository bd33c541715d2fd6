package fakecli

import (
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/sbxhq/sbx/internal/fakecli/fakestate"
)

// Command is one verb of a fake CLI; A is the fake's per-invocation state.
type Command[A any] struct {
	Path []string
	Run  func(a A, args []string) error
	// Hidden commands are test plumbing: not logged and not counted for
	// failure injection.
	Hidden bool
}

// CLI is a fake command-line program: the harness every fake shares (argv
// log, state file, clock, version knob, failure injection, JSON noise and
// mutations, error printing) around the commands and the few behaviours in
// which the fakes differ.
type CLI[A any] struct {
	// Knobs prefixes the environment knobs: PREFIX_STATE (required),
	// PREFIX_LOG, PREFIX_FAIL, PREFIX_HANG, PREFIX_VERSION, PREFIX_NOISE,
	// PREFIX_MUTATE.
	Knobs string
	// VersionKnob names the version knob when it is not PREFIX_VERSION.
	VersionKnob    string
	DefaultVersion string
	Commands       []Command[A]
	// Route finds the command path in argv and the leaf's arguments; ok is
	// false for argv that is not this fake's (docker's other commands).
	Route func(args []string, known [][]string, getenv func(string) string) (path, rest []string, ok bool)
	// Foreign answers argv Route did not claim; nil when Route claims all.
	Foreign func(args []string, stdout, stderr io.Writer) int
	// New makes the fake's state for one invocation.
	New func(c *Call) A
	// Unknown reports a path that names no command (or prints usage and
	// returns ErrHelp).
	Unknown func(a A, path, rest []string) error
	// Before, when set, runs before failure injection for every command
	// that is not hidden.
	Before func(a A, path []string) error
	// Injected is the error of a call PREFIX_FAIL asks to fail.
	Injected func(a A, path, rest []string) error
	// Noise gives the non-JSON lines printed around JSON documents.
	Noise func(c *Call) Noise
	// Print writes an error as the real CLI does.
	Print func(c *Call, w io.Writer, e *Error)
}

// Call is one invocation of a fake: its streams, environment, state store,
// clock and the version it impersonates.
type Call struct {
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	Getenv         func(string) string
	Store          fakestate.Store
	Now            time.Time
	Version        Version
	// Path is the command path ("policy", "ls").
	Path  []string
	knobs string
	noise func(c *Call) Noise
}

// Knob reads the fake's environment knob PREFIX_name.
func (c *Call) Knob(name string) string { return c.Getenv(c.knobs + "_" + name) }

// JSON writes v indented, wrapped in the noise PREFIX_NOISE asks for
// ("1"/"both", "before", "after") and changed as PREFIX_MUTATE says (see
// Mutate).
func (c *Call) JSON(v any) error {
	var n Noise
	if mode := c.Knob("NOISE"); mode != "" && c.noise != nil {
		all := c.noise(c)
		if mode == "1" || mode == "both" || mode == "before" {
			n.Before = all.Before
		}
		if mode == "1" || mode == "both" || mode == "after" {
			n.After = all.After
		}
	}
	v, err := Mutate(v, c.Path, c.Knob("MUTATE"))
	if err != nil {
		return err
	}
	return JSON(c.Stdout, v, n)
}

// Error is a failure the fake reports as the real CLI would, with its exit
// status and, for CLIs that print one, a hint ("try: sbx ls").
type Error struct {
	Msg  string
	Hint string
	Code int
}

func (e *Error) Error() string { return e.Msg }

// Errorf makes an *Error with exit status 1.
func Errorf(format string, args ...any) *Error {
	return &Error{Msg: fmt.Sprintf(format, args...), Code: 1}
}

// Exit ends a command with a status and no message (exec's exit status).
type Exit struct{ Code int }

func (e *Exit) Error() string { return fmt.Sprintf("exit status %d", e.Code) }

// Hang stands for a command that never ends (a pull, a build): it says so
// by writing a line to ready (a FIFO the test reads, its handshake) and
// then blocks until it is killed.
func Hang(ready string) error {
	if ready == "" {
		return errors.New("fake: HANG needs HANG_READY, the file to signal on")
	}
	f, err := os.OpenFile(ready, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return err
	}
	if _, err := f.WriteString("hung\n"); err != nil {
		return err
	}
	f.Close()
	select {}
}

// ErrHelp ends a command after it printed its help: exit status 0.
var ErrHelp = errors.New("help")

// Main runs the fake with args (argv without argv[0]) and returns the exit
// status.
func (cli *CLI[A]) Main(args []string, stdin io.Reader, stdout, stderr io.Writer, getenv func(string) string) int {
	known := make([][]string, 0, len(cli.Commands))
	for _, c := range cli.Commands {
		known = append(known, c.Path)
	}
	path, rest, ok := cli.Route(args, known, getenv)
	var cmd *Command[A]
	if ok {
		for i := range cli.Commands {
			if slices.Equal(cli.Commands[i].Path, path) {
				cmd = &cli.Commands[i]
			}
		}
	}
	if cmd == nil || !cmd.Hidden {
		if err := LogArgv(getenv(cli.Knobs+"_LOG"), args); err != nil {
			fmt.Fprintf(stderr, "fake: log: %v\n", err)
			return 1
		}
	}
	if !ok {
		return cli.Foreign(args, stdout, stderr)
	}
	c := &Call{Stdin: stdin, Stdout: stdout, Stderr: stderr, Getenv: getenv, Path: path, knobs: cli.Knobs, noise: cli.Noise}
	code, err := cli.run(c, cmd, path, rest)
	var e *Error
	switch {
	case err == nil:
		return code
	case errors.Is(err, ErrHelp):
		return 0
	case errors.As(err, &e):
	default:
		e = &Error{Msg: err.Error(), Code: 1}
	}
	cli.Print(c, stderr, e)
	return e.Code
}

func (cli *CLI[A]) run(c *Call, cmd *Command[A], path, rest []string) (int, error) {
	var err error
	if c.Now, err = Now(c.Getenv); err != nil {
		return 1, err
	}
	knob := cli.VersionKnob
	if knob == "" {
		knob = cli.Knobs + "_VERSION"
	}
	v := c.Getenv(knob)
	if v == "" {
		v = cli.DefaultVersion
	}
	if c.Version, err = ParseVersion(v); err != nil {
		return 1, fmt.Errorf("fake: %s: %v", knob, err)
	}
	if c.Store.Path = c.Knob("STATE"); c.Store.Path == "" {
		return 1, fmt.Errorf("fake: %s_STATE is not set", cli.Knobs)
	}
	a := cli.New(c)
	if cmd == nil {
		return 1, cli.Unknown(a, path, rest)
	}
	var runErr error
	if !cmd.Hidden {
		if cli.Before != nil {
			if err := cli.Before(a, path); err != nil {
				return 1, err
			}
		}
		rules, err := ParseFail(c.Knob("FAIL"))
		if err != nil {
			return 1, fmt.Errorf("fake: %s_FAIL: %v", cli.Knobs, err)
		}
		var fail bool
		if err := c.Store.Update(func(st *fakestate.State) error {
			fail = CountCall(st, path, rules)
			return nil
		}); err != nil {
			return 1, err
		}
		if fail {
			runErr = cli.Injected(a, path, rest)
		}
		if hang := c.Knob("HANG"); hang != "" && hang == strings.Join(path, " ") {
			return 1, Hang(c.Knob("HANG_READY"))
		}
	}
	if runErr == nil {
		runErr = cmd.Run(a, rest)
	}
	var ex *Exit
	if errors.As(runErr, &ex) {
		return ex.Code, nil
	}
	return 0, runErr
}
