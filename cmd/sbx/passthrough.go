package main

import (
	"context"
	"errors"
	"os/exec"

	"github.com/sbxhq/sbx/session"
)

// passThrough runs Docker's sbx with the same arguments, standard streams
// and exit code, so our sbx keeps every Docker verb working.
func (a *app) passThrough(ctx context.Context, path string, args []string) int {
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = a.stdin, a.stdout, a.stderr
	cmd.Env = append(append([]string(nil), a.env...), session.PassedThroughEnv+"="+path)
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &ee) && ee.ExitCode() >= 0:
		return ee.ExitCode()
	default:
		return a.errorf("running Docker's sbx (%s): %v", path, err)
	}
}
