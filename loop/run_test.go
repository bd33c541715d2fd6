package loop

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sbxhq/sbx/internal/proc"
	"github.com/sbxhq/sbx/netlog"
	"github.com/sbxhq/sbx/spec"
	"github.com/sbxhq/sbx/state"
)

// waitFor polls cond until it holds: a handshake on what the run writes,
// never a fixed sleep.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (f *fixture) exists(name string) bool {
	_, err := os.Stat(filepath.Join(f.ws, name))
	return err == nil
}

func (f *fixture) latest() *Status {
	f.t.Helper()
	s, err := f.control.Latest()
	if err != nil {
		f.t.Fatal(err)
	}
	return s
}

// TestStatusTrueFromFirstInstant: a run says what it does from the moment
// it begins: converging before its loop, the iteration that runs (not the
// one before it), the verify command running, and how it ended.
func TestStatusTrueFromFirstInstant(t *testing.T) {
	f := newFixture(t, true)
	if _, err := f.control.Latest(); !errors.As(err, new(*NoRunError)) {
		t.Fatalf("before any run: %v", err)
	}
	l := spec.Loop{MaxIterations: 2, Completion: spec.Completion{Verify: []string{`touch verifying; while [ ! -f go-verify ]; do sleep 0.01; done`}}}
	ag := f.agent("box", `n=$(( $(cat n 2>/dev/null || echo 0) + 1 )); echo $n > n; touch in-$n; while [ ! -f go-$n ]; do sleep 0.01; done`, l, nil)
	r := f.begin(l, "box")
	s := f.latest()
	if s.State != StateRunning || s.Phase != PhaseConverging || s.Iteration != 0 || s.PID != os.Getpid() || s.MaxIterations != 2 || !s.Live() {
		t.Fatalf("as the run begins: %+v", s)
	}
	done := make(chan *Result)
	go func() {
		done <- r.Loop(context.Background(), Config{Workspace: f.ws, Loop: l, Agents: []Agent{ag}, Stdout: &f.out, Stderr: &f.out})
	}()
	waitFor(t, "iteration 1", func() bool { return f.exists("in-1") })
	if s := f.latest(); s.Phase != PhaseAgent || s.Iteration != 1 || s.IterationStarted == nil || s.LastOutcome != nil || s.Doing() != "iteration 1 of 2 running" {
		t.Errorf("during iteration 1: %+v", s)
	}
	os.WriteFile(filepath.Join(f.ws, "go-1"), nil, 0o644)
	waitFor(t, "verify", func() bool { return f.exists("verifying") })
	if s := f.latest(); s.Phase != PhaseVerifying || s.Iteration != 1 || !strings.HasPrefix(s.VerifyCommand, "touch verifying") {
		t.Errorf("during verify: %+v", s)
	}
	os.WriteFile(filepath.Join(f.ws, "go-verify"), nil, 0o644)
	res := <-done
	if res.State != StateCompleted {
		t.Fatalf("result %+v\n%s", res, f.out.String())
	}
	s = f.latest()
	if s.State != StateCompleted || s.Phase != PhaseFinished || s.Iteration != 1 || s.Live() || s.LastOutcome == nil || s.VerifyCommand != "" {
		t.Errorf("after the run: %+v", s)
	}
	if err := s.ReadRecords(); err != nil || len(s.Records) != 1 || s.Records[0].Summary != s.LastOutcome.Summary {
		t.Errorf("records: %+v, %v", s.Records, err)
	}
	if log, _ := os.ReadFile(s.Log); !strings.Contains(string(log), "sbx loop: iteration 1: exit 0 after") {
		t.Errorf("the run's log:\n%s", log)
	}
}

