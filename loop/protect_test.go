package loop

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sbxhq/sbx/spec"
)

// TestNoIterationWithoutProtection: the agent undoes its declaration's
// protection during an iteration (here it leaves a file that the fake
// backend reads as "lost"); the next iteration does not start, and the
// run ends saying why.
func TestNoIterationWithoutProtection(t *testing.T) {
	f := newFixture(t, true)
	l := spec.Loop{MaxIterations: 3, Completion: spec.Completion{Promise: "COMPLETE"}}
	ag := f.agent("box", `date +%s%N >> progress.txt; echo ran >> runs.txt; touch lost`, l, nil)
	var asked []string
	unprotected := func(ctx context.Context, sandbox string) ([]string, error) {
		asked = append(asked, sandbox)
		if _, err := os.Stat(filepath.Join(f.ws, "lost")); err == nil {
			return []string{"workspace.protect: prompts was replaced"}, nil
		}
		return nil, nil
	}
	r := f.begin(l, "box")
	res := r.Loop(context.Background(), Config{Workspace: f.ws, Loop: ag.Loop, Agents: []Agent{ag}, Stdout: &f.out, Stderr: &f.out, Unprotected: unprotected})
	if res.State != StateError || res.Iterations != 1 {
		t.Fatalf("result = %+v\n%s", res, f.out.String())
	}
	for _, want := range []string{"iteration 2 not started", `sandbox "box" lost the protection of its declaration (workspace.protect: prompts was replaced)`, "'sbx apply' restores it"} {
		if !strings.Contains(res.Detail, want) {
			t.Errorf("detail %q does not say %q", res.Detail, want)
		}
	}
	data, _ := os.ReadFile(filepath.Join(f.ws, "runs.txt"))
	if got := strings.Count(string(data), "ran"); got != 1 {
		t.Errorf("the agent ran %d times, want 1", got)
	}
	if len(asked) != 2 {
		t.Errorf("asked %d times before iterations, want 2 (before 1 and before 2)", len(asked))
	}
}
