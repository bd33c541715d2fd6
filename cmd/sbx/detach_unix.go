//go:build unix

package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"time"

	"github.com/sbxhq/sbx/loop"
)

// canDetach says whether this system can run a loop in the background.
func canDetach() error { return nil }

// selfExecutable is this very binary: /proc/self/exe where there is one
// (it names the running program's file even if the path was replaced
// since), else what os.Executable finds.
func selfExecutable() (string, error) {
	if _, err := os.Stat("/proc/self/exe"); err == nil {
		return "/proc/self/exe", nil
	}
	return os.Executable()
}

// detachTimeout bounds the wait for the detached process to take over
// the run: it reads the files and writes the status, no more.
const detachTimeout = time.Minute

// detach starts this same sbx binary as the run's detached process — its
// own session, so neither the terminal's hangup nor its Ctrl-C reaches
// it; standard input from /dev/null, output to the run's log — hands it
// the run's lock files, and returns once it has taken the run over. Its
// arguments are the hidden verb, the run's id and the flags the user gave
// (loopFlags.argv); its environment is sbx's own. Nothing the agent can
// write becomes either.
func (a *app) detach(ctx context.Context, run *loop.Run, o *loopFlags, term stdio) error {
	exe, err := selfExecutable()
	if err != nil {
		return fmt.Errorf("--detach: finding sbx's own binary: %v", err)
	}
	st := run.Status()
	logf, err := os.OpenFile(st.Log, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return err
	}
	defer logf.Close()
	devnull, err := os.Open(os.DevNull)
	if err != nil {
		return err
	}
	defer devnull.Close()
	ready, readyW, err := os.Pipe()
	if err != nil {
		return err
	}
	defer ready.Close()
	cmd := &exec.Cmd{
		Path:        exe,
		Args:        append([]string{"sbx", loopDetachedVerb, "--run", run.ID}, o.argv()...),
		Env:         a.env,
		Stdin:       devnull,
		Stdout:      logf,
		Stderr:      logf,
		ExtraFiles:  append(run.LockFiles(), readyW),
		SysProcAttr: &syscall.SysProcAttr{Setsid: true},
	}
	err = cmd.Start()
	readyW.Close()
	if err != nil {
		return fmt.Errorf("--detach: starting the background loop: %v", err)
	}
	said := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(ready).ReadString('\n')
		said <- line
	}()
	var line string
	select {
	case line = <-said:
	case <-ctx.Done():
	case <-time.After(detachTimeout):
	}
	if line != "ok\n" {
		cmd.Process.Kill()
		cmd.Wait()
		if ctx.Err() != nil {
			return errDetachInterrupted
		}
		return fmt.Errorf("the background loop did not start; its log: %s", st.Log)
	}
	run.HandOff()
	pid := cmd.Process.Pid
	cmd.Process.Release()
	fmt.Fprintln(term.out, run.ID)
	fmt.Fprintf(term.err, `sbx loop: run %s continues in the background (pid %d)
  follow it:  sbx loop logs --follow
  its state:  sbx loop status
  end it:     sbx loop stop
`, run.ID, pid)
	return nil
}

// inheritedFiles are the files the process that began the run handed to
// this detached one: n lock files from descriptor 3 on, then the pipe it
// waits on.
func inheritedFiles(n int) ([]*os.File, *os.File, error) {
	var locks []*os.File
	for i := 0; i < n; i++ {
		f := os.NewFile(uintptr(3+i), fmt.Sprintf("run lock %d", i))
		if f == nil {
			return nil, nil, fmt.Errorf("descriptor %d (a run lock) was not handed down", 3+i)
		}
		locks = append(locks, f)
	}
	ready := os.NewFile(uintptr(3+n), "ready")
	if ready == nil {
		return nil, nil, fmt.Errorf("descriptor %d (the start pipe) was not handed down", 3+n)
	}
	return locks, ready, nil
}

// ignoreHangup keeps the detached process alive if a hangup reaches it
// anyway (it has no terminal: none should).
func ignoreHangup() { signal.Ignore(syscall.SIGHUP) }