// TestSecondRunRefused: a sandbox with a live run refuses another at once,
// saying which run holds it and where to look; once the run ends, a new
// one begins.
func TestSecondRunRefused(t *testing.T) {
	f := newFixture(t, false)
	r := f.begin(spec.Loop{MaxIterations: 1}, "box")
	start := time.Now()
	_, err := Begin(f.state, BeginOptions{Sandboxes: []RunSandbox{{Name: "other"}, {Name: "box"}}})
	var be *BusyError
	if !errors.As(err, &be) || be.Sandbox != "box" || be.Run == nil || be.Run.RunID != r.ID {
		t.Fatalf("second run: %v", err)
	}
	if waited := time.Since(start); waited > 5*time.Second {
		t.Errorf("the refusal waited %s", waited)
	}
	for _, want := range []string{`a loop is already running on sandbox "box" (run ` + r.ID, "converging", "sbx loop status", "sbx loop stop"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("refusal %q lacks %q", err, want)
		}
	}
	// The refused run took no lock: "other" is free.
	o, err := Begin(f.state, BeginOptions{Sandboxes: []RunSandbox{{Name: "other"}}})
	if err != nil {
		t.Fatalf("other sandbox: %v", err)
	}
	o.Close(ExitError, "test")
	r.Close(ExitInterrupted, "")
	if s := f.latest(); s.State != StateInterrupted || s.ExitCode != ExitInterrupted || s.Phase != PhaseFinished {
		t.Errorf("closed run: %+v", s)
	}
	again := f.begin(spec.Loop{MaxIterations: 1}, "box")
	if again.ID == r.ID {
		t.Error("the new run has the old one's id")
	}
}

// TestMain doubles as the `sbx __run-group` of helper_unix_test.go (with
// SBX_LOOP_TEST_RUN_GROUP=1) and as TestStaleRun's helper: with SBX_LOOP_TEST_HOLD set,
// the test binary begins a run in that state directory and blocks until
// killed (a process that dies without recording anything).
func TestMain(m *testing.M) {
	if os.Getenv("SBX_LOOP_TEST_RUN_GROUP") == "1" && len(os.Args) > 1 && os.Args[1] == "__run-group" {
		// The helper as the sandbox runs it, command line and all.
		os.Exit(RunGroupMain(os.Args[2:], os.Stdin, os.Stdout, os.Stderr))
	}
	if dir := os.Getenv("SBX_LOOP_TEST_HOLD"); dir != "" {
		if _, err := Begin(state.Dir(dir), BeginOptions{Sandboxes: []RunSandbox{{Name: "box"}}, MaxIterations: 3}); err != nil {
			fmt.Println("begin:", err)
			os.Exit(1)
		}
		fmt.Println("holding")
		select {}
	}
	os.Exit(m.Run())
}

// TestStaleRun: the run of a process that died (killed, so it recorded
// nothing) reads as vanished, not running, and does not hold the
// sandbox; nor does a status whose pid now belongs to another process.
func TestStaleRun(t *testing.T) {
	f := newFixture(t, false)
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), "SBX_LOOP_TEST_HOLD="+string(f.state))
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	buf := make([]byte, 64)
	n, _ := out.Read(buf)
	if !strings.Contains(string(buf[:n]), "holding") {
		t.Fatalf("helper: %q", buf[:n])
	}
	s := f.latest()
	if s.PID != cmd.Process.Pid || !s.Live() {
		t.Fatalf("the helper's run is not live: %+v", s)
	}
	if _, err := Begin(f.state, BeginOptions{Sandboxes: []RunSandbox{{Name: "box"}}}); !errors.As(err, new(*BusyError)) {
		t.Fatalf("begin while the helper runs: %v", err)
	}
	cmd.Process.Kill()
	cmd.Wait()
	s = f.latest()
	if s.State != StateVanished || s.Live() || !strings.Contains(s.Detail, fmt.Sprintf("pid %d", cmd.Process.Pid)) {
		t.Errorf("after the kill: %+v", s)
	}
	if live, err := f.control.Live(); live != nil || err != nil {
		t.Errorf("Live = %+v, %v", live, err)
	}
	if err := f.control.AddHint("", "x"); err != nil {
		t.Fatal(err)
	}
	// Its lock went with it: a new run begins.
	r := f.begin(spec.Loop{MaxIterations: 1}, "box")

	// A live pid that started at another time is another process.
	path := r.Dir.Status()
	st := r.Status()
	st.PID, st.PIDStart = os.Getpid(), "1"
	if proc.Start(os.Getpid()) == "" {
		t.Fatalf("this system reports no start time for pid %d", os.Getpid())
	}
	if err := state.WriteJSON(path, &st); err != nil {
		t.Fatal(err)
	}
	if s := f.latest(); s.State != StateVanished {
		t.Errorf("a status whose pid was reused reads %s", s.State)
	}
}

