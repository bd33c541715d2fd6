package loop

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/sbxhq/sbx/driver"
	"github.com/sbxhq/sbx/driver/cliutil"
	"github.com/sbxhq/sbx/driver/runner"
	"github.com/sbxhq/sbx/spec"
	"github.com/sbxhq/sbx/state"
)

// hostSandbox runs commands on the host: the loop's logic is the same
// whatever the sandbox; the docker driver's e2e tests run it for real.
type hostSandbox struct{}

func (hostSandbox) Exec(ctx context.Context, argv []string, o driver.ExecOptions) (int, error) {
	var env []string
	for k, v := range o.Env {
		env = append(env, k+"="+v)
	}
	r := &runner.Runner{}
	return cliutil.ExitCode(r.Run(ctx, runner.Cmd{Args: argv, Dir: o.Workdir, Env: env, Stdin: o.Stdin, Stdout: o.Stdout, Stderr: o.Stderr}))
}

type fixture struct {
	t       *testing.T
	ws      string
	state   state.Dir
	control *Control
	out     bytes.Buffer
}

func newFixture(t *testing.T, git bool) *fixture {
	t.Helper()
	f := &fixture{t: t, ws: t.TempDir(), state: state.Dir(t.TempDir())}
	f.control = NewControl(f.state, "box")
	if git {
		for _, args := range [][]string{{"init", "-q"}, {"config", "user.email", "a@b"}, {"config", "user.name", "a"}, {"commit", "-q", "--allow-empty", "-m", "init"}} {
			if out, err := exec.Command("git", append([]string{"-C", f.ws}, args...)...).CombinedOutput(); err != nil {
				t.Fatalf("git %v: %v\n%s", args, err, out)
			}
		}
	}
	return f
}

// agent is an agent whose command is script (sh -c) on the host, with
// the prompt "do it" unless l names one.
func (f *fixture) agent(sandbox, script string, l spec.Loop, env map[string]string) Agent {
	f.t.Helper()
	if l.Prompt == "" {
		prompt := filepath.Join(f.t.TempDir(), "PROMPT.md")
		os.WriteFile(prompt, []byte("do it\n"), 0o644)
		l.Prompt, l.PromptRoot = prompt, filepath.Dir(prompt)
	}
	l.Command = []string{"sh", "-c", script}
	if l.IterationTimeout == 0 {
		l.IterationTimeout = time.Minute
	}
	return Agent{Sandbox: sandbox, Agent: "shell", File: sandbox + ".yaml", Template: "host", Loop: l, Env: env,
		Exec: hostSandbox{}, Group: tempGrouper{f.t.TempDir()}}
}

// begin begins a run on the sandboxes.
func (f *fixture) begin(l spec.Loop, sandboxes ...string) *Run {
	f.t.Helper()
	var sbs []RunSandbox
	for _, n := range sandboxes {
		sbs = append(sbs, RunSandbox{Name: n, Agent: "shell", File: n + ".yaml"})
	}
	r, err := Begin(f.state, BeginOptions{Sandboxes: sbs, MaxIterations: l.MaxIterations})
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { r.Close(ExitError, "test ended") })
	return r
}

// run runs a loop of one agent whose command is script (sh -c), with the
// prompt "do it" unless l names one.
func (f *fixture) run(ctx context.Context, script string, l spec.Loop, env map[string]string) *Result {
	f.t.Helper()
	var redact []string
	for _, v := range env {
		redact = append(redact, v)
	}
	ag := f.agent("box", script, l, env)
	r := f.begin(l, "box")
	return r.Loop(ctx, Config{Workspace: f.ws, Loop: ag.Loop, Agents: []Agent{ag}, Redact: redact, Stdout: &f.out, Stderr: &f.out})
}

// tempGrouper is ShellGrouper with the pidfiles, which hostSandbox writes
// on the host, in a test's own directory instead of /tmp.
type tempGrouper struct{ dir string }

func (g tempGrouper) Group(argv []string, pidfile string) []string {
	return ShellGrouper{}.Group(argv, filepath.Join(g.dir, filepath.Base(pidfile)))
}

func (g tempGrouper) Kill(pidfile string) []string {
	return ShellGrouper{}.Kill(filepath.Join(g.dir, filepath.Base(pidfile)))
}

