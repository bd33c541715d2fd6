//go:build unix

package main

import (
	"bufio"
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestApplyInterrupted: Ctrl-C while a backend command runs (here Docker's
// sbx creating the sandbox, which never ends) stops apply with exit 130
// and one line naming the step, not the killed command's "exit status
// 137" and its command line; no record is written, so the next plan still
// creates the sandbox and the same command finishes the job.
func TestApplyInterrupted(t *testing.T) {
	dir := t.TempDir()
	base, sbxBin, _ := fakeWorld(t, dir)
	ready := filepath.Join(dir, "ready")
	if err := syscall.Mkfifo(ready, 0o600); err != nil {
		t.Fatal(err)
	}
	ws := filepath.Join(dir, "ws")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	doc := "version: 1\nname: api\nagent: shell\ndriver: sbx\nnetwork: {agentHosts: false, allow: [a.example.com]}\n"
	if err := os.WriteFile(filepath.Join(ws, "sandbox.yaml"), []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	run := func(env []string, args ...string) *exec.Cmd {
		c := exec.Command(sbxBin, args...)
		c.Dir, c.Env = ws, env
		return c
	}

	var stdout, stderr bytes.Buffer
	apply := run(append(base, "FAKE_SBX_HANG=create", "FAKE_SBX_HANG_READY="+ready), "apply", "-y")
	apply.Stdout, apply.Stderr = &stdout, &stderr
	if err := apply.Start(); err != nil {
		t.Fatal(err)
	}
	// The fake says when it hangs in create; then Ctrl-C (SIGINT to sbx).
	f, err := os.Open(ready)
	if err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(f).ReadString('\n')
	f.Close()
	if err != nil || line != "hung\n" {
		t.Fatalf("handshake: %q, %v", line, err)
	}
	if err := apply.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	err = apply.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != exitInterrupted {
		t.Fatalf("apply after Ctrl-C: %v, want exit %d\nstdout:\n%s\nstderr:\n%s", err, exitInterrupted, stdout.String(), stderr.String())
	}
	want := "sbx: interrupted during step 1/4 (create sandbox \"api\"); what ran before it is done, nothing after it was started; run the same command to finish\n"
	if stderr.String() != want {
		t.Errorf("stderr:\n%s\nwant:\n%s", stderr.String(), want)
	}

	// Nothing was recorded: the plan still creates it, and the same
	// command finishes.
	out, err := run(base, "plan").CombinedOutput()
	if err != nil || !strings.Contains(string(out), `sandbox "api" will be created`) {
		t.Errorf("plan after the interrupted apply: %v\n%s", err, out)
	}
	out, err = run(base, "apply", "-y").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "Apply complete: 1 created") {
		t.Errorf("the same command again: %v\n%s", err, out)
	}
}