// TestHints: a hint for a live run reaches the next turn of its sandbox's
// agent; one queued for the next run reaches that run's first iteration;
// one left for a run that is over never reaches a later one, and one
// the run ended before delivering is dropped and counted.
func TestHints(t *testing.T) {
	f := newFixture(t, false)
	// Left for an old run: dropped when the next run begins.
	if err := f.control.AddHint("20200101T000000Z-abcdef", "stale"); err != nil {
		t.Fatal(err)
	}
	if err := f.control.AddHint("", "for the next run"); err != nil {
		t.Fatal(err)
	}
	l := spec.Loop{MaxIterations: 2, Completion: spec.Completion{Promise: "X"}}
	ag := f.agent("box", `n=$(( $(cat n 2>/dev/null || echo 0) + 1 )); echo $n > n; cat > in-$n; while [ ! -f go-$n ]; do sleep 0.01; done`, l, nil)
	r := f.begin(l, "box")
	done := make(chan *Result)
	go func() {
		done <- r.Loop(context.Background(), Config{Workspace: f.ws, Loop: l, Agents: []Agent{ag}, Stdout: &f.out, Stderr: &f.out})
	}()
	waitFor(t, "iteration 1", func() bool { return f.exists("in-1") })
	if err := f.control.AddHint(r.ID, "for iteration 2"); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(f.ws, "go-1"), nil, 0o644)
	waitFor(t, "iteration 2", func() bool { return f.exists("in-2") })
	if err := f.control.AddHint(r.ID, "too late"); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(f.ws, "go-2"), nil, 0o644)
	<-done
	in1, _ := os.ReadFile(filepath.Join(f.ws, "in-1"))
	in2, _ := os.ReadFile(filepath.Join(f.ws, "in-2"))
	if !strings.Contains(string(in1), "- for the next run\n") || strings.Contains(string(in1), "stale") {
		t.Errorf("iteration 1's stdin:\n%s", in1)
	}
	if !strings.Contains(string(in2), "- for iteration 2\n") || strings.Contains(string(in2), "for the next run") {
		t.Errorf("iteration 2's stdin:\n%s", in2)
	}
	if !strings.Contains(f.out.String(), "1 hint(s) queued for this run were not delivered") {
		t.Errorf("output:\n%s", f.out.String())
	}
	if names, _, _ := f.control.hintFiles(); len(names) != 0 {
		t.Errorf("hints left: %v", names)
	}
	// sbx destroy forgets the hints queued for the sandbox.
	f.control.AddHint("", "for a sandbox about to go")
	if err := f.control.ClearHints(); err != nil {
		t.Fatal(err)
	}
	if names, _, _ := f.control.hintFiles(); len(names) != 0 {
		t.Errorf("hints left after ClearHints: %v", names)
	}
}

// TestStopWhileConverging: sbx loop stop reaches a run before its loop
// starts, through the context Watch returns.
func TestStopWhileConverging(t *testing.T) {
	f := newFixture(t, false)
	r := f.begin(spec.Loop{MaxIterations: 1}, "box")
	ctx := r.Watch(context.Background())
	stopped := make(chan error)
	go func() {
		_, err := f.control.Stop(10 * time.Second)
		stopped <- err
	}()
	<-ctx.Done()
	r.Close(ExitInterrupted, "")
	if err := <-stopped; err != nil {
		t.Fatal(err)
	}
	if s := f.latest(); s.State != StateInterrupted || s.Detail != "interrupted before the loop started" {
		t.Errorf("%+v", s)
	}
	if _, err := f.control.Stop(time.Second); !errors.As(err, new(*NotRunningError)) || !strings.Contains(err.Error(), `no loop is running on sandbox "box" (the last run, `) {
		t.Errorf("stop without a run: %v", err)
	}
}

