//go:build unix

package loop

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	fx "github.com/sbxhq/sbx/internal/fixture"
	"github.com/sbxhq/sbx/internal/tarball"
	"github.com/sbxhq/sbx/spec"
)

// pulls records the loop's calls of Agent.Pull: when (the run's phase)
// and with what context.
type pulls struct {
	f     *fixture
	st    *tarball.Stats
	err   error
	mu    sync.Mutex
	calls []string
	// live and left are the context's state at the last call.
	live bool
	left time.Duration
}

func (p *pulls) Pull(ctx context.Context) (*tarball.Stats, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls = append(p.calls, p.f.latest().Phase)
	p.live = ctx.Err() == nil
	if d, ok := ctx.Deadline(); ok {
		p.left = time.Until(d)
	}
	return p.st, p.err
}

// copyAgent is an agent whose sandbox works on its own copy of the
// workspace (a new directory), measured there, and pulled with p.
func (f *fixture) copyAgent(script string, l spec.Loop, p *pulls) (Agent, string) {
	copyDir := f.t.TempDir()
	ag := f.agent("box", script, l, nil)
	ag.Exec = copySandbox{copyDir}
	ag.Progress = &SandboxProgress{Exec: ag.Exec, Binary: copyBinary, Dir: copyDir}
	ag.Pull = p
	return ag, copyDir
}

// TestPullHomeWhateverTheEnd: the copy comes home when the breaker ends
// the run; a pull that fails is said, in the run's detail too (its error,
// which may name the agent's files, escaped), without changing how the
// run ended; a run that never started an agent (its
// configuration refused) pulls nothing.
func TestPullHomeWhateverTheEnd(t *testing.T) {
	f := newFixture(t, false)
	l := spec.Loop{MaxIterations: 5, Breaker: spec.Breaker{NoProgress: 2}, Completion: spec.Completion{Promise: "DONE"}}
	p := &pulls{f: f, st: &tarball.Stats{}, err: errors.New("extracting x\x1b[2J: more than 8 GiB")}
	ag, _ := f.copyAgent(`echo thinking`, l, p)
	res := f.begin(l, "box").Loop(context.Background(), Config{Workspace: f.ws, Loop: l, Agents: []Agent{ag}, Stdout: &f.out, Stderr: &f.out})
	want := `no progress in 2 iterations in a row (neither the working tree nor HEAD changed); the sandbox's workspace was not pulled home ("extracting x\x1b[2J: more than 8 GiB"): run sbx pull`
	if res.State != StateBreaker || res.ExitCode != ExitBreaker || res.Detail != want {
		t.Errorf("result %+v, want the breaker's, detail %q\n%s", res, want, f.out.String())
	}
	if len(p.calls) != 1 || !strings.Contains(f.out.String(), `sbx loop: pulling the sandbox's workspace home failed: "extracting x\x1b[2J: more than 8 GiB"; sbx pull copies it`+"\n") {
		t.Errorf("pulls %v\n%s", p.calls, f.out.String())
	}

	g := newFixture(t, false)
	q := &pulls{f: g, st: &tarball.Stats{}}
	bad := spec.Loop{MaxIterations: 0}
	ag, _ = g.copyAgent(`echo thinking`, bad, q)
	if res := g.begin(spec.Loop{MaxIterations: 1}, "box").Loop(context.Background(), Config{Workspace: g.ws, Loop: bad, Agents: []Agent{ag}}); res.State != StateError || len(q.calls) > 0 {
		t.Errorf("a refused run: %+v, pulls %v", res, q.calls)
	}
}

// TestPullHomeInterrupted: Ctrl-C in an iteration still brings the work
// home, with a context of its own that is not done but ends soon.
func TestPullHomeInterrupted(t *testing.T) {
	f := newFixture(t, false)
	ready := filepath.Join(t.TempDir(), "ready")
	if err := syscall.Mkfifo(ready, 0o600); err != nil {
		t.Fatal(err)
	}
	l := spec.Loop{MaxIterations: 5, Completion: spec.Completion{Promise: "DONE"}}
	p := &pulls{f: f, st: &tarball.Stats{Files: 3}}
	ag, _ := f.copyAgent(`echo work > w.txt; echo started > '`+ready+`'; sleep 300`, l, p)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan *Result)
	go func() {
		done <- f.begin(l, "box").Loop(ctx, Config{Workspace: f.ws, Loop: l, Agents: []Agent{ag}, Stdout: &f.out, Stderr: &f.out})
	}()
	fx.Promptly(t, func() { os.ReadFile(ready) })
	cancel()
	var res *Result
	fx.Promptly(t, func() { res = <-done })
	if res.State != StateInterrupted {
		t.Fatalf("result %+v\n%s", res, f.out.String())
	}
	if len(p.calls) != 1 || !p.live || p.left <= 0 || p.left > interruptedPull {
		t.Errorf("pulls %v, context live %v with %s left; want one, live, at most %s", p.calls, p.live, p.left, interruptedPull)
	}
	if !strings.Contains(f.out.String(), "sbx loop: pulled the sandbox's workspace home: 3 files\n") {
		t.Errorf("output:\n%s", f.out.String())
	}
}
