//go:build !unix

package egress

import (
	"context"
	"fmt"
	"io"
)

// InitMain is `sbx __sandbox-init`, PID 1 of a Linux sandbox; an sbx built
// for another OS never runs as one.
func InitMain(ctx context.Context, args []string, stderr io.Writer) int {
	fmt.Fprintln(stderr, "sbx __sandbox-init runs inside a Linux sandbox, not on this OS")
	return 2
}
