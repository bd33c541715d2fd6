package e2e

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sbxhq/sbx/loop"
)

// TestLoop drives sbx loop through the built binary on one sandbox, as a
// user would (issue 19: the loop measured the host's files while the
// agent worked on the pod's copy, so every iteration said "0 files
// changed" and the breaker ended every run). An agent that writes a file
// per iteration and gives the promise on its second completes on the
// second, each iteration counted as progress in the pod although the host
// workspace does not change meanwhile (the breaker, at one iteration
// without progress, would end the run at the first otherwise), and its
// files are in the host workspace afterwards. Then, on the same sandbox,
// an agent that changes nothing trips the breaker, and the run still
// brings the workspace home.
func TestLoop(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	c.enforce()
	ws := filepath.Join(t.TempDir(), "ws")
	if err := os.MkdirAll(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	const name = "loop-cli"
	head := "version: 1\nname: " + name + "\nagent: shell\ndriver: kubernetes\nworkspace: .\n" + c.Head() +
		"  namespace: " + c.NS + "\nnetwork: {agentHosts: false}\n"
	declare := func(section string) {
		t.Helper()
		for file, body := range map[string]string{"PROMPT.md": "Do the task.\n", "sandbox.yaml": head + section} {
			if err := os.WriteFile(filepath.Join(ws, file), []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	sbx := c.CLI(ws, filepath.Join(filepath.Dir(ws), "state"), "SBX_K8S_HELPER_IMAGE="+c.Helper)
	t.Cleanup(func() {
		if out, err := sbx("destroy", "-y"); err != nil {
			t.Errorf("sbx destroy: %v\n%s", err, out)
		}
	})
	records := func() []loop.Record {
		t.Helper()
		out, err := sbx("loop", "status", "--json")
		var s loop.Status
		if err == nil {
			err = json.Unmarshal([]byte(out), &s)
		}
		if err != nil {
			t.Fatalf("sbx loop status --json: %v\n%s", err, out)
		}
		return s.Records
	}
	type measured struct {
		Iteration  int
		Progressed bool
		Files      int
	}
	measures := func(recs []loop.Record) []measured {
		var m []measured
		for _, r := range recs {
			m = append(m, measured{r.Iteration, r.Progressed, r.Files})
		}
		return m
	}

	// Iteration n writes iter-n.txt (the first absent one), the second
	// also the promise.
	declare(`loop:
  prompt: PROMPT.md
  maxIterations: 4
  breaker: {noProgress: 1}
  completion: {promise: DONE}
  command: [sh, -c, 'n=1; while [ -e iter-$$n.txt ]; do n=$$((n+1)); done; echo $$n > iter-$$n.txt; [ $$n -lt 2 ] || echo "<promise>DONE</promise>"']
`)
	out, err := sbx("loop", "-y")
	if err != nil || !strings.Contains(out, "completed: complete after 2 iteration(s)") {
		t.Fatalf("sbx loop: %v\n%s", err, out)
	}
	want := []measured{{1, true, 1}, {2, true, 1}}
	if diff := cmp.Diff(want, measures(records())); diff != "" {
		t.Errorf("the iterations' progress (-want +got):\n%s\n%s", diff, out)
	}
	// The protected sandbox.yaml and PROMPT.md came back unchanged: no
	// entry was skipped that the user should look at.
	if !strings.Contains(out, "\nsbx loop: pulled the sandbox's workspace home: 2 files\n") {
		t.Errorf("sbx loop does not say it pulled the two files home:\n%s", out)
	}
	for i, want := range []string{"1\n", "2\n"} {
		if got, err := os.ReadFile(filepath.Join(ws, "iter-"+want[:1]+".txt")); string(got) != want {
			t.Errorf("iteration %d's file on the host: %q, %v", i+1, got, err)
		}
	}

	// An agent that changes nothing: the breaker trips after two.
	declare(`loop:
  prompt: PROMPT.md
  maxIterations: 5
  breaker: {noProgress: 2}
  completion: {promise: DONE}
  command: [sh, -c, 'echo thinking']
`)
	out, err = sbx("loop", "-y")
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != loop.ExitBreaker || !strings.Contains(out, "breaker: ") {
		t.Fatalf("sbx loop with an idle agent: %v, want exit %d (breaker)\n%s", err, loop.ExitBreaker, out)
	}
	want = []measured{{1, false, 0}, {2, false, 0}}
	if diff := cmp.Diff(want, measures(records())); diff != "" {
		t.Errorf("the idle iterations' progress (-want +got):\n%s\n%s", diff, out)
	}
	if !strings.Contains(out, "sbx loop: pulled the sandbox's workspace home: 2 files") {
		t.Errorf("a run the breaker ended does not bring the workspace home:\n%s", out)
	}
}
