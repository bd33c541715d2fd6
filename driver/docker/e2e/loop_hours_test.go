//go:build unix

package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sbxhq/sbx/driver/docker"
	"github.com/sbxhq/sbx/internal/fixture"
	"golang.org/x/sys/unix"
)

// Long runs on the docker driver: detached runs followed to their end,
// refusals, stale runs, Ctrl-C, a missing agent command, multi-agent
// turns and egress denial records.

// waitFile waits for the agent to write name in the workspace: the
// handshake every step below waits on, never a fixed sleep.
func (e *loopEnv) waitFile(name string, out *bytes.Buffer) {
	e.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		if _, err := os.Stat(filepath.Join(e.ws, name)); err == nil {
			return
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("%s never appeared:\n%s", name, out)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (e *loopEnv) touch(name string) {
	e.t.Helper()
	if err := os.WriteFile(filepath.Join(e.ws, name), nil, 0o644); err != nil {
		e.t.Fatal(err)
	}
}

// start runs sbx in the background; the test's cleanup kills what is
// left of it.
func (e *loopEnv) start(args ...string) (*exec.Cmd, *bytes.Buffer) {
	e.t.Helper()
	c := e.cmd(args...)
	var out bytes.Buffer
	c.Stdout, c.Stderr = &out, &out
	if err := c.Start(); err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() {
		c.Process.Kill()
		c.Wait()
	})
	return c, &out
}

// exitCode is how a command ended: its exit status, or -1 for a signal.
func exitCode(err error) int {
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode()
	}
	if err != nil {
		return -2
	}
	return 0
}

// stopDetached ends a detached run the test left live (a failed test),
// so that its process does not outlive the test.
func (e *loopEnv) stopDetached() {
	out, _ := e.cmd("loop", "status", "--json").Output()
	var s struct {
		State string `json:"state"`
		PID   int    `json:"pid"`
	}
	if json.Unmarshal(out, &s) == nil && s.State == "running" && s.PID > 0 {
		e.cmd("loop", "stop").Run()
	}
}

const gated = `  command: [sh, -c, '` + counter + `touch in-$$n; while [ ! -f go-$$n ]; do sleep 0.05; : hours-agent-marker; done; [ $$n -ge 2 ] && echo "<promise>DONE</promise>"; true']
`

func TestLoopDetach(t *testing.T) {
	e := newLoopEnv(t, "e2e-loop-detach")
	e.file("  maxIterations: 5\n  completion: {promise: DONE}\n" + gated)
	t.Cleanup(e.stopDetached)
	var stderr bytes.Buffer
	c := e.cmd("loop", "-y", "--detach")
	c.Stderr = &stderr
	out, err := c.Output()
	if err != nil {
		t.Fatalf("loop --detach: %v\n%s%s", err, out, stderr.String())
	}
	// Only the run's id is on stdout (RUN=$(sbx loop -y --detach)); what
	// converging printed (the plan of the sandbox it creates) is on
	// stderr.
	loopRun := strings.TrimSuffix(string(out), "\n")
	if !regexp.MustCompile(`^[0-9]{8}T[0-9]{6}Z-[0-9a-f]{6}$`).MatchString(loopRun) {
		t.Fatalf("stdout of loop --detach is not just the run id:\n%s", out)
	}
	if !strings.Contains(stderr.String(), "will be created") {
		t.Errorf("the plan is not on stderr:\n%s", stderr.String())
	}
	e.waitFile("in-1", &bytes.Buffer{})
	s := e.status()
	if s["run_id"] != loopRun || s["state"] != "running" || s["phase"] != "agent" || s["iteration"].(float64) != 1 || s["detached"] != true {
		t.Errorf("status during iteration 1: %v", s)
	}
	pid := int(s["pid"].(float64))
	// The detached process is a session of its own: no terminal's hangup
	// or Ctrl-C reaches it.
	if sid, err := unix.Getsid(pid); err != nil || sid != pid {
		t.Errorf("detached pid %d: session %d, %v", pid, sid, err)
	}
	// A second run is refused at once, pointing at status and stop.
	if out, code := e.sbx("loop", "-y"); code == 0 || !strings.Contains(out, "a loop is already running on sandbox") || !strings.Contains(out, "sbx loop stop") {
		t.Errorf("second run: exit %d\n%s", code, out)
	}
	follow, fout := e.start("loop", "logs", "--follow")
	e.touch("go-1")
	e.touch("go-2")
	if err := follow.Wait(); err != nil {
		t.Fatalf("logs --follow: %v\n%s", err, fout)
	}
	for _, want := range []string{"sbx loop: iteration 1 of 5\n", "sbx loop: iteration 1: exit 0 after ", "promise seen", "sbx loop: completed: complete after 2 iteration(s)"} {
		if !strings.Contains(fout.String(), want) {
			t.Errorf("logs --follow lacks %q:\n%s", want, fout)
		}
	}
	if s := e.status(); s["state"] != "completed" || s["phase"] != "finished" || len(s["records"].([]any)) != 2 {
		t.Errorf("status at the end: %v", s)
	}
	if out, code := e.sbx("loop", "hint", "late"); code == 0 || !strings.Contains(out, "no loop is running on sandbox") {
		t.Errorf("hint after the run: exit %d %s", code, out)
	}
}