func (f *fixture) records(res *Result) []Record {
	f.t.Helper()
	data, err := os.ReadFile(filepath.Join(res.RunDir, "records.jsonl"))
	if err != nil {
		f.t.Fatal(err)
	}
	var recs []Record
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var r Record
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			f.t.Fatal(err)
		}
		recs = append(recs, r)
	}
	return recs
}

func TestCompletesOnPromise(t *testing.T) {
	f := newFixture(t, true)
	// The agent counts iterations in a file and promises on the third.
	script := `n=$(( $(cat n 2>/dev/null || echo 0) + 1 )); echo $n > n
if [ $n -eq 3 ]; then echo "all done <promise>
  COMPLETE </promise>"; else echo "working <promise>NOT YET</promise>"; fi`
	res := f.run(context.Background(), script, spec.Loop{MaxIterations: 10, Completion: spec.Completion{Promise: "COMPLETE"}}, nil)
	if res.State != StateCompleted || res.ExitCode != ExitCompleted || res.Iterations != 3 {
		t.Fatalf("result = %+v, want completed after 3\n%s", res, f.out.String())
	}
	recs := f.records(res)
	if len(recs) != 3 || !recs[2].PromiseSeen || recs[1].PromiseSeen {
		t.Errorf("records = %+v", recs)
	}
	st, err := f.control.Latest()
	if err != nil || st.State != StateCompleted || st.Iteration != 3 || !st.Completion.Complete || st.Phase != PhaseFinished {
		t.Errorf("status = %+v, %v", st, err)
	}
}

func TestVerifyMustPass(t *testing.T) {
	f := newFixture(t, true)
	// Promises every time; verify passes only once the file "ok" exists,
	// which the agent writes on its second iteration.
	script := `if [ -f tried ]; then touch ok; fi; touch tried; echo "<promise>COMPLETE</promise>"`
	res := f.run(context.Background(), script, spec.Loop{MaxIterations: 5, Completion: spec.Completion{Promise: "COMPLETE", Verify: []string{"test -f ok"}}}, nil)
	if res.State != StateCompleted || res.Iterations != 2 {
		t.Fatalf("result = %+v, want completed after 2\n%s", res, f.out.String())
	}
	recs := f.records(res)
	if recs[0].Verify[0].ExitStatus == 0 || recs[1].Verify[0].ExitStatus != 0 {
		t.Errorf("verify results = %+v, %+v", recs[0].Verify, recs[1].Verify)
	}
}

func TestMaxIterations(t *testing.T) {
	f := newFixture(t, true)
	script := `date +%s%N >> progress.txt; echo still working`
	res := f.run(context.Background(), script, spec.Loop{MaxIterations: 3, Completion: spec.Completion{Promise: "COMPLETE"}}, nil)
	if res.State != StateMaxIterations || res.ExitCode != ExitMaxIterations || res.Iterations != 3 {
		t.Fatalf("result = %+v", res)
	}
}

func TestBreakerNoProgress(t *testing.T) {
	f := newFixture(t, true)
	res := f.run(context.Background(), `echo thinking`, spec.Loop{MaxIterations: 10, Completion: spec.Completion{Promise: "X"}, Breaker: spec.Breaker{NoProgress: 2}}, nil)
	if res.State != StateBreaker || res.ExitCode != ExitBreaker || res.Iterations != 2 {
		t.Fatalf("result = %+v", res)
	}
	if !strings.Contains(res.Detail, "no progress in 2 iterations") {
		t.Errorf("detail = %q", res.Detail)
	}
}

// TestCommitIsProgress: an agent that only commits (the tree stays clean)
// makes progress.
func TestCommitIsProgress(t *testing.T) {
	f := newFixture(t, true)
	script := `git commit -q --allow-empty -m step`
	res := f.run(context.Background(), script, spec.Loop{MaxIterations: 4, Completion: spec.Completion{Promise: "X"}, Breaker: spec.Breaker{NoProgress: 2}}, nil)
	if res.State != StateMaxIterations {
		t.Fatalf("result = %+v, want max-iterations (commits are progress)", res)
	}
	for _, r := range f.records(res) {
		if !r.Progressed || r.Commits != 1 {
			t.Errorf("iteration %d: progressed=%v commits=%d", r.Iteration, r.Progressed, r.Commits)
		}
	}
}

