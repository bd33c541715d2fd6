//go:build !unix

package inpod

import (
	"context"
	"fmt"
	"io"
)

// Exec is __k8s-exec, which runs inside a Linux pod only.
func Exec(_ context.Context, _ []string, _ io.Reader, _, stderr io.Writer) int {
	fmt.Fprintln(stderr, "sbx __k8s-exec runs inside a Linux pod, not on this OS")
	return 2
}