// TestMissingCommand: an agent whose command the sandbox lacks fails the
// first iteration with one error naming loop.command and the template,
// and the run stops there.
func TestMissingCommand(t *testing.T) {
	for _, tt := range []struct {
		name    string
		command []string
		want    []string
	}{
		{"loop.command", []string{"no-such-agent-sbx-test", "-p"}, []string{`loop.command's program "no-such-agent-sbx-test" is not in sandbox "box" (template host)`, "change loop.command in box.yaml"}},
		{"default", nil, []string{`"claude", the claude agent's default command, is not in sandbox "box" (template host)`, "set loop.command in box.yaml"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, false)
			l := spec.Loop{MaxIterations: 5, Completion: spec.Completion{Promise: "X"}, Breaker: spec.Breaker{NoProgress: 3, SameError: 3}}
			ag := f.agent("box", "", l, nil)
			ag.Agent, ag.Loop.Command = "claude", tt.command
			// The sandbox is the host: a PATH without the agent.
			ag.Env = map[string]string{"PATH": "/usr/bin:/bin"}
			r := f.begin(l, "box")
			res := r.Loop(context.Background(), Config{Workspace: f.ws, Loop: l, Agents: []Agent{ag}, Stdout: &f.out, Stderr: &f.out})
			if res.State != StateError || res.ExitCode != ExitError || res.Iterations != 1 {
				t.Fatalf("result %+v\n%s", res, f.out.String())
			}
			for _, w := range tt.want {
				if !strings.Contains(res.Detail, w) {
					t.Errorf("detail %q lacks %q", res.Detail, w)
				}
			}
			recs := f.records(res)
			if len(recs) != 1 || !recs[0].CommandMissing || recs[0].ExitStatus != 127 || !strings.Contains(recs[0].Summary, "the agent's command was not found") {
				t.Errorf("records: %+v", recs)
			}
		})
	}
}

// TestMultiAgentTurns: two agents in their own sandboxes take turns in one
// run, with the run's bounds, each with its own prompt, and the records
// say which sandbox ran each iteration. A hint for the reviewer waits for
// the reviewer's turn.
func TestMultiAgentTurns(t *testing.T) {
	f := newFixture(t, true)
	l := spec.Loop{MaxIterations: 5, Completion: spec.Completion{Promise: "NEVER"}, Breaker: spec.Breaker{NoProgress: 10}}
	script := func(who string) string {
		return `echo ` + who + ` >> turns; n=$(wc -l < turns); cat > in-$n; [ -f go-$n ] || { touch wait-$n; while [ ! -f go-$n ]; do sleep 0.01; done; }`
	}
	impl := f.agent("impl", script("impl"), spec.Loop{}, nil)
	review := f.agent("review", script("review"), spec.Loop{}, nil)
	os.WriteFile(review.Loop.Prompt, []byte("review it\n"), 0o644)
	for i := 2; i <= 5; i++ {
		os.WriteFile(filepath.Join(f.ws, fmt.Sprintf("go-%d", i)), nil, 0o644)
	}
	r := f.begin(l, "impl", "review")
	done := make(chan *Result)
	go func() {
		done <- r.Loop(context.Background(), Config{Workspace: f.ws, Loop: l, Agents: []Agent{impl, review}, Stdout: &f.out, Stderr: &f.out})
	}()
	waitFor(t, "iteration 1", func() bool { return f.exists("wait-1") })
	f.control = NewControl(f.state, "review")
	if s := f.latest(); s.IterationSandbox != "impl" || s.Iteration != 1 {
		t.Errorf("status in iteration 1: %+v", s)
	}
	if err := NewControl(f.state, "review").AddHint(r.ID, "check the tests"); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(f.ws, "go-1"), nil, 0o644)
	res := <-done
	if res.State != StateMaxIterations || res.Iterations != 5 {
		t.Fatalf("result %+v\n%s", res, f.out.String())
	}
	var got []string
	for _, rec := range f.records(res) {
		got = append(got, rec.Sandbox)
	}
	if diff := cmp.Diff([]string{"impl", "review", "impl", "review", "impl"}, got); diff != "" {
		t.Errorf("turns (-want +got):\n%s", diff)
	}
	turns, _ := os.ReadFile(filepath.Join(f.ws, "turns"))
	if string(turns) != "impl\nreview\nimpl\nreview\nimpl\n" {
		t.Errorf("turns file:\n%s", turns)
	}
	in2, _ := os.ReadFile(filepath.Join(f.ws, "in-2"))
	in3, _ := os.ReadFile(filepath.Join(f.ws, "in-3"))
	if !strings.Contains(string(in2), "review it") || !strings.Contains(string(in2), "- check the tests") || strings.Contains(string(in3), "check the tests") {
		t.Errorf("iteration 2's stdin:\n%s\niteration 3's:\n%s", in2, in3)
	}
	// Both sandboxes know the run.
	for _, n := range []string{"impl", "review"} {
		s, err := NewControl(f.state, n).Latest()
		if err != nil || s.RunID != r.ID || len(s.Sandboxes) != 2 {
			t.Errorf("sandbox %s's latest run: %+v, %v", n, s, err)
		}
	}
	if !strings.Contains(f.out.String(), `sbx loop: iteration 2 (review): exit 0 after`) {
		t.Errorf("output:\n%s", f.out.String())
	}
}

