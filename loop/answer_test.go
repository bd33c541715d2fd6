package loop

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sbxhq/sbx/driver"
	"github.com/sbxhq/sbx/spec"
)

// TestPromiseInAnswerOnly: the promise counts only in the agent's answer
// (its standard output), never in the prompt it was given: codex exec
// echoes the prompt on stderr, and the prompt names the promise (as sbx
// init's does); an agent that echoes it on stdout does not complete the
// run either. An answer that holds the promise's line, as the prompt
// asks, does.
func TestPromiseInAnswerOnly(t *testing.T) {
	for _, tc := range []struct {
		name, script string
		complete     bool
	}{
		{"echo on stderr", `cat >&2; echo "working on it"`, false},
		{"echo on stdout", `cat; echo "working on it"`, false},
		{"promise on stderr", `cat >/dev/null; echo '<promise>COMPLETE</promise>' >&2`, false},
		{"answer", `cat >/dev/null; echo 'All done.'; echo; echo '<promise>COMPLETE</promise>'`, true},
		{"answer after an echo", `cat; echo '<promise>COMPLETE</promise>'`, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, false)
			prompt := filepath.Join(t.TempDir(), "PROMPT.md")
			os.WriteFile(prompt, []byte("# Task\n\nDo it. When everything is done, print exactly:\n\n<promise>COMPLETE</promise>\n"), 0o644)
			l := spec.Loop{MaxIterations: 1, Prompt: prompt, PromptRoot: filepath.Dir(prompt), Completion: spec.Completion{Promise: "COMPLETE"}}
			res := f.run(context.Background(), tc.script, l, nil)
			rec := f.records(res)[0]
			if got := res.State == StateCompleted; got != tc.complete || rec.PromiseSeen != tc.complete {
				t.Errorf("state %s, promise seen %v; want complete %v\n%s", res.State, rec.PromiseSeen, tc.complete, f.out.String())
			}
		})
	}
}