func TestLoopStaleAndInterrupted(t *testing.T) {
	e := newLoopEnv(t, "e2e-loop-stale")
	e.file("  maxIterations: 5\n  completion: {promise: DONE}\n" + gated)
	if out, code := e.sbx("apply", "-y"); code != 0 {
		t.Fatalf("apply: %s", out)
	}
	// A run killed outright leaves a status that says running: it reads
	// as vanished, and does not hold up the next run.
	c, out := e.start("loop", "-y")
	e.waitFile("in-1", out)
	c.Process.Kill()
	c.Wait()
	if s := e.status(); s["state"] != "vanished" {
		t.Errorf("status of the killed run: %v", s)
	}
	e.touch("go-1") // the orphaned agent may end
	// Ctrl-C: 130, the agent's process group killed, the end recorded.
	c, out = e.start("loop", "-y")
	e.waitFile("in-2", out)
	if ps := e.agentProcesses("hours-agent-marker"); ps == "" {
		t.Fatal("the process scan does not see the running agent; it cannot prove the kill")
	}
	c.Process.Signal(os.Interrupt)
	if code := exitCode(c.Wait()); code != 130 {
		t.Errorf("exit %d after Ctrl-C:\n%s", code, out)
	}
	if ps := e.agentProcesses("hours-agent-marker"); ps != "" {
		t.Errorf("the agent survives Ctrl-C:\n%s", ps)
	}
	s := e.status()
	recs := s["records"].([]any)
	if s["state"] != "interrupted" || s["exit_code"].(float64) != 130 || len(recs) != 1 || recs[0].(map[string]any)["interrupted"] != true {
		t.Errorf("status after Ctrl-C: %v", s)
	}
}

func TestLoopMissingCommand(t *testing.T) {
	e := newLoopEnv(t, "e2e-loop-missing")
	e.file("  maxIterations: 5\n  completion: {promise: DONE}\n  command: [no-such-agent-e2e, -p]\n")
	out, code := e.sbx("loop", "-y")
	want := fmt.Sprintf(`loop.command's program "no-such-agent-e2e" is not in sandbox %q (template %s)`, e.name, env.Image)
	if code != 1 || !strings.Contains(out, want) || strings.Contains(out, "iteration 2") {
		t.Fatalf("exit %d, want %q:\n%s", code, want, out)
	}
	if recs := e.records(); len(recs) != 1 || recs[0]["command_missing"] != true || recs[0]["exit_status"].(float64) != 127 {
		t.Errorf("records: %v", recs)
	}
}

