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
