package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sbxhq/sbx/driver"
	"github.com/sbxhq/sbx/driver/docker"
	"github.com/sbxhq/sbx/internal/fixture"
)

// The agent loop end to end: the static sbx binary as a user runs it, the
// docker driver on a real daemon, a fake agent (a shell script) in the
// busybox template.

type loopEnv struct {
	t     *testing.T
	ws    string
	state string
	name  string
}

func newLoopEnv(t *testing.T, name string) *loopEnv {
	env.Require(t)
	e := &loopEnv{t: t, ws: t.TempDir(), state: t.TempDir(), name: env.Uniq(name)}
	t.Cleanup(func() {
		fixture.RemoveSandbox(e.name)
	})
	os.WriteFile(filepath.Join(e.ws, "PROMPT.md"), []byte("Do the task.\n"), 0o644)
	return e
}

// file writes sandbox.yaml with a loop section; agent is the fake agent's
// shell script (sbx.yaml interpolation: write $$ for $).
func (e *loopEnv) file(loop string) {
	e.t.Helper()
	doc := fmt.Sprintf(`version: 1
name: %s
agent: shell
driver: docker
template: %s
secrets:
  GITHUB_TOKEN: {env: GH_TOKEN}
network: {agentHosts: false}
loop:
  prompt: PROMPT.md
%s`, e.name, env.Image, loop)
	if err := os.WriteFile(filepath.Join(e.ws, "sandbox.yaml"), []byte(doc), 0o644); err != nil {
		e.t.Fatal(err)
	}
}

func (e *loopEnv) cmd(args ...string) *exec.Cmd {
	c := exec.Command(env.Binary, args...)
	c.Dir = e.ws
	c.Env = append(os.Environ(), "SBX_STATE_DIR="+e.state, "SBX_STATIC_BINARY="+env.Binary, "GH_TOKEN=ghp_loop_e2e_Secret77")
	return c
}

// sbx runs the static sbx and returns its output and exit status.
func (e *loopEnv) sbx(args ...string) (string, int) {
	e.t.Helper()
	out, err := e.cmd(args...).CombinedOutput()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		e.t.Fatal(err)
	}
	return string(out), code
}

func (e *loopEnv) status() map[string]any {
	e.t.Helper()
	return e.statusOf()
}

// statusOf is sbx loop status --json with args (files).
func (e *loopEnv) statusOf(args ...string) map[string]any {
	e.t.Helper()
	out, code := e.sbx(append([]string{"loop", "status", "--json"}, args...)...)
	if code != 0 {
		e.t.Fatalf("loop status: %d %s", code, out)
	}
	var s map[string]any
	if err := json.Unmarshal([]byte(out), &s); err != nil {
		e.t.Fatalf("%v: %s", err, out)
	}
	return s
}

func (e *loopEnv) records() []map[string]any {
	e.t.Helper()
	runDir := e.status()["run_dir"].(string)
	f, err := os.Open(filepath.Join(runDir, "records.jsonl"))
	if err != nil {
		e.t.Fatal(err)
	}
	defer f.Close()
	var recs []map[string]any
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var r map[string]any
		json.Unmarshal(sc.Bytes(), &r)
		recs = append(recs, r)
	}
	return recs
}

// agentProcesses lists the sandbox's processes whose command line holds
// marker (plain text, no shell or glob characters). The pattern brackets
// its first character so the scan does not find itself.
func (e *loopEnv) agentProcesses(marker string) string {
	pattern := "[" + marker[:1] + "]" + strings.ReplaceAll(marker[1:], " ", `\ `)
	out, _ := exec.Command("docker", "exec", docker.ContainerName(e.name), "sh", "-c",
		"for p in /proc/[0-9]*; do c=$(tr '\\0' ' ' < $p/cmdline 2>/dev/null); case \"$c\" in *"+pattern+"*) echo \"$c\";; esac; done").Output()
	return strings.TrimSpace(string(out))
}

const counter = `n=$$(( $$(cat n 2>/dev/null || echo 0) + 1 )); echo $$n > n; `

