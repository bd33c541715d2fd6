package mockmodel

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sbxhq/sbx/internal/agenttest"
	"github.com/sbxhq/sbx/loop"
)

// The real agent CLIs against the mock on loopback, two loop iterations
// each, run as sbx's loop runs them: a fresh process per iteration, the
// prompt (loop.Prompt) on stdin, the promise looked for on stdout
// (loop.PromiseSeen). The agents are the pinned releases, or with
// SBX_AGENT_RELEASES=latest the newest (internal/agenttest). Every test
// here that runs a real agent is named TestReal…: .ci/run selects them by
// that name to run them against the newest releases too.

const (
	agentPrompt  = "Do the sbx mock task."
	agentPromise = "COMPLETE"
	agentMax     = 3
	agentTimeout = 3 * time.Minute
)

// agentTools are the agent CLIs SBX_AGENT_RELEASES chooses
// (internal/agenttest, downloaded once per release), skipping the test
// when they cannot be had and failing instead when SBX_E2E=1.
func agentTools(t *testing.T) agenttest.Tools {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	tools, err := agenttest.Fetch(ctx)
	if err != nil {
		if os.Getenv("SBX_E2E") == "1" {
			t.Fatalf("SBX_E2E=1 but the agents could not be had: %v", err)
		}
		t.Skipf("the agents could not be had (%v); set SBX_E2E=1 to make this a failure", err)
	}
	return tools
}

// trap is an HTTP(S) proxy on loopback that refuses everything and notes
// what it was asked for: the agents get it as their proxy, so a request
// meant for anywhere but the mock goes nowhere, and the test sees it.
type trap struct {
	ln   net.Listener
	wg   sync.WaitGroup
	mu   sync.Mutex
	asks []string
}

func newTrap(t *testing.T) *trap {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tr := &trap{ln: ln}
	tr.wg.Add(1)
	go tr.serve()
	t.Cleanup(func() {
		ln.Close()
		tr.wg.Wait()
	})
	return tr
}

func (tr *trap) serve() {
	defer tr.wg.Done()
	for {
		c, err := tr.ln.Accept()
		if err != nil {
			return
		}
		tr.wg.Add(1)
		go tr.refuse(c)
	}
}

func (tr *trap) refuse(c net.Conn) {
	defer tr.wg.Done()
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	line, _ := bufio.NewReaderSize(c, 4096).ReadString('\n')
	tr.mu.Lock()
	tr.asks = append(tr.asks, strings.TrimSpace(line))
	tr.mu.Unlock()
	_, _ = c.Write([]byte("HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"))
}

func (tr *trap) requests() []string {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return append([]string(nil), tr.asks...)
}

// agentEnv is one agent's world: a git workspace, its own HOME and TMPDIR,
// the mock with its request log, and the trap as proxy.
type agentEnv struct {
	t     *testing.T
	ws    string
	home  string
	url   string
	key   string
	log   *syncBuffer
	trap  *trap
	extra []string
}

func newAgentEnv(t *testing.T, key string) *agentEnv {
	t.Helper()
	var log syncBuffer
	srv := httptest.NewServer(New(Config{Script: Script{PromiseAt: 2, Promise: agentPromise}, Delay: 20 * time.Millisecond, Log: &log}))
	t.Cleanup(srv.Close)
	a := &agentEnv{t: t, ws: t.TempDir(), home: t.TempDir(), url: srv.URL, key: key, log: &log, trap: newTrap(t)}
	git := exec.Command("git", "init", "-q", a.ws)
	git.Env = a.env()
	if out, err := git.CombinedOutput(); err != nil {
		t.Fatalf("git init: %v: %s", err, out)
	}
	return a
}

// env is the whole environment of an agent process: nothing from the
// host but PATH.
func (a *agentEnv) env() []string {
	proxy := "http://" + a.trap.ln.Addr().String()
	tmp := filepath.Join(a.home, "tmp")
	if err := os.MkdirAll(tmp, 0o700); err != nil {
		a.t.Fatal(err)
	}
	env := []string{
		"PATH=" + os.Getenv("PATH"), "HOME=" + a.home, "TMPDIR=" + tmp, "LANG=C.UTF-8",
		"HTTPS_PROXY=" + proxy, "HTTP_PROXY=" + proxy, "https_proxy=" + proxy, "http_proxy=" + proxy,
		"NO_PROXY=127.0.0.1,localhost", "no_proxy=127.0.0.1,localhost",
	}
	return append(env, a.extra...)
}

// run is one finished agent process.
type run struct {
	stdout, stderr string
	took           time.Duration
	entries        []Entry // the mock's log lines for this run
}

// iterate runs iteration n of the loop: the agent command with the prompt
// sbx writes on stdin.
func (a *agentEnv) iterate(n int, bin string, args ...string) run {
	a.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), agentTimeout)
	defer cancel()
	before := len(a.log.entries(a.t))
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = a.ws
	cmd.Env = a.env()
	cmd.Stdin = strings.NewReader(loop.Prompt(n, agentMax, nil, agentPrompt))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = 10 * time.Second
	start := time.Now()
	err := cmd.Run()
	r := run{stdout: stdout.String(), stderr: stderr.String(), took: time.Since(start), entries: a.log.entries(a.t)[before:]}
	if err != nil {
		a.t.Fatalf("iteration %d: %v\nstdout:\n%s\nstderr:\n%s", n, err, r.stdout, r.stderr)
	}
	first := time.Duration(0)
	if len(r.entries) > 0 {
		first = r.entries[0].Time.Sub(start)
	}
	a.t.Logf("iteration %d took %v, its first request to the mock after %v, %d requests",
		n, r.took.Round(time.Millisecond), first.Round(time.Millisecond), len(r.entries))
	return r
}

