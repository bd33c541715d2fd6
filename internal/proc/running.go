// Package proc tells a live process from one that is gone, by its pid
// and its start time, so that a pid the system gave to a later process is
// not taken for the one that recorded it (a loop run's status, a test
// run's cluster namespace).
package proc

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// Running reports whether the process that recorded pid and start is
// still there: pid exists and, where the system says when a process
// started, it started when it did then.
func Running(pid int, start string) bool {
	if !alive(pid) {
		return false
	}
	if start == "" {
		return true
	}
	now := Start(pid)
	return now == "" || now == start
}

// Owner names this process on this machine, as Gone reads it: the host
// name, the pid and its start time. Tests record it on what they create,
// so that a later run can tell a killed run's leftovers from a live run's
// objects.
func Owner() string {
	host, _ := os.Hostname()
	return fmt.Sprintf("%s/%d/%s", host, os.Getpid(), Start(os.Getpid()))
}

// Gone reports whether the owner (as Owner named it) is a process of
// this machine that is no longer running. An owner of another machine,
// or one Owner did not write, is not known to be gone.
func Gone(owner string) bool {
	host, _ := os.Hostname()
	parts := strings.Split(owner, "/")
	if len(parts) != 3 || parts[0] != host {
		return false
	}
	pid, err := strconv.Atoi(parts[1])
	return err == nil && !Running(pid, parts[2])
}