func TestBreakerSameError(t *testing.T) {
	f := newFixture(t, true)
	// Makes progress (so noProgress never trips) but fails the same way,
	// with a varying number in the message.
	script := `date +%s%N >> p; echo "build failed at line $(date +%N)" >&2; exit 2`
	res := f.run(context.Background(), script, spec.Loop{MaxIterations: 10, Completion: spec.Completion{Promise: "X"}, Breaker: spec.Breaker{NoProgress: 5, SameError: 3}}, nil)
	if res.State != StateBreaker || res.Iterations != 3 || !strings.Contains(res.Detail, `exit status 2, "build failed at line N"`) {
		t.Fatalf("result = %+v", res)
	}
}

// TestErrorWordIsNotAFailure: output mentioning "error" with exit 0 does
// not count towards sameError.
func TestErrorWordIsNotAFailure(t *testing.T) {
	f := newFixture(t, true)
	script := `date +%s%N >> p; echo '{"is_error": false, "error": null}'`
	res := f.run(context.Background(), script, spec.Loop{MaxIterations: 4, Completion: spec.Completion{Promise: "X"}, Breaker: spec.Breaker{SameError: 2}}, nil)
	if res.State != StateMaxIterations {
		t.Fatalf("result = %+v, want max-iterations", res)
	}
}

func TestIterationTimeoutKillsTree(t *testing.T) {
	if _, err := exec.LookPath("setsid"); err != nil {
		t.Fatal("needs setsid (util-linux, part of every Debian system) on the host")
	}
	f := newFixture(t, false)
	marker := "sbx-loop-test-" + randomID(4)
	// The agent starts a grandchild that would outlive a plain kill.
	script := `sh -c 'sleep 300; : ` + marker + `' & sleep 300`
	res := f.run(context.Background(), script, spec.Loop{MaxIterations: 1, Completion: spec.Completion{Promise: "X"}, IterationTimeout: 500 * time.Millisecond}, nil)
	if res.State != StateMaxIterations {
		t.Fatalf("result = %+v\n%s", res, f.out.String())
	}
	rec := f.records(res)[0]
	if !rec.TimedOut || rec.Failure == nil || rec.Failure.ExitStatus != 124 {
		t.Errorf("record = %+v", rec)
	}
	if out, _ := exec.Command("pgrep", "-f", marker).Output(); len(out) > 0 {
		t.Errorf("a process of the agent survived: %s", out)
	}
}