// fakeEgress is a driver's decision log with what a hostile agent asks
// for: n denials and failed requests that failed upstream.
type fakeEgress struct{ n, failed int }

func (d fakeEgress) EgressCount(ctx context.Context, since, until time.Time, max int) (netlog.Count, error) {
	var c netlog.Count
	for i := 0; i < d.n; i++ {
		c.Add(netlog.Denial{Time: since, Decision: "deny", Method: "CONNECT", Host: fmt.Sprintf("\x1b]0;owned\x07%d.", i) + strings.Repeat("a", 400), Port: 443,
			Reason: "not in the allow list (policy: deny)", Rule: "default"}, max)
	}
	for i := 0; i < d.failed; i++ {
		host := "model-api"
		if i > 0 {
			host = "\x1b[2Jgone\u202e." + strings.Repeat("b", 400)
		}
		c.Add(netlog.Denial{Time: since, Decision: "error", Method: "POST", Host: host, Port: 8080, Reason: "connect failed: connection refused"}, max)
	}
	return c, nil
}

// TestDenialsRecorded: every iteration's denials, and requests that failed
// upstream, are counted; the record keeps the first MaxDenialRecords of
// each, each text bounded, and shows them escaped.
func TestDenialsRecorded(t *testing.T) {
	f := newFixture(t, false)
	l := spec.Loop{MaxIterations: 1, Completion: spec.Completion{Promise: "X"}}
	ag := f.agent("box", "true", l, nil)
	ag.Egress = fakeEgress{n: 80, failed: 7}
	r := f.begin(l, "box")
	res := r.Loop(context.Background(), Config{Workspace: f.ws, Loop: l, Agents: []Agent{ag}, Stdout: &f.out, Stderr: &f.out})
	rec := f.records(res)[0]
	if rec.Denials == nil || *rec.Denials != 80 || len(rec.Denied) != MaxDenialRecords {
		t.Fatalf("record: %d listed of %v", len(rec.Denied), rec.Denials)
	}
	if !strings.HasSuffix(rec.Summary, ", 80 egress denials, 7 upstream errors (POST model-api:8080: connect failed: connection refused)") {
		t.Errorf("summary %q", rec.Summary)
	}
	if rec.UpstreamErrors == nil || *rec.UpstreamErrors != 7 || len(rec.Failed) != 7 {
		t.Errorf("record's upstream errors: %v, %d listed", rec.UpstreamErrors, len(rec.Failed))
	}
	// The agent picks the hosts it fails to reach: bounded, shown escaped.
	if f := rec.Failed[1]; len(f.Host) > maxDenialText+len("…") {
		t.Errorf("failed host kept: %d bytes", len(f.Host))
	}
	if line := failureText(rec.Failed[1]); strings.ContainsAny(line, "\x1b\u202e") || !strings.Contains(line, `"\x1b[2Jgone\u202e.bbb`) {
		t.Errorf("failure text: %q", line)
	}
	d := rec.Denied[0]
	if len(d.Host) > maxDenialText+len("…") || !strings.HasPrefix(d.Host, "\x1b]0;owned") {
		t.Errorf("host kept: %d bytes %q", len(d.Host), d.Host[:20])
	}
	line := DenialLine(d)
	if strings.ContainsAny(line, "\x1b\x07") || !strings.Contains(line, `CONNECT "\x1b]0;owned\a0.aaa`) {
		t.Errorf("denial line: %q", line)
	}
	if s := f.latest(); len(s.Denials) != 1 || s.Denials[0] != 80 || len(s.UpstreamErrors) != 1 || s.UpstreamErrors[0] != 7 {
		t.Errorf("status denials: %v, upstream errors: %v", s.Denials, s.UpstreamErrors)
	}
}

