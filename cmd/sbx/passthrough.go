package main

import (
	"context"
	"errors"
	"os"
	"os/exec"
)

// passedThroughEnv marks the environment of a command sbx passes a verb
// through to. An sbx that finds it set was itself taken for Docker's sbx
// (another copy of ours earlier or later on PATH) and must not pass the
// verb on again: two copies would call each other forever.
const passedThroughEnv = "SBX_PASSED_THROUGH"

// passThrough runs Docker's sbx with the same arguments, standard streams
// and exit code, so our sbx keeps every Docker verb working.
func (a *app) passThrough(ctx context.Context, path string, args []string) int {
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = a.stdin, a.stdout, a.stderr
	cmd.Env = append(os.Environ(), passedThroughEnv+"="+path)
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
