package fakecli

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/spf13/pflag"

	"github.com/sbxhq/sbx/internal/fakecli/fakestate"
)

// Cmd is a command run "inside" a fake sandbox, which is the host.
type Cmd struct {
	Argv []string
	// Env is the complete environment (KEY=VALUE); its PATH is used to find
	// Argv[0].
	Env []string
	Dir string
	// Stdin is nil unless the caller passed -i, as with `docker exec`.
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	// Detach starts the command and returns without waiting (G2 `exec -d`).
	Detach bool
}

// StartError is a failure to start the command, with the exit status
// `docker exec` gives for it (127 not found, 126 cannot invoke).
type StartError struct {
	Code int
	Msg  string
}

func (e *StartError) Error() string { return e.Msg }

// Run runs c and returns its exit status (128+signal when killed by a
// signal). A command that cannot be started gives a *StartError.
func (c Cmd) Run() (int, error) {
	if len(c.Argv) == 0 {
		return 1, errors.New("no command given")
	}
	path, err := lookPath(c.Argv[0], c.Env)
	if err != nil {
		return 127, &StartError{Code: 127, Msg: fmt.Sprintf("exec: %q: executable file not found in $PATH", c.Argv[0])}
	}
	if c.Dir != "" {
		if fi, err := os.Stat(c.Dir); err != nil || !fi.IsDir() {
			return 126, &StartError{Code: 126, Msg: fmt.Sprintf("chdir to cwd (%q) set in config.json failed: no such file or directory", c.Dir)}
		}
	}
	cmd := exec.Command(path, c.Argv[1:]...)
	cmd.Args[0] = c.Argv[0]
	cmd.Env = c.Env
	cmd.Dir = c.Dir
	cmd.Stdin = c.Stdin
	cmd.Stdout = c.Stdout
	cmd.Stderr = c.Stderr
	if c.Detach {
		cmd.Stdin, cmd.Stdout, cmd.Stderr = nil, nil, nil
		if err := cmd.Start(); err != nil {
			return 126, &StartError{Code: 126, Msg: err.Error()}
		}
		return 0, cmd.Process.Release()
	}
	err = cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0, nil
	case errors.As(err, &ee):
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal()), nil
		}
		return ee.ExitCode(), nil
	default:
		return 126, &StartError{Code: 126, Msg: err.Error()}
	}
}

func lookPath(name string, env []string) (string, error) {
	if strings.Contains(name, "/") {
		return exec.LookPath(name)
	}
	pathEnv := ""
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			pathEnv = v
		}
	}
	for _, dir := range filepath.SplitList(pathEnv) {
		if dir == "" {
			dir = "."
		}
		p := filepath.Join(dir, name)
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", exec.ErrNotFound
}

// ExecFlags are the docker-exec-style flags of both fakes' exec verbs
// (`sbx exec`, `docker sandbox exec`: "Flags match the behavior of docker
// exec", docker-sandboxes-cli.md §1.3).
type ExecFlags struct {
	Detach, Interactive *bool
	Env, EnvFiles       *[]string
	Workdir             *string
}

// AddExecFlags defines the exec flags on fs (stopping at the first
// positional, as docker exec does).
func AddExecFlags(fs *pflag.FlagSet) *ExecFlags {
	fs.SetInterspersed(false)
	f := &ExecFlags{
		Detach:      fs.BoolP("detach", "d", false, "Detached mode: run command in the background"),
		Env:         fs.StringArrayP("env", "e", nil, "Set environment variables"),
		EnvFiles:    fs.StringArray("env-file", nil, "Read in a file of environment variables"),
		Interactive: fs.BoolP("interactive", "i", false, "Keep STDIN open even if not attached"),
		Workdir:     fs.StringP("workdir", "w", "", "Working directory inside the sandbox"),
	}
	fs.String("detach-keys", "", "Override the key sequence for detaching")
	fs.Bool("privileged", false, "Give extended privileges to the command")
	fs.BoolP("tty", "t", false, "Allocate a pseudo-TTY")
	fs.StringP("user", "u", "", "Username or UID (format: <name|uid>[:<group|gid>])")
	return f
}

// passEnv are the host variables a command inside a fake sandbox inherits,
// so that it can run at all; everything else comes from the sandbox's
// stored env, extra, --env-file and -e, in that order.
var passEnv = []string{"PATH", "HOME", "TMPDIR", "LANG", "TERM", "USER"}

// RunIn runs argv "inside" sb (on the host) with f's flags: in the primary
// workspace unless -w, stdin only with -i. It returns the exit status; a
// command that cannot start prints the error and gets 127 or 126.
func (c *Call) RunIn(sb *fakestate.Sandbox, f *ExecFlags, argv []string, extra map[string]string) (int, error) {
	var e Env
	for _, k := range passEnv {
		if v := c.Getenv(k); v != "" {
			e.Set(k, v)
		}
	}
	for _, m := range []map[string]string{extra, sb.Env} {
		for k, v := range m {
			e.Set(k, v)
		}
	}
	for _, file := range *f.EnvFiles {
		if err := e.AddFile(file, c.Getenv); err != nil {
			return 1, Errorf("%v", err)
		}
	}
	for _, s := range *f.Env {
		if err := e.AddSpec(s, c.Getenv); err != nil {
			return 1, Errorf("%v", err)
		}
	}
	dir := *f.Workdir
	if dir == "" && len(sb.Workspaces) > 0 {
		dir = sb.Workspaces[0].Path
	}
	if dir == "" {
		dir = c.Getenv("HOME")
	}
	cmd := Cmd{Argv: argv, Env: e.List(), Dir: dir, Stdout: c.Stdout, Stderr: c.Stderr, Detach: *f.Detach}
	if *f.Interactive {
		cmd.Stdin = c.Stdin
	}
	return cmd.Run()
}
