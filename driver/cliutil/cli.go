package cliutil

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/sbxhq/sbx/driver"
	"github.com/sbxhq/sbx/driver/runner"
	"github.com/sbxhq/sbx/reconcile"
	"github.com/sbxhq/sbx/spec"
)

// CLI runs one of Docker's sandbox CLIs for its driver: every call through
// the runner, a sandbox-not-found message turned into ErrNotFound, and the
// backend's version, probed at most once, for version-gated behaviour and
// error messages.
type CLI struct {
	Runner *runner.Runner
	// Argv is the program and its fixed leading words: [".../sbx"] or
	// ["docker", "sandbox"].
	Argv []string
	// Name is how messages name the backend: "sbx", "docker sandbox".
	Name string
	// NotFound matches the backend's sandbox-not-found message on stderr.
	NotFound *regexp.Regexp

	version Version
	known   bool
}

// Cmd is the argv of a call.
func (c *CLI) Cmd(args ...string) []string {
	return append(append([]string(nil), c.Argv...), args...)
}

// Output runs a call and returns its standard output. A failure whose
// stderr says the sandbox does not exist wraps ErrNotFound.
func (c *CLI) Output(ctx context.Context, args ...string) ([]byte, error) {
	out, err := c.Runner.Output(ctx, c.Cmd(args...)...)
	var re *runner.Error
	if errors.As(err, &re) && c.NotFound != nil && c.NotFound.MatchString(re.Stderr) {
		return out, fmt.Errorf("%w: %v", ErrNotFound, err)
	}
	return out, err
}

// Exec runs argv in the sandbox with a docker-exec-style `exec` (`sbx exec`,
// `docker sandbox exec`, docker-sandboxes-cli.md §1.2, §1.3) and returns its
// exit status.
func (c *CLI) Exec(ctx context.Context, name string, argv []string, o driver.ExecOptions) (int, error) {
	flags, env := ExecArgs(o)
	args := append(append(append([]string{"exec"}, flags...), name), argv...)
	return ExitCode(c.Runner.Run(ctx, runner.Cmd{Args: c.Cmd(args...), Env: env, Stdin: o.Stdin, Stdout: o.Stdout, Stderr: o.Stderr}))
}

// ReadVersion finds the version in a version command's output: the first
// word starting with "v" that parses ("v0.53.0 COMMIT", "sbx version:
// v0.38.0 COMMIT", "Client Version:  v0.30.0 COMMIT",
// "github.com/docker/sandboxes/cli-plugin v0.7.1 COMMIT"), and remembers it.
func (c *CLI) ReadVersion(out []byte) (Version, error) {
	for _, f := range strings.Fields(string(out)) {
		if !strings.HasPrefix(f, "v") {
			continue
		}
		if v, err := ParseVersion(f); err == nil {
			c.UseVersion(v)
			return v, nil
		}
	}
	return Version{}, fmt.Errorf("%s version: cannot read the version from %q", c.Name, strings.TrimSpace(string(out)))
}

// UseVersion records the backend's version, probed elsewhere (sbx keeps it
// in its version cache).
func (c *CLI) UseVersion(v Version) { c.version, c.known = v, true }

// Known returns the backend's version if it is known without a probe.
func (c *CLI) Known() (Version, bool) { return c.version, c.known }

// Version returns the backend's version, running `version` the first time
// it is needed and not known.
func (c *CLI) Version(ctx context.Context) (Version, error) {
	if c.known {
		return c.version, nil
	}
	out, err := c.Output(ctx, "version")
	if err != nil {
		return Version{}, err
	}
	return c.ReadVersion(out)
}

// Source names a call's output for Doc's errors; the version is looked up
// (probed if need be) only when there is an error to report.
func (c *CLI) Source(ctx context.Context, args ...string) Source {
	return Source{Command: c.Name + " " + strings.Join(args, " "), Version: func() string {
		v, err := c.Version(ctx)
		if err != nil {
			return c.Name + " version unknown"
		}
		return c.Name + " " + v.String()
	}}
}

// Workspaces maps the workspaces a listing reports (the primary one first,
// then extra paths mounted at the same path; ":ro" marks read-only,
// docker-sbx-evidence.md §1.1) to the spec's.
func Workspaces(listed []string) (spec.Workspace, []spec.Mount) {
	var ws spec.Workspace
	var mounts []spec.Mount
	for i, w := range listed {
		path, ro := strings.CutSuffix(w, ":ro")
		if i == 0 {
			ws = spec.Workspace{Path: path, ReadOnly: ro}
			continue
		}
		mounts = append(mounts, spec.Mount{Source: path, Target: path, ReadOnly: ro})
	}
	return ws, mounts
}

// WorkspaceArgs are the path arguments of create: the workspace, then each
// mount, with ":ro" when read-only. The backends mount extra paths at the
// same path as on the host, so a mount with another target is an error.
func WorkspaceArgs(sb *spec.Spec, backend string) ([]string, error) {
	ws := sb.Workspace.Path
	if sb.Workspace.ReadOnly {
		ws += ":ro"
	}
	args := []string{ws}
	for _, m := range sb.Mounts {
		if m.Target != m.Source {
			return nil, fmt.Errorf("mount %s: the %s backend mounts extra paths at the same path as on the host; set target to %s", m.Source, backend, m.Source)
		}
		p := m.Source
		if m.ReadOnly {
			p += ":ro"
		}
		args = append(args, p)
	}
	return args, nil
}

// Listed checks that a sandbox is among the listed names (the verify step).
func Listed(name string, listed []string) error {
	for _, n := range listed {
		if n == name {
			return nil
		}
	}
	return fmt.Errorf("sandbox %q is not listed after apply", name)
}

// Call is one command of a plan (reconcile.Call): shown as its command
// line, run as it is shown.
func (c *CLI) Call(args ...string) reconcile.Call {
	return reconcile.Call{Desc: runner.Quote(c.Cmd(args...)), Run: func(ctx context.Context) error {
		_, err := c.Output(ctx, args...)
		return err
	}}
}

// IgnoreNotFound makes a call succeed when the sandbox is already gone
// (stop, remove).
func IgnoreNotFound(call reconcile.Call) reconcile.Call {
	run := call.Run
	call.Run = func(ctx context.Context) error {
		if err := run(ctx); err != nil && !errors.Is(err, ErrNotFound) {
			return err
		}
		return nil
	}
	return call
}

// VerifyCall is the verify step of a CLI backend: list it and find the
// sandbox there.
func (c *CLI) VerifyCall(name string, list func(ctx context.Context) ([]string, error), args ...string) reconcile.Call {
	return reconcile.Call{Desc: runner.Quote(c.Cmd(args...)) + "  # lists " + name, Run: func(ctx context.Context) error {
		names, err := list(ctx)
		if err != nil {
			return err
		}
		return Listed(name, names)
	}}
}

// StreamedCall is a plan's call of a long command (a build, a pull): what
// it prints goes to the apply's output as it runs (reconcile.CallOutput)
// as well as to the trace and, when it fails, the error.
func StreamedCall(r *runner.Runner, argv []string) reconcile.Call {
	return reconcile.Call{Desc: runner.Quote(argv), Run: func(ctx context.Context) error {
		return RunStreamed(ctx, r, argv)
	}}
}

// RunStreamed runs argv with its output going to the apply's output.
func RunStreamed(ctx context.Context, r *runner.Runner, argv []string) error {
	w := reconcile.CallOutput(ctx)
	return r.Run(ctx, runner.Cmd{Args: argv, Stdout: w, Stderr: w})
}