func TestLoopMultiAgent(t *testing.T) {
	e := newLoopEnv(t, "e2e-loop-impl")
	review := env.Uniq("e2e-loop-review")
	t.Cleanup(func() { fixture.RemoveSandbox(review) })
	for _, a := range []struct{ dir, name, max, prompt string }{{"impl", e.name, "3", "Implement."}, {"review", review, "9", "Review."}} {
		os.MkdirAll(filepath.Join(e.ws, a.dir), 0o755)
		os.WriteFile(filepath.Join(e.ws, a.dir, "PROMPT.md"), []byte(a.prompt+"\n"), 0o644)
		doc := fmt.Sprintf(`version: 1
name: %s
agent: shell
driver: docker
template: %s
workspace: ..
network: {agentHosts: false}
loop:
  prompt: PROMPT.md
  maxIterations: %s
  completion: {promise: NEVER}
  breaker: {noProgress: 0, sameError: 0}
  command: [sh, -c, 'while read -r l; do line=$$l; done; echo "%s: $$line $$(hostname)" >> turns']
`, a.name, env.Image, a.max, a.dir)
		os.WriteFile(filepath.Join(e.ws, a.dir, "sandbox.yaml"), []byte(doc), 0o644)
	}
	out, code := e.sbx("loop", "-y", "-f", "impl/sandbox.yaml", "-f", "review/sandbox.yaml")
	if code != 3 || !strings.Contains(out, "iteration 2 of 3 (sandbox \""+review+"\")") {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	turns, _ := os.ReadFile(filepath.Join(e.ws, "turns"))
	host := func(name string) string {
		h, _ := exec.Command("docker", "inspect", "-f", "{{.Config.Hostname}}", docker.ContainerName(name)).Output()
		return strings.TrimSpace(string(h))
	}
	want := fmt.Sprintf("impl: Implement. %s\nreview: Review. %s\nimpl: Implement. %s\n", host(e.name), host(review), host(e.name))
	if string(turns) != want {
		t.Errorf("turns:\n%s\nwant:\n%s", turns, want)
	}
	// Neither agent can rewrite its neighbour's declaration, overlay or
	// prompt (issue 20: a neighbour's file is protected too).
	for _, pair := range [][2]string{{e.name, "review"}, {review, "impl"}} {
		for _, f := range []string{"sandbox.yaml", "sandbox.local.yaml", "PROMPT.md"} {
			path := filepath.Join(e.ws, pair[1], f)
			if out, err := exec.Command("docker", "exec", docker.ContainerName(pair[0]), "sh", "-c", "echo 'name: x' >> "+path).CombinedOutput(); err == nil {
				t.Errorf("sandbox %s could write its neighbour's %s/%s: %s", pair[0], pair[1], f, out)
			}
		}
	}
	var sbs []string
	for _, r := range e.statusOf("-f", "review/sandbox.yaml")["records"].([]any) {
		sbs = append(sbs, r.(map[string]any)["sandbox"].(string))
	}
	if got, want := strings.Join(sbs, ","), strings.Join([]string{e.name, review, e.name}, ","); got != want {
		t.Errorf("records' sandboxes %s, want %s", got, want)
	}
}

func TestLoopDenialRecords(t *testing.T) {
	e := newLoopEnv(t, "e2e-loop-deny")
	// The agent asks the proxy for the test's web server (not allowed)
	// and for a host name carrying a terminal escape sequence.
	e.file(fmt.Sprintf(`  maxIterations: 1
  completion: {promise: DONE}
  command: [sh, -c, 'wget -q -O- http://%s:8080/ >/dev/null 2>&1; printf "GET http://evil\033]0;owned\007.invalid/ HTTP/1.0\r\n\r\n" | nc -w 5 127.0.0.1 3128 >/dev/null; echo tried']
`, env.WebIP))
	out, code := e.sbx("loop", "-y")
	if code != 3 || !strings.Contains(out, "2 egress denials") {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	rec := e.records()[0]
	denied, _ := rec["denied"].([]any)
	if rec["denials"].(float64) != 2 || len(denied) != 2 {
		t.Fatalf("record: %v", rec)
	}
	// The proxy cannot parse the second request: its reason quotes the
	// URL (net/url's error), and the status escapes it once more. (Raw
	// control characters in a record: TestDenialsRecorded in loop.)
	d0, d1 := denied[0].(map[string]any), denied[1].(map[string]any)
	if d0["host"] != env.WebIP || d0["reason"] != "not in the allow list (policy: deny)" || !strings.Contains(fmt.Sprint(d1["reason"]), `evil\x1b]0;owned\a.invalid`) {
		t.Errorf("denied: %v", denied)
	}
	st, code := e.sbx("loop", "status")
	if code != 0 || strings.ContainsAny(st, "\x1b\a") || !strings.Contains(st, "denied ") || !strings.Contains(st, `(no host): "malformed request: parse \"http://evil\\x1b]0;owned\\a.invalid/\"`) {
		t.Errorf("status shows:\n%q", st)
	}
}
