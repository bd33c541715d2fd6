//go:build unix

package loop

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// RunGroupMain is `sbx __run-group PIDFILE -- ARGV...`, run inside the
// sandbox: it starts ARGV as the leader of a new process group, writes the
// group id to PIDFILE, passes SIGTERM and SIGINT on to the group, and exits
// with ARGV's status (128+signal when killed).
func RunGroupMain(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) < 3 || args[1] != "--" {
		fmt.Fprintln(stderr, "usage: sbx __run-group PIDFILE -- COMMAND [ARG...]")
		return 2
	}
	pidfile, argv := args[0], args[2:]
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, stdout, stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	defer signal.Stop(sigs)
	if err := cmd.Start(); err != nil {
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, fs.ErrNotExist) {
			fmt.Fprintf(stderr, "%s%s\n", MissingCommand, argv[0])
			return 127
		}
		fmt.Fprintf(stderr, "sbx: %v\n", err)
		return 126
	}
	pgid := cmd.Process.Pid
	if err := os.WriteFile(pidfile, []byte(strconv.Itoa(pgid)+"\n"), 0o600); err != nil {
		fmt.Fprintf(stderr, "sbx: %v\n", err)
	}
	defer os.Remove(pidfile)
	go func() {
		for s := range sigs {
			syscall.Kill(-pgid, s.(syscall.Signal))
		}
	}()
	err := cmd.Wait()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal())
		}
		return ee.ExitCode()
	}
	if err != nil {
		return 1
	}
	return 0
}

// KillGroupMain is `sbx __kill-group PIDFILE`: SIGTERM to the group in
// PIDFILE, then SIGKILL to whatever is left after a grace period.
func KillGroupMain(args []string, stderr io.Writer) int {
	if len(args) != 1 {
		fmt.Fprintln(stderr, "usage: sbx __kill-group PIDFILE")
		return 2
	}
	data, err := os.ReadFile(args[0])
	if errors.Is(err, os.ErrNotExist) {
		return 0 // already gone
	}
	if err != nil {
		fmt.Fprintf(stderr, "sbx: %v\n", err)
		return 1
	}
	pgid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil || pgid <= 1 {
		fmt.Fprintf(stderr, "sbx: %s: not a process group id\n", args[0])
		return 1
	}
	syscall.Kill(-pgid, syscall.SIGTERM)
	deadline := time.Now().Add(killGrace)
	for time.Now().Before(deadline) {
		if !GroupAlive(pgid) {
			return 0
		}
		time.Sleep(50 * time.Millisecond)
	}
	syscall.Kill(-pgid, syscall.SIGKILL)
	return 0
}

// GroupAlive reports whether a process group has a member that is not a
// zombie (a zombie has exited; it only waits for its parent to reap it).
func GroupAlive(pgid int) bool {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return syscall.Kill(-pgid, 0) == nil
	}
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		data, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid pgrp ...; comm may hold spaces and parens.
		s := string(data)
		rest := s[strings.LastIndexByte(s, ')')+1:]
		f := strings.Fields(rest)
		if len(f) >= 3 && f[2] == strconv.Itoa(pgid) && f[0] != "Z" && f[0] != "X" {
			return true
		}
	}
	return false
}