// checkIteration asserts what iteration n must leave: its file, the shell
// log's lines so far, the promise on stdout from iteration 2 on, the key on
// every model request, and the scripted steps in order.
func (a *agentEnv) checkIteration(n int, r run) {
	a.t.Helper()
	file, err := os.ReadFile(filepath.Join(a.ws, IterationFile(n)))
	if err != nil {
		a.t.Errorf("iteration %d wrote no %s: %v", n, IterationFile(n), err)
	} else if want := (Script{}).Plan(Loop{Iteration: n, Of: agentMax}, true).Content; string(file) != want {
		a.t.Errorf("%s holds %q, want %q", IterationFile(n), file, want)
	}
	var wantLog []string
	for i := 1; i <= n; i++ {
		wantLog = append(wantLog, fmt.Sprintf("iteration %d", i))
	}
	shellLog, err := os.ReadFile(filepath.Join(a.ws, ShellLog))
	if got := strings.Split(strings.TrimSuffix(string(shellLog), "\n"), "\n"); err != nil || !cmp.Equal(wantLog, got) {
		a.t.Errorf("%s after iteration %d: %q, %v; want lines %q", ShellLog, n, shellLog, err, wantLog)
	}
	if got, want := loop.PromiseSeen(r.stdout, agentPromise), n >= 2; got != want {
		a.t.Errorf("iteration %d: promise on stdout %v, want %v; stdout:\n%s", n, got, want, r.stdout)
	}
	var steps []Action
	for _, e := range r.entries {
		if e.Status >= 400 && e.Status != 426 {
			a.t.Errorf("the mock refused %s %s (%d: %s): an endpoint the agent needs is missing", e.Method, e.Path, e.Status, e.Error)
		}
		if e.Action == "" {
			continue
		}
		if e.Key != a.key {
			a.t.Errorf("%s %s carried key %q, want %q", e.Method, e.Path, e.Key, a.key)
		}
		if e.Iteration == n {
			steps = append(steps, e.Action)
		}
	}
	if diff := cmp.Diff([]Action{WriteFile, Shell, Finish}, steps); diff != "" {
		a.t.Errorf("iteration %d: scripted steps (-want +got):\n%s", n, diff)
	}
	if asks := a.trap.requests(); len(asks) > 0 {
		a.t.Errorf("the agent tried to reach beyond the mock: %q", asks)
	}
}

func TestRealClaude(t *testing.T) {
	bin := agentTools(t).Claude
	a := newAgentEnv(t, "sk-ant-sbx-mock-test")
	a.extra = []string{
		"IS_SANDBOX=1", // we run as root
		"ANTHROPIC_BASE_URL=" + a.url,
		"ANTHROPIC_API_KEY=" + a.key,
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
	}
	for n := 1; n <= 2; n++ {
		r := a.iterate(n, bin, "-p", "--dangerously-skip-permissions")
		a.checkIteration(n, r)
	}
}

// codexConfig is $HOME/.codex/config.toml as the end-to-end tests write
// it: the mock as the OpenAI base URL, and off what would reach other
// hosts (update check, analytics, the plugin and app catalogs).
const codexConfig = `openai_base_url = %q
check_for_update_on_startup = false

[analytics]
enabled = false

[features]
plugins = false
remote_plugin = false
apps = false
`

func TestRealCodex(t *testing.T) {
	bin := filepath.Join(agentTools(t).CodexDir, "bin", "codex")
	a := newAgentEnv(t, "sk-sbx-mock-test")
	a.extra = []string{"CODEX_API_KEY=" + a.key}
	if err := os.MkdirAll(filepath.Join(a.home, ".codex"), 0o700); err != nil {
		t.Fatal(err)
	}
	config := fmt.Sprintf(codexConfig, a.url+"/v1")
	if err := os.WriteFile(filepath.Join(a.home, ".codex", "config.toml"), []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	for n := 1; n <= 2; n++ {
		r := a.iterate(n, bin, "exec", "--dangerously-bypass-approvals-and-sandbox", "-")
		a.checkIteration(n, r)
		gets := 0
		for _, e := range r.entries {
			if e.Method == "GET" && e.Path == "/v1/responses" {
				gets++
			}
		}
		if gets > 1 {
			t.Errorf("iteration %d: %d WebSocket handshakes, want at most 1 (no retries)", n, gets)
		}
		for _, line := range strings.Split(r.stderr, "\n") {
			// The one refused handshake is logged as an error by codex
			// (codex-rs/codex-api/src/endpoint/responses_websocket.rs
			// logs every failed connect); anything else is not clean.
			if strings.Contains(line, "Reconnecting") || strings.Contains(line, "Falling back") ||
				strings.Contains(line, "ERROR") && !strings.Contains(line, "failed to connect to Responses WebSocket") {
				t.Errorf("iteration %d: codex stderr: %s", n, line)
			}
		}
		// The prompt's echo and progress go to stderr, the final message
		// to stdout.
		if strings.Contains(r.stdout, agentPrompt) || !strings.Contains(r.stderr, agentPrompt) {
			t.Errorf("iteration %d: the prompt echo is not on stderr only\nstdout:\n%s\nstderr:\n%s", n, r.stdout, r.stderr)
		}
	}
}
