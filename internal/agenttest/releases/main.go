// Command releases tells CI whether the agents' newest releases differ
// from the pins (internal/agenttest): it prints "new" or "same" on
// stdout, and both sets of versions on stderr for the log. .ci/run runs
// the real-agent tests a second time, with SBX_AGENT_RELEASES=latest,
// when they are new. A registry that cannot be read, or whose answers
// are not what agenttest.LatestPins accepts, is a failure (exit 1).
//
//	go run ./internal/agenttest/releases
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"time"

	"github.com/sbxhq/sbx/internal/agenttest"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	os.Exit(run(ctx, agenttest.New(os.Getenv), os.Stdout, os.Stderr))
}

// timeout bounds the four requests to the registry.
const timeout = 2 * time.Minute

// run compares c's pins with the newest releases of c's registry.
func run(ctx context.Context, c *agenttest.Cache, stdout, stderr io.Writer) int {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	latest, err := c.LatestPins(ctx)
	if err != nil {
		fmt.Fprintf(stderr, "releases: the agents' newest releases: %v\n", err)
		return 1
	}
	fmt.Fprintf(stderr, "agent releases: pinned %s; newest %s\n", c.Pins, latest)
	if sameBuilds(latest, c.Pins) {
		fmt.Fprintln(stdout, "same")
	} else {
		fmt.Fprintln(stdout, "new")
	}
	return 0
}

// sameBuilds reports whether a and b name the same tarballs: the same
// packages, versions and digests, wherever they are downloaded from.
func sameBuilds(a, b agenttest.Pins) bool {
	same := func(p, q agenttest.Pin) bool {
		return p.Name == q.Name && p.Version == q.Version && p.Integrity == q.Integrity
	}
	return same(a.Claude, b.Claude) && same(a.Codex, b.Codex)
}
