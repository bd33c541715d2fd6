package fakesbx

import (
	"fmt"

	"github.com/sbxhq/sbx/internal/fakecli"
	"github.com/sbxhq/sbx/internal/fakecli/fakestate"
)

// passEnv are the host variables a command inside the fake sandbox
// inherits, so that it can run at all; everything else comes from the
// sandbox's stored env and -e/--env-file.
var passEnv = []string{"PATH", "HOME", "TMPDIR", "LANG", "TERM", "USER"}

// exec is `sbx exec [flags] SANDBOX COMMAND [ARG...]` (docker-sandboxes-cli.md
// §1.3 exec): starts a stopped sandbox first, runs in the primary workspace
// unless -w, -d is rejected (0.45.0), a missing binary exits 127 (0.21.0),
// otherwise the command's own exit status (§2.11).
func (a *app) exec(args []string) error {
	fs := newFlags("exec")
	fs.SetInterspersed(false)
	detach := fs.BoolP("detach", "d", false, "Detached mode (not supported)")
	fs.String("detach-keys", "", "Override the key sequence for detaching")
	env := fs.StringArrayP("env", "e", nil, "Set environment variables")
	envFiles := fs.StringArray("env-file", nil, "Read in a file of environment variables")
	interactive := fs.BoolP("interactive", "i", false, "Keep STDIN open")
	fs.Bool("privileged", false, "Give extended privileges to the command")
	fs.BoolP("tty", "t", false, "Allocate a pseudo-TTY")
	fs.StringP("user", "u", "", "Username or UID (format: <name|uid>[:<group|gid>])")
	workdir := fs.StringP("workdir", "w", "", "Working directory inside the sandbox")
	args, err := a.parse(fs, args)
	if err != nil {
		return err
	}
	if *detach {
		// Release notes 0.45.0 (§1.3 exec); wording UNCONFIRMED.
		return &cliError{msg: "detached execution (-d/--detach) is not supported", code: 1}
	}
	if err := argsCheck(args, 2, -1); err != nil {
		return err
	}
	var sb fakestate.Sandbox
	if err := a.store.Update(func(st *fakestate.State) error {
		s, err := a.lookup(st, args[0])
		if err != nil {
			return err
		}
		if s.Status != "running" {
			s.Status, s.StartedAt = "running", a.now
		}
		s.LastUsedAt = a.now
		sb = *s
		return nil
	}); err != nil {
		return err
	}
	var e fakecli.Env
	for _, k := range passEnv {
		if v := a.getenv(k); v != "" {
			e.Set(k, v)
		}
	}
	if a.version.AtLeast("0.39.0") {
		e.Set("SANDBOX_NAME", sb.Name)
		e.Set("SANDBOX_ID", sb.ID)
	}
	for k, v := range sb.Env {
		e.Set(k, v)
	}
	for _, f := range *envFiles {
		if err := e.AddFile(f, a.getenv); err != nil {
			return &cliError{msg: err.Error(), code: 1}
		}
	}
	for _, s := range *env {
		if err := e.AddSpec(s, a.getenv); err != nil {
			return &cliError{msg: err.Error(), code: 1}
		}
	}
	dir := *workdir
	if dir == "" {
		if len(sb.Workspaces) > 0 {
			dir = sb.Workspaces[0].Path
		} else {
			dir = a.getenv("HOME")
		}
	}
	cmd := fakecli.Cmd{Argv: args[1:], Env: e.List(), Dir: dir, Stdout: a.stdout, Stderr: a.stderr}
	if *interactive {
		cmd.Stdin = a.stdin
	}
	code, err := cmd.Run()
	if err != nil {
		fmt.Fprintf(a.stderr, "ERROR: %v\n", err)
	}
	return &exitCode{code: code}
}
