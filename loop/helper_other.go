//go:build !unix

package loop

import (
	"fmt"
	"io"
)

// RunGroupMain is `sbx __run-group`, which runs inside a Linux sandbox; an
// sbx built for another OS is never the helper inside a sandbox.
func RunGroupMain(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fmt.Fprintln(stderr, "sbx __run-group runs inside a Linux sandbox, not on this OS")
	return 2
}

// KillGroupMain is `sbx __kill-group`; see RunGroupMain.
func KillGroupMain(args []string, stderr io.Writer) int {
	fmt.Fprintln(stderr, "sbx __kill-group runs inside a Linux sandbox, not on this OS")
	return 2
}