// TestBackoffPause: after a failing iteration the run pauses
// (loop.backoff), its status saying so until when; stop ends the pause at
// once, and the run as interrupted.
func TestBackoffPause(t *testing.T) {
	f := newFixture(t, false)
	l := spec.Loop{MaxIterations: 3, Completion: spec.Completion{Promise: "X"}, Backoff: spec.Backoff{Initial: time.Hour, Max: 2 * time.Hour}}
	ag := f.agent("box", `echo failing; exit 1`, l, nil)
	r := f.begin(l, "box")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan *Result, 1)
	go func() {
		done <- r.Loop(ctx, Config{Workspace: f.ws, Loop: l, Agents: []Agent{ag}, Stdout: &f.out, Stderr: &f.out})
	}()
	deadline := time.Now().Add(time.Minute)
	for {
		s, err := ReadRun(r.Dir)
		if err == nil && s.Phase == PhasePausing {
			if s.PauseUntil == nil || time.Until(*s.PauseUntil) < 50*time.Minute {
				t.Errorf("pausing until %v, want an hour from now", s.PauseUntil)
			}
			if !strings.Contains(s.Doing(), "pausing after iteration 1 of 3 failed") {
				t.Errorf("status says %q", s.Doing())
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the run never paused: %+v", s)
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	res := <-done
	if res.State != StateInterrupted || res.Iterations != 1 || !strings.Contains(res.Detail, "while pausing") {
		t.Errorf("result %+v", res)
	}
}

// TestBackoffResets: the pause grows with failures in a row and a
// successful iteration ends the streak (Backoff.Pause has the doubling).
func TestBackoffResets(t *testing.T) {
	f := newFixture(t, false)
	l := spec.Loop{MaxIterations: 4, Completion: spec.Completion{Promise: "X"}, Backoff: spec.Backoff{Initial: time.Millisecond, Max: 4 * time.Millisecond}}
	// Iterations 1, 2 fail, 3 succeeds, 4 fails.
	script := `n=$(cat n 2>/dev/null || echo 0); n=$((n+1)); echo $n > n; [ $n -eq 3 ] && exit 0; exit 1`
	res := f.run(context.Background(), script, l, nil)
	if res.State != StateMaxIterations {
		t.Fatalf("result %+v\n%s", res, f.out.String())
	}
	var pauses []string
	for _, line := range strings.Split(f.out.String(), "\n") {
		if strings.Contains(line, "pausing") {
			pauses = append(pauses, strings.TrimPrefix(line, "sbx loop: "))
		}
	}
	want := []string{
		"pausing 1ms after 1 failing iteration in a row (loop.backoff)",
		"pausing 2ms after 2 failing iterations in a row (loop.backoff)",
	}
	if fmt.Sprint(pauses) != fmt.Sprint(want) {
		t.Errorf("pauses:\n%s\nwant:\n%s", strings.Join(pauses, "\n"), strings.Join(want, "\n"))
	}
}

// TestOrphanKilled: a run whose process died while its agent ran leaves
// the agent's pid file in its status; the sandbox's next run kills that
// agent before its first iteration, so two agents never work the same
// workspace.
func TestOrphanKilled(t *testing.T) {
	f := newFixture(t, false)
	l := spec.Loop{MaxIterations: 1, Completion: spec.Completion{Promise: "X"}}
	ag := f.agent("box", `echo '<promise>X</promise>'`, l, nil)
	dir := ag.Group.(tempGrouper).dir
	// The agent the dead run left: a process group of its own, its pid
	// file where the grouper keeps it.
	pidfile := "/tmp/sbx-loop-dead-1.pid"
	orphan := exec.Command("setsid", "sh", "-c", `echo $$ > "$0"; exec sleep 300`, filepath.Join(dir, filepath.Base(pidfile)))
	if err := orphan.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- orphan.Wait() }()
	t.Cleanup(func() { orphan.Process.Kill() })
	for i := 0; ; i++ {
		if _, err := os.Stat(filepath.Join(dir, filepath.Base(pidfile))); err == nil {
			break
		}
		if i > 3000 {
			t.Fatal("the orphan never wrote its pid file")
		}
		time.Sleep(10 * time.Millisecond)
	}
	// The dead run: its status says an agent runs, its process is gone.
	dead := f.begin(l, "box")
	dead.update(func(s *Status) {
		s.Phase, s.Iteration, s.IterationSandbox, s.AgentPidfile = PhaseAgent, 1, "box", pidfile
		s.PID, s.PIDStart = deadPID(t), "gone"
	})
	dead.release()

	r := f.begin(l, "box")
	if s := r.Status(); len(s.Orphans) != 1 || s.Orphans[0].Pidfile != pidfile || s.Orphans[0].RunID != dead.ID {
		t.Fatalf("the new run found orphans %+v", s.Orphans)
	}
	res := r.Loop(context.Background(), Config{Workspace: f.ws, Loop: l, Agents: []Agent{ag}, Stdout: &f.out, Stderr: &f.out})
	if res.State != StateCompleted {
		t.Fatalf("result %+v\n%s", res, f.out.String())
	}
	select {
	case <-exited:
	case <-time.After(time.Minute):
		t.Fatal("the orphaned agent still runs after the next run started")
	}
	if !strings.Contains(f.out.String(), "killed the agent that run "+dead.ID+" left running in sandbox \"box\"") {
		t.Errorf("output:\n%s", f.out.String())
	}
}

// deadPID is the pid of a process that has exited.
func deadPID(t *testing.T) int {
	c := exec.Command("true")
	if err := c.Run(); err != nil {
		t.Fatal(err)
	}
	return c.Process.Pid
}

// unwritable is a sandbox whose workspace the agent's user cannot write.
type unwritable struct{ hostSandbox }

func (u unwritable) Exec(ctx context.Context, argv []string, o driver.ExecOptions) (int, error) {
	if len(argv) == 3 && argv[2] == writableScript {
		fmt.Fprintln(o.Stdout, "uid=1000(agent) gid=1000(agent) groups=1000(agent)")
		return 3, nil
	}
	return u.hostSandbox.Exec(ctx, argv, o)
}

// TestWorkspaceNotWritable: an agent that cannot write the workspace is
// said before the first iteration, with who it runs as and what to do,
// not found after iterations of "0 files changed"; a read-only workspace
// the file declared is not checked.
func TestWorkspaceNotWritable(t *testing.T) {
	f := newFixture(t, false)
	l := spec.Loop{MaxIterations: 2, Completion: spec.Completion{Promise: "X"}}
	ag := f.agent("box", `echo ran > ran`, l, nil)
	ag.Exec = unwritable{}
	r := f.begin(l, "box")
	res := r.Loop(context.Background(), Config{Workspace: f.ws, Loop: l, Agents: []Agent{ag}, Stdout: &f.out, Stderr: &f.out})
	if res.State != StateError || res.Iterations != 0 ||
		!strings.Contains(res.Detail, `the agent cannot write the workspace `+f.ws+` in sandbox "box": it runs as uid=1000(agent) gid=1000(agent)`) ||
		!strings.Contains(res.Detail, "set user: in box.yaml") {
		t.Errorf("result %+v", res)
	}
	if _, err := os.Stat(filepath.Join(f.ws, "ran")); err == nil {
		t.Error("an iteration ran")
	}

	f2 := newFixture(t, false)
	ag = f2.agent("box", `echo '<promise>X</promise>'`, l, nil)
	ag.Exec, ag.WorkspaceReadOnly = unwritable{}, true
	r = f2.begin(l, "box")
	if res := r.Loop(context.Background(), Config{Workspace: f2.ws, Loop: l, Agents: []Agent{ag}, Stdout: &f2.out, Stderr: &f2.out}); res.State != StateCompleted {
		t.Errorf("a read-only workspace: %+v", res)
	}
}
