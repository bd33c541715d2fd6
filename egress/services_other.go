//go:build !unix

package egress

import (
	"context"
	"fmt"
	"io"
)

// ServiceInitMain is `sbx __service-init`, PID 1 of a Linux service
// container; an sbx built for another OS never runs as one.
func ServiceInitMain(ctx context.Context, args []string, stderr io.Writer) int {
	fmt.Fprintf(stderr, "sbx %s runs inside a Linux service container, not on this OS\n", ServiceInitVerb)
	return 2
}
