//go:build unix

package loop

import (
	"bytes"
	"os"
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
