package loop

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sbxhq/sbx/spec"
)

// TestCheckpointHook: loop.checkpoint calls the hook before each iteration
// (everyIteration) and once when the run completes (onComplete too), never
// when the run ends otherwise; a failing checkpoint is said and the run
// goes on.
func TestCheckpointHook(t *testing.T) {
	// The agent promises on its second iteration.
	script := `n=$(( $(cat n 2>/dev/null || echo 0) + 1 )); echo $n > n; [ $n -eq 2 ] && echo "<promise>COMPLETE</promise>"; true`
	tests := []struct {
		when  string
		max   int
		fail  bool
		want  []string
		state string
	}{
		{when: spec.CheckpointNever, max: 3, want: nil, state: StateCompleted},
		{when: spec.CheckpointOnComplete, max: 3, want: []string{"done"}, state: StateCompleted},
		{when: spec.CheckpointEveryIteration, max: 3, want: []string{"1", "2", "done"}, state: StateCompleted},
		{when: spec.CheckpointOnComplete, max: 1, want: nil, state: StateMaxIterations},
		{when: spec.CheckpointEveryIteration, max: 3, fail: true, want: []string{"1", "2", "done"}, state: StateCompleted},
	}
	for _, tc := range tests {
		t.Run(tc.when, func(t *testing.T) {
			f := newFixture(t, true)
			prompt := filepath.Join(t.TempDir(), "PROMPT.md")
			os.WriteFile(prompt, []byte("do it\n"), 0o644)
			l := spec.Loop{Prompt: prompt, PromptRoot: filepath.Dir(prompt), MaxIterations: tc.max, IterationTimeout: time.Minute,
				Completion: spec.Completion{Promise: "COMPLETE"}, Command: []string{"sh", "-c", script},
				Checkpoint: spec.LoopCheckpoint{When: tc.when, Keep: 3}}
			var got []string
			var runIDs []string
			res := Run(context.Background(), Config{
				Sandbox: "box", Agent: "shell", Workspace: f.ws, Loop: l,
				Exec: hostSandbox{}, Group: tempGrouper{t.TempDir()}, Control: f.control, Stdout: &f.out, Stderr: &f.out,
				Checkpoint: func(ctx context.Context, runID, when string) error {
					got = append(got, when)
					runIDs = append(runIDs, runID)
					if tc.fail {
						return errors.New("backend refused")
					}
					return nil
				},
			})
			if res.State != tc.state {
				t.Fatalf("state %s (%s), want %s\n%s", res.State, res.Detail, tc.state, f.out.String())
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("checkpoints (-want +got):\n%s", diff)
			}
			for _, id := range runIDs {
				if !strings.HasSuffix(res.RunDir, id) {
					t.Errorf("checkpoint for run %s, the run is %s", id, res.RunDir)
				}
			}
			if tc.fail && !strings.Contains(f.out.String(), "checkpoint (1) failed, the run goes on: backend refused") {
				t.Errorf("a failed checkpoint was not said:\n%s", f.out.String())
			}
		})
	}
}
