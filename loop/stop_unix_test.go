//go:build unix

package loop

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/sbxhq/sbx/spec"
)

// TestStopInterrupts: stopping a run mid-iteration kills the agent and
// ends the run as interrupted, with the iteration recorded, in a
// workspace that takes reading (the snapshot after the agent sees the
// stop too).
func TestStopInterrupts(t *testing.T) {
	f := newFixture(t, true)
	for i := range 50 {
		os.WriteFile(filepath.Join(f.ws, fmt.Sprintf("file%d", i)), []byte("x"), 0o644)
	}
	// The agent says it runs through a FIFO outside the workspace: the
	// test's read returns once the agent has written it.
	ready := filepath.Join(t.TempDir(), "ready")
	if err := syscall.Mkfifo(ready, 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan *Result)
	go func() {
		done <- f.run(ctx, `echo started > '`+ready+`'; sleep 300`, spec.Loop{MaxIterations: 5, Completion: spec.Completion{Promise: "X"}}, nil)
	}()
	started := make(chan error, 1)
	go func() { _, err := os.ReadFile(ready); started <- err }()
	select {
	case err := <-started:
		if err != nil {
			t.Fatal(err)
		}
	case res := <-done:
		t.Fatalf("the loop ended before its agent started: %+v\n%s", res, f.out.String())
	}
	cancel()
	select {
	case res := <-done:
		if res.State != StateInterrupted || res.ExitCode != ExitInterrupted || res.Iterations != 1 {
			t.Fatalf("result = %+v\n%s", res, f.out.String())
		}
		if recs := f.records(res); len(recs) != 1 || !recs[0].Interrupted {
			t.Errorf("records = %+v", recs)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the loop did not stop")
	}
}