func TestSummary(t *testing.T) {
	two := 2
	zero := 0
	tests := []struct {
		rec   Record
		multi bool
		want  string
	}{
		{Record{Iteration: 2, DurationMS: 41_200, ExitStatus: 1, Files: 3, Denials: &two,
			Verify: []Verify{{Command: "npm test", ExitStatus: 1}}},
			false, "iteration 2: exit 1 after 41s, verify failed (npm test: exit 1), 3 files changed, 2 egress denials"},
		{Record{Iteration: 1, DurationMS: 350, PromiseSeen: true, Files: 1, Commits: 1, Denials: &zero,
			Verify: []Verify{{Command: "a", ExitStatus: 0}, {Command: "b", ExitStatus: 0}}},
			false, "iteration 1: exit 0 after 350ms, promise seen, verify passed, 1 file changed, 1 commit, 0 egress denials"},
		{Record{Iteration: 3, Sandbox: "review", DurationMS: 900_000, TimedOut: true, ExitStatus: 143},
			true, "iteration 3 (review): timed out after 15m0s (iterationTimeout); the agent was killed, 0 files changed"},
		{Record{Iteration: 4, DurationMS: 2_000, Interrupted: true, ExitStatus: 143},
			false, "iteration 4: stopped after 2s; the agent was killed"},
		{Record{Iteration: 1, DurationMS: 20, CommandMissing: true, ExitStatus: 127},
			false, "iteration 1: the agent's command was not found (exit 127)"},
		{Record{Iteration: 5, DurationMS: 1_000, ExitStatus: 0, Files: 0,
			Verify: []Verify{{Command: "make test \x1b[2J", ExitStatus: 2}}},
			false, `iteration 5: exit 0 after 1s, verify failed ("make test \x1b[2J": exit 2), 0 files changed`},
	}
	for _, tt := range tests {
		if got := Summary(&tt.rec, tt.multi); got != tt.want {
			t.Errorf("Summary(%+v)\n got %s\nwant %s", tt.rec, got, tt.want)
		}
	}
}

// checkpoints records the calls the loop makes and the phase it reports
// during each.
type checkpoints struct {
	f     *fixture
	mu    sync.Mutex
	calls []string
	fail  int // BeforeIteration of this iteration fails
}

func (c *checkpoints) BeforeIteration(ctx context.Context, sandbox string, i int) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls = append(c.calls, fmt.Sprintf("before %s %d (%s)", sandbox, i, c.f.latest().Phase))
	if i == c.fail {
		return errors.New("disk full")
	}
	return nil
}

func (c *checkpoints) AfterRun(ctx context.Context, res *Result) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls = append(c.calls, fmt.Sprintf("after %s %d (%s)", res.State, res.Iterations, c.f.latest().Phase))
	return nil
}

// TestCheckpointHook: the Checkpointer is called before each iteration and
// after the run, while the status says "checkpointing"; a failure before
// an iteration ends the run.
func TestCheckpointHook(t *testing.T) {
	f := newFixture(t, false)
	l := spec.Loop{MaxIterations: 3, Completion: spec.Completion{Promise: "X"}}
	cp := &checkpoints{f: f, fail: 3}
	r := f.begin(l, "box")
	res := r.Loop(context.Background(), Config{Workspace: f.ws, Loop: l, Agents: []Agent{f.agent("box", "date +%s%N > p", l, nil)}, Checkpoint: cp, Stdout: &f.out, Stderr: &f.out})
	want := []string{"before box 1 (checkpointing)", "before box 2 (checkpointing)", "before box 3 (checkpointing)", "after error 2 (checkpointing)"}
	if diff := cmp.Diff(want, cp.calls); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}
	if res.State != StateError || res.Detail != "checkpoint before iteration 3: disk full" {
		t.Errorf("result %+v", res)
	}
	if s := f.latest(); s.Phase != PhaseFinished || s.Iteration != 2 {
		t.Errorf("status %+v", s)
	}
}