func TestLoopCompletesAndVerifies(t *testing.T) {
	e := newLoopEnv(t, "e2e-loop")
	// Promises every iteration; verify passes once the agent has made
	// "ok", on its second iteration.
	e.file(`  maxIterations: 5
  completion: {promise: DONE, verify: ["test -f ok"]}
  command: [sh, -c, '` + counter + `[ $$n -ge 2 ] && touch ok; echo "token=$$GITHUB_TOKEN"; echo "$$GITHUB_TOKEN" > agent-saw; echo "<promise>DONE</promise>"']
`)
	out, code := e.sbx("loop", "-y")
	if code != 0 || !strings.Contains(out, "completed: complete after 2 iteration(s)") {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	recs := e.records()
	// The docker driver counts denials: 0 is said, not left out
	// (docs/loop-status-json.md).
	for _, r := range recs {
		if r["denials"] != 0.0 || r["upstream_errors"] != 0.0 {
			t.Errorf("iteration %v: denials %v, upstream_errors %v, want 0 and 0", r["iteration"], r["denials"], r["upstream_errors"])
		}
	}
	v0 := recs[0]["verify"].([]any)[0].(map[string]any)
	v1 := recs[1]["verify"].([]any)[0].(map[string]any)
	if v0["exit_status"].(float64) == 0 || v1["exit_status"].(float64) != 0 {
		t.Errorf("verify results: %v, %v", v0, v1)
	}
	// The secret reached the agent but no log or record.
	saw, _ := os.ReadFile(filepath.Join(e.ws, "agent-saw"))
	if strings.TrimSpace(string(saw)) != "ghp_loop_e2e_Secret77" {
		t.Errorf("agent saw %q", saw)
	}
	if strings.Contains(out, "ghp_loop_e2e_Secret77") || !strings.Contains(out, "token=[redacted]") {
		t.Errorf("terminal output shows the secret:\n%s", out)
	}
	filepath.Walk(e.state, func(p string, info os.FileInfo, err error) error {
		if err == nil && !info.IsDir() {
			if data, _ := os.ReadFile(p); bytes.Contains(data, []byte("ghp_loop_e2e_Secret77")) {
				t.Errorf("%s holds the secret", p)
			}
		}
		return nil
	})
	inspect, _ := exec.Command("docker", "inspect", docker.ContainerName(e.name)).Output()
	if bytes.Contains(inspect, []byte("ghp_loop_e2e_Secret77")) {
		t.Error("docker inspect shows the secret")
	}

	// maxIterations: never promising ends with exit 3.
	e.file(`  maxIterations: 2
  completion: {promise: DONE}
  breaker: {noProgress: 0}
  command: [sh, -c, 'echo working']
`)
	if out, code := e.sbx("loop", "-y"); code != 3 || !strings.Contains(out, "max-iterations") {
		t.Errorf("maxIterations: exit %d\n%s", code, out)
	}
	// The breaker: an agent that changes nothing trips it after 2.
	e.file(`  maxIterations: 10
  completion: {promise: DONE}
  breaker: {noProgress: 2}
  command: [sh, -c, 'echo thinking']
`)
	if out, code := e.sbx("loop", "-y"); code != 4 || !strings.Contains(out, "no progress in 2 iterations") {
		t.Errorf("breaker: exit %d\n%s", code, out)
	}
	// --max-iterations overrides the file.
	if out, code := e.sbx("loop", "-y", "--max-iterations", "1"); code != 3 || !strings.Contains(out, "iteration 1 of 1") {
		t.Errorf("--max-iterations: exit %d\n%s", code, out)
	}
}

func TestLoopTimeoutKillsAgentTree(t *testing.T) {
	e := newLoopEnv(t, "e2e-loop-timeout")
	e.file(`  maxIterations: 1
  iterationTimeout: 1s
  completion: {promise: DONE}
  command: [sh, -c, 'sh -c "sleep 300; : hang-marker" & sleep 301']
`)
	out, code := e.sbx("loop", "-y")
	if code != 3 || !strings.Contains(out, "hit iterationTimeout") {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	if rec := e.records()[0]; rec["timed_out"] != true {
		t.Errorf("record: %v", rec)
	}
	if ps := e.agentProcesses("sleep 30"); ps != "" {
		t.Errorf("processes of the agent survive in the sandbox:\n%s", ps)
	}
}

func TestLoopSteering(t *testing.T) {
	e := newLoopEnv(t, "e2e-loop-steer")
	e.file(`  maxIterations: 10
  completion: {promise: DONE}
  command: [sh, -c, '` + counter + `cat > .in-$$n && mv .in-$$n in-$$n; while [ ! -f go-$$n ]; do sleep 0.05; done']
`)
	if out, code := e.sbx("apply", "-y"); code != 0 {
		t.Fatalf("apply: %s", out)
	}
	run := e.cmd("loop", "-y")
	var runOut bytes.Buffer
	run.Stdout, run.Stderr = &runOut, &runOut
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	defer run.Process.Kill()
	wait := func(name string) {
		for i := 0; i < 200; i++ {
			if _, err := os.Stat(filepath.Join(e.ws, name)); err == nil {
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
		t.Fatalf("%s never appeared:\n%s", name, runOut.String())
	}
	wait("in-1")
	s := e.status()
	if s["state"] != "running" || s["phase"] != "agent" || s["max_iterations"].(float64) != 10 || s["iteration"].(float64) != 1 {
		t.Errorf("status during iteration 1: %v", s)
	}
	if out, code := e.sbx("loop", "hint", "Focus on the auth module"); code != 0 {
		t.Fatal(out)
	}
	os.WriteFile(filepath.Join(e.ws, "go-1"), nil, 0o644)
	wait("in-2")
	in2, _ := os.ReadFile(filepath.Join(e.ws, "in-2"))
	if !strings.Contains(string(in2), "- Focus on the auth module") {
		t.Errorf("iteration 2's stdin:\n%s", in2)
	}
	if s := e.status(); s["iteration"].(float64) != 2 || s["last_outcome"].(map[string]any)["exit_status"].(float64) != 0 {
		t.Errorf("status during iteration 2: %v", s)
	}
	if ps := e.agentProcesses("sleep 0.05"); ps == "" {
		t.Fatal("the process scan does not see the running agent; it cannot prove the stop")
	}
	// sbx loop stop fails unless the run records its end within 2 s.
	if out, code := e.sbx("loop", "stop"); code != 0 {
		t.Fatalf("loop stop: %d %s", code, out)
	}
	err := run.Wait()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 130 {
		t.Errorf("loop exit: %v\n%s", err, runOut.String())
	}
	if ps := e.agentProcesses("sleep 0.05"); ps != "" {
		t.Errorf("the agent survives the stop:\n%s", ps)
	}
	if s := e.status(); s["state"] != "interrupted" {
		t.Errorf("status after stop: %v", s)
	}
}

func TestLoopEphemeral(t *testing.T) {
	e := newLoopEnv(t, "e2e-loop-eph")
	// The agent fails every time: the run ends at maxIterations, and the
	// sandbox is destroyed all the same.
	e.file(`  maxIterations: 1
  ephemeral: true
  completion: {promise: DONE}
  command: [sh, -c, 'echo boom >&2; exit 1']
`)
	out, code := e.sbx("loop", "-y")
	if code != 3 || !strings.Contains(out, "destroying the ephemeral sandbox") {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	for _, kind := range [][]string{{"ps", "-a"}, {"volume", "ls"}} {
		left, _ := exec.Command("docker", append(kind, "-q", "--filter", "label="+driver.LabelSandbox+"="+e.name)...).Output()
		if s := strings.TrimSpace(string(left)); s != "" {
			t.Errorf("docker %s: left behind %s", kind[0], s)
		}
	}
}

// TestLoopTemplateWithoutTmp: the template (FROM scratch) has no /tmp, and
// the workspace is not under /tmp either (its mount would make one): the
// loop's pid file for the agent's process group still works, and no
// iteration prints an error about it.
func TestLoopTemplateWithoutTmp(t *testing.T) {
	e := newLoopEnv(t, "e2e-notmp")
	base, err := os.UserCacheDir()
	if err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(base, 0o700)
	ws, err := os.MkdirTemp(base, "sbx-notmp-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(ws) })
	if strings.HasPrefix(ws, "/tmp/") {
		t.Fatalf("the workspace %s is under /tmp", ws)
	}
	e.ws = ws
	os.WriteFile(filepath.Join(e.ws, "PROMPT.md"), []byte("Do the task.\n"), 0o644)
	e.file(`  maxIterations: 2
  completion: {promise: DONE}
  command: [sh, -c, 'test -f $$(ls /tmp/sbx-loop-*.pid) && echo "<promise>DONE</promise>"']
`)
	out, code := e.sbx("loop", "-y")
	if code != 0 || !strings.Contains(out, "completed: complete after 1 iteration(s)") {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	if strings.Contains(out, "sbx: open") || strings.Contains(out, "can't create") {
		t.Errorf("an iteration printed a pid file error:\n%s", out)
	}
}
