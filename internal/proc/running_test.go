package proc

import (
	"fmt"
	"os"
	"os/exec"
	"testing"
)

// TestGone: an owner is gone when it is a process of this machine that
// no longer runs; a live process, or another machine's, is not.
func TestGone(t *testing.T) {
	host, _ := os.Hostname()
	if Gone(Owner()) {
		t.Error("this process taken for gone")
	}
	if !Gone(fmt.Sprintf("%s/%d/x", host, deadPID(t))) {
		t.Error("a dead process not taken for gone")
	}
	for _, o := range []string{"other-host/1/1", "garbage", host + "/notapid/1", ""} {
		if Gone(o) {
			t.Errorf("owner %q taken for gone", o)
		}
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