func TestHintReachesNextIteration(t *testing.T) {
	f := newFixture(t, false)
	// The agent records its stdin; the first iteration adds a hint as an
	// operator would from another terminal.
	go func() {
		for i := 0; i < 100; i++ {
			if _, err := os.Stat(filepath.Join(f.ws, "in-1")); err == nil {
				live, err := f.control.Live()
				if err != nil || live == nil {
					t.Errorf("no live run during iteration 1: %v", err)
					return
				}
				f.control.AddHint(live.RunID, "Focus on the auth module")
				os.WriteFile(filepath.Join(f.ws, "hinted"), nil, 0o644)
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	script := `n=$(( $(cat n 2>/dev/null || echo 0) + 1 )); echo $n > n; cat > in-$n
while [ $n -eq 1 ] && [ ! -f hinted ]; do sleep 0.05; done`
	res := f.run(context.Background(), script, spec.Loop{MaxIterations: 2, Completion: spec.Completion{Promise: "X"}}, nil)
	if res.Iterations != 2 {
		t.Fatalf("result = %+v", res)
	}
	in1, _ := os.ReadFile(filepath.Join(f.ws, "in-1"))
	in2, _ := os.ReadFile(filepath.Join(f.ws, "in-2"))
	want1 := "[sbx loop: iteration 1 of 2]\n\ndo it\n"
	want2 := "[sbx loop: iteration 2 of 2]\n\nHints from the operator since the last iteration:\n- Focus on the auth module\n\ndo it\n"
	if string(in1) != want1 || string(in2) != want2 {
		t.Errorf("stdin 1 = %q\nstdin 2 = %q", in1, in2)
	}
}

func TestSecretVisibleToAgentButRedacted(t *testing.T) {
	f := newFixture(t, false)
	const secret = "ghp_topsecret_123"
	res := f.run(context.Background(), `echo "token=$GITHUB_TOKEN"; [ "$GITHUB_TOKEN" = `+secret+` ] && touch saw-it`,
		spec.Loop{MaxIterations: 1, Completion: spec.Completion{Promise: "X"}}, map[string]string{"GITHUB_TOKEN": secret})
	if _, err := os.Stat(filepath.Join(f.ws, "saw-it")); err != nil {
		t.Fatalf("the agent did not get the secret (%+v)", res)
	}
	if strings.Contains(f.out.String(), secret) || !strings.Contains(f.out.String(), "token=[redacted]") {
		t.Errorf("terminal output: %s", f.out.String())
	}
	filepath.Walk(string(f.state), func(p string, info os.FileInfo, err error) error {
		if err == nil && !info.IsDir() {
			if data, _ := os.ReadFile(p); bytes.Contains(data, []byte(secret)) {
				t.Errorf("%s holds the secret", p)
			}
		}
		return nil
	})
}

func TestPromiseSeen(t *testing.T) {
	tests := []struct {
		out  string
		want bool
	}{
		{"<promise>COMPLETE</promise>", true},
		{"x <promise>\n  COMPLETE\n</promise> y", true},
		{"<promise>COMPLETE!</promise>", false},
		{"say <promise>COMPLETE</promise> when done", true},
		{"<promise>NOT COMPLETE</promise>", false},
		{"<promise>example</promise> then <promise>COMPLETE</promise>", true},
		{"COMPLETE", false},
	}
	for _, tt := range tests {
		if got := PromiseSeen(tt.out, "COMPLETE"); got != tt.want {
			t.Errorf("PromiseSeen(%q) = %v", tt.out, got)
		}
	}
}

// TestMaxDuration: the run's budget ends it, killing the agent mid-run,
// with its own exit code.
func TestMaxDuration(t *testing.T) {
	f := newFixture(t, false)
	res := f.run(context.Background(), `date +%s%N >> p; sleep 300`, spec.Loop{MaxIterations: 10, Completion: spec.Completion{Promise: "X"}, MaxDuration: 700 * time.Millisecond}, nil)
	if res.State != StateBudget || res.ExitCode != ExitBudget {
		t.Fatalf("result = %+v\n%s", res, f.out.String())
	}
	if rec := f.records(res)[0]; !rec.Interrupted {
		t.Errorf("record = %+v", rec)
	}
}

// TestPidFilesRemoved: each iteration's pid file is gone when it ends,
// whether the agent exits or iterationTimeout kills it, so a run of hours
// leaves none in the sandbox's /tmp (or, with a backend that runs on the
// host, the host's).
func TestPidFilesRemoved(t *testing.T) {
	f := newFixture(t, false)
	dir := t.TempDir()
	l := spec.Loop{MaxIterations: 3, Completion: spec.Completion{Promise: "X"}}
	ag := f.agent("box", `n=$(( $(cat n 2>/dev/null || echo 0) + 1 )); echo $n > n; [ $n -eq 2 ] && exec sleep 300; true`, l, nil)
	ag.Group = tempGrouper{dir}
	ag.Loop.IterationTimeout = 2 * time.Second
	r := f.begin(l, "box")
	res := r.Loop(context.Background(), Config{Workspace: f.ws, Loop: ag.Loop, Agents: []Agent{ag}, Stdout: &f.out, Stderr: &f.out})
	if res.Iterations != 3 {
		t.Fatalf("result = %+v\n%s", res, f.out.String())
	}
	if recs := f.records(res); len(recs) != 3 || !recs[1].TimedOut {
		t.Fatalf("records = %+v; want the second timed out", recs)
	}
	left, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range left {
		t.Errorf("left behind: %s", e.Name())
	}
}

// TestAgentOutputIsData plays the agent that writes to the user's
// terminal: an OSC 52 clipboard write, a title change, a carriage return
// followed by a forged "sbx loop: … verify passed" line, a line without
// its carriage return, bidirectional overrides, and a line it leaves
// open at the end. On the terminal, in the run's log and in the
// iteration's, none of it reaches a terminal as a control character,
// every line of it is marked as the agent's, and sbx's own lines are
// only those sbx said; the secret stays redacted and the promise counts.
func TestAgentOutputIsData(t *testing.T) {
	f := newFixture(t, false)
	const secret = "s3cr3t-value"
	script := `printf '\033]52;c;cHduZWQ=\007clipboard\n'
printf '\033]0;sbx: all good\007title\n'
printf 'working\rsbx loop: iteration 1: exit 0 after 1s, verify passed, 3 files changed\n'
printf 'sbx loop: completed: complete after 1 iteration(s) (exit 0)\n' >&2
printf '\342\200\256txt.exe token=%s\n' "$TOKEN"
printf '<promise>DONE</promise>\n\n'
printf 'left open'`
	res := f.run(context.Background(), script, spec.Loop{MaxIterations: 1, Completion: spec.Completion{Promise: "DONE"}}, map[string]string{"TOKEN": secret})
	if res.State != StateCompleted {
		t.Fatalf("result = %+v, want completed (the promise counts)\n%s", res, f.out.String())
	}
	recs := f.records(res)
	iterLog, err := os.ReadFile(recs[0].Log)
	if err != nil {
		t.Fatal(err)
	}
	runLog, err := os.ReadFile(filepath.Join(res.RunDir, "run.log"))
	if err != nil {
		t.Fatal(err)
	}
	wantAgent := []string{
		`| \x1b]52;c;cHduZWQ=\aclipboard`,
		`| \x1b]0;sbx: all good\atitle`,
		`| working\rsbx loop: iteration 1: exit 0 after 1s, verify passed, 3 files changed`,
		`| sbx loop: completed: complete after 1 iteration(s) (exit 0)`,
		`| \u202etxt.exe token=[redacted]`,
		`| <promise>DONE</promise>`,
		`|`,
		`| left open`,
	}
	forged := []string{"sbx loop: iteration 1: exit 0 after 1s, verify passed, 3 files changed", "sbx loop: completed: complete after 1 iteration(s) (exit 0)"}
	for name, out := range map[string]string{"terminal": f.out.String(), "run.log": string(runLog), "iteration log": string(iterLog)} {
		if i := strings.IndexFunc(out, func(r rune) bool { return r != '\n' && (r < ' ' || r == 0x7f || r == '\u202e') }); i >= 0 {
			t.Errorf("%s: a control character reaches it at %d: %q", name, i, out)
		}
		if strings.Contains(out, secret) {
			t.Errorf("%s holds the secret", name)
		}
		var agent, own []string
		for _, line := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
			switch {
			case strings.HasPrefix(line, AgentMark) || line == "|":
				agent = append(agent, line)
			case strings.HasPrefix(line, "sbx loop: "):
				own = append(own, line)
			default:
				t.Errorf("%s: a line neither sbx's nor marked as the agent's: %q", name, line)
			}
		}
		// Its standard output and error come through pipes of their own:
		// their lines' order between them is the scheduler's.
		if diff := cmp.Diff(wantAgent, agent, cmpopts.SortSlices(func(a, b string) bool { return a < b })); diff != "" {
			t.Errorf("%s: the agent's lines (-want +got):\n%s", name, diff)
		}
		for _, line := range own {
			for _, forged := range forged {
				if line == forged {
					t.Errorf("%s: a forged line passes for sbx's: %q", name, line)
				}
			}
		}
		if name != "iteration log" && len(own) == 0 {
			t.Errorf("%s: sbx's own lines are missing:\n%s", name, out)
		}
	}
}

// TestSayIsOneLine: a line of sbx's own that quotes something the agent
// chose (an error naming its file) stays one line, with nothing a
// terminal could act on, so it cannot carry a forged line of sbx's.
func TestSayIsOneLine(t *testing.T) {
	var term, log bytes.Buffer
	it := &iterator{cfg: Config{Stderr: &term}, log: &log}
	it.say("iteration 1: counting commits: %v", "bad ref \"x\nsbx loop: iteration 1: verify passed\x1b]0;t\x07\"")
	want := `sbx loop: iteration 1: counting commits: bad ref "x\nsbx loop: iteration 1: verify passed\x1b]0;t\a"` + "\n"
	if diff := cmp.Diff(want, term.String()); diff != "" {
		t.Errorf("terminal (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(want, log.String()); diff != "" {
		t.Errorf("log (-want +got):\n%s", diff)
	}
}
