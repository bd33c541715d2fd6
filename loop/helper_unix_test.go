//go:build unix

package loop

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestRunGroupKillsGroup(t *testing.T) {
	pidfile := filepath.Join(t.TempDir(), "pid")
	done := make(chan int)
	var out bytes.Buffer
	go func() {
		done <- RunGroupMain([]string{pidfile, "--", "sh", "-c", "sleep 300 & sleep 300"}, nil, &out, &out)
	}()
	for i := 0; i < 100; i++ {
		if _, err := os.Stat(pidfile); err == nil {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	data, _ := os.ReadFile(pidfile)
	if code := KillGroupMain([]string{pidfile}, &out); code != 0 {
		t.Fatalf("kill: %d %s", code, out.String())
	}
	select {
	case code := <-done:
		if code != 128+int(syscall.SIGTERM) {
			t.Errorf("exit = %d, want %d", code, 128+int(syscall.SIGTERM))
		}
	case <-time.After(5 * time.Second):
		t.Fatal("group not killed")
	}
	pgid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil {
		t.Fatalf("pidfile: %q", data)
	}
	if GroupAlive(pgid) {
		t.Error("processes of the group survive")
	}
}

// TestRunGroupMissingCommand: a command that is not there exits 127 with
// the line the loop recognises, by name or by path.
func TestRunGroupMissingCommand(t *testing.T) {
	for _, cmd := range []string{"no-such-agent-sbx-test", "/no/such/agent"} {
		var out bytes.Buffer
		code := RunGroupMain([]string{filepath.Join(t.TempDir(), "pid"), "--", cmd, "-p"}, nil, &out, &out)
		if code != 127 || out.String() != MissingCommand+cmd+"\n" {
			t.Errorf("%s: exit %d, %q", cmd, code, out.String())
		}
	}
}

// TestKillReachesDetached plays an agent that moves a process out of its
// process group and session (setsid, its parent gone, SIGTERM ignored) and
// one that also removes the pid file: the kill still ends it, because the
// helper is its subreaper and __kill-group finds the helper by its
// command line.
func TestKillReachesDetached(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc: the helper runs inside a Linux sandbox")
	}
	if _, err := exec.LookPath("setsid"); err != nil {
		t.Skip("no setsid here")
	}
	detach := `(setsid sh -c 'trap "" TERM; echo $$ > "$0.tmp"; mv "$0.tmp" "$0"; while :; do sleep 1; done' "$D" &); `
	for _, tc := range []struct{ name, script string }{
		{"setsid", detach + `sleep 300`},
		{"setsid and no pid file", detach + `while [ ! -e "$D" ]; do sleep 0.01; done; rm -f "$P"; sleep 300`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			pidfile, detached := filepath.Join(dir, "pid"), filepath.Join(dir, "detached")
			cmd := exec.Command(os.Args[0], "__run-group", pidfile, "--", "sh", "-c", tc.script)
			cmd.Env = append(os.Environ(), "SBX_LOOP_TEST_RUN_GROUP=1", "D="+detached, "P="+pidfile)
			// A file, not a pipe, so that waiting for the helper does not
			// wait for a survivor that holds its output open.
			log, err := os.Create(filepath.Join(dir, "out"))
			if err != nil {
				t.Fatal(err)
			}
			defer log.Close()
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = log, log
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			pid := 0
			for i := 0; i < 500 && pid == 0; i++ {
				data, _ := os.ReadFile(detached)
				pid, _ = strconv.Atoi(strings.TrimSpace(string(data)))
				time.Sleep(10 * time.Millisecond)
			}
			if pid == 0 {
				cmd.Process.Kill()
				t.Fatal("the agent did not start its detached process")
			}
			t.Cleanup(func() { syscall.Kill(pid, syscall.SIGKILL) })
			if tc.name == "setsid and no pid file" {
				for i := 0; i < 500; i++ {
					if _, err := os.Stat(pidfile); err != nil {
						break
					}
					time.Sleep(10 * time.Millisecond)
				}
			}
			if code := KillGroupMain([]string{pidfile}, &out); code != 0 {
				t.Fatalf("kill: %d %s", code, out.String())
			}
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				cmd.Process.Kill()
				t.Fatal("the helper did not end")
			}
			if processAlive(pid) {
				t.Errorf("the detached process %d survives the kill", pid)
			}
		})
	}
}

// TestPidfileDirectoryMissing: in a template without the pid file's
// directory (FROM scratch: no /tmp) both groupers make it, world-writable
// and sticky as /tmp is, and print nothing about the pid file.
func TestPidfileDirectoryMissing(t *testing.T) {
	t.Run("helper", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "tmp")
		var out bytes.Buffer
		if code := RunGroupMain([]string{filepath.Join(dir, "sbx-loop-1.pid"), "--", "sh", "-c", "test -f " + dir + "/sbx-loop-1.pid && echo ok"}, nil, &out, &out); code != 0 || out.String() != "ok\n" {
			t.Errorf("exit %d: %q", code, out.String())
		}
		if fi, err := os.Stat(dir); err != nil || fi.Mode()&os.ModeSticky == 0 || fi.Mode().Perm() != 0o777 {
			t.Errorf("the pid file's directory: %v", err)
		}
	})
	t.Run("shell", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "tmp")
		argv := ShellGrouper{}.Group([]string{"sh", "-c", "test -f " + dir + "/sbx-loop-1.pid && echo ok"}, filepath.Join(dir, "sbx-loop-1.pid"))
		out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput()
		if err != nil || string(out) != "ok\n" {
			t.Errorf("%v: %q", err, out)
		}
		if fi, err := os.Stat(dir); err != nil || fi.Mode()&os.ModeSticky == 0 {
			t.Errorf("the pid file's directory: %v", err)
		}
	})
}
