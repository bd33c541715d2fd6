//go:build !unix

package egress

import "context"

// reap has nothing to collect where there are no Unix processes: sandbox
// init runs in a Linux container, and builds elsewhere only compile it.
func reap(ctx context.Context) { <-ctx.Done() }
