//go:build unix

package loop

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// writePidfile records the group's pid. A template without the pid file's
// directory (an image FROM scratch has no /tmp) gets it, as /tmp is
// everywhere else: world-writable and sticky.
func writePidfile(pidfile string, pgid int) error {
	data := []byte(strconv.Itoa(pgid) + "\n")
	err := os.WriteFile(pidfile, data, 0o600)
	if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	dir := filepath.Dir(pidfile)
	switch err := os.Mkdir(dir, fs.ModePerm|fs.ModeSticky); {
	case err == nil:
		os.Chmod(dir, fs.ModePerm|fs.ModeSticky) // past the umask
	case !errors.Is(err, fs.ErrExist):
		return err
	}
	return os.WriteFile(pidfile, data, 0o600)
}

// RunGroupMain is `sbx __run-group PIDFILE -- ARGV...`, run inside the
// sandbox: it starts ARGV as the leader of a new process group, writes the
// group id to PIDFILE, passes SIGINT and SIGHUP on to the group, and exits
// with ARGV's status (128+signal when killed).
//
// The helper is a child subreaper (Linux): a process the agent detaches
// from its tree (setsid and a parent that exits, a double fork) is
// reparented to the helper, not to the sandbox's init, so it stays a
// descendant. Where the kernel has no subreapers (gVisor) such a process
// goes to the sandbox's init, and the kill sweeps init's children that
// started after the helper. SIGTERM (what __kill-group sends) ends all of
// the agent's processes, whatever their session or group, and the helper
// exits only when none is left.
func RunGroupMain(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) < 3 || args[1] != "--" {
		fmt.Fprintln(stderr, "usage: sbx __run-group PIDFILE -- COMMAND [ARG...]")
		return 2
	}
	pidfile, argv := args[0], args[2:]
	// Without subreapers (gVisor) the detached processes go to the
	// sandbox's init instead, and the kill sweeps them there.
	sweep := becomeSubreaper() != nil
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
	if err := writePidfile(pidfile, pgid); err != nil {
		fmt.Fprintf(stderr, "sbx: %v\n", err)
	}
	defer os.Remove(pidfile)
	killing, ended := make(chan struct{}), make(chan struct{})
	go func() {
		for s := range sigs {
			if s == syscall.SIGTERM {
				close(killing)
				endTree(os.Getpid(), pgid, sweep)
				close(ended)
				return
			}
			syscall.Kill(-pgid, s.(syscall.Signal))
		}
	}()
	err := cmd.Wait()
	select {
	case <-killing:
		// Reap what was reparented here while the tree is ended; then
		// nothing of the agent is left.
		reapChildren()
		<-ended
	default:
	}
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

// endTree ends every live process of the agent's tree below root (see
// agentTree) and the group pgid: SIGTERM, the grace period, then SIGKILL
// until none is left (each round finds the children a process forked
// before it died).
func endTree(root, pgid int, sweep bool) {
	signalTree(root, pgid, sweep, syscall.SIGTERM)
	deadline := time.Now().Add(killGrace)
	for time.Now().Before(deadline) {
		if len(agentTree(root, sweep)) == 0 && !GroupAlive(pgid) {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	for range 1000 {
		if len(agentTree(root, sweep)) == 0 && !GroupAlive(pgid) {
			return
		}
		signalTree(root, pgid, sweep, syscall.SIGKILL)
		time.Sleep(10 * time.Millisecond)
	}
}

// signalTree sends sig to the group pgid and to every process of the
// agent's tree below root.
func signalTree(root, pgid int, sweep bool, sig syscall.Signal) {
	if pgid > 1 {
		syscall.Kill(-pgid, sig)
	}
	for _, p := range agentTree(root, sweep) {
		syscall.Kill(p, sig)
	}
}

// reapChildren waits for every child of this process until it has none:
// the ones reparented to the subreaper would otherwise stay zombies.
func reapChildren() {
	for {
		var ws syscall.WaitStatus
		_, err := syscall.Wait4(-1, &ws, 0, nil)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil {
			return // ECHILD: none left
		}
	}
}

// KillGroupMain is `sbx __kill-group PIDFILE`: it ends the agent that
// `__run-group PIDFILE` runs. The helpers are found by their command line,
// not by the pid file alone, which the agent can rewrite or remove: each
// gets SIGTERM and ends its whole tree. Without a helper the group in
// PIDFILE gets SIGTERM; whatever is left after the grace period gets
// SIGKILL.
func KillGroupMain(args []string, stderr io.Writer) int {
	if len(args) != 1 {
		fmt.Fprintln(stderr, "usage: sbx __kill-group PIDFILE")
		return 2
	}
	helpers := runGroupHelpers(args[0])
	sweep := becomeSubreaper() != nil
	pgid, err := readGroup(args[0])
	if err != nil && len(helpers) == 0 {
		if errors.Is(err, os.ErrNotExist) {
			return 0 // already gone
		}
		fmt.Fprintf(stderr, "sbx: %v\n", err)
		return 1
	}
	// With a helper, the helper alone signals the group: were the group
	// to die first, the helper would take it for the agent's own exit and
	// leave before ending the rest of the tree.
	for _, h := range helpers {
		syscall.Kill(h, syscall.SIGTERM)
	}
	if len(helpers) == 0 && pgid > 1 {
		syscall.Kill(-pgid, syscall.SIGTERM)
	}
	alive := func() bool {
		for _, h := range helpers {
			if processAlive(h) {
				return true
			}
		}
		return pgid > 1 && GroupAlive(pgid)
	}
	// The helpers themselves go to SIGKILL after killGrace; the margin is
	// for that last round.
	deadline := time.Now().Add(killGrace + time.Second)
	for time.Now().Before(deadline) {
		if !alive() {
			return 0
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, h := range helpers {
		signalTree(h, 0, sweep, syscall.SIGKILL)
	}
	if pgid > 1 {
		syscall.Kill(-pgid, syscall.SIGKILL)
	}
	return 0
}

// readGroup reads the process group id in a pid file.
func readGroup(pidfile string) (int, error) {
	data, err := os.ReadFile(pidfile)
	if err != nil {
		return 0, err
	}
	pgid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil || pgid <= 1 {
		return 0, fmt.Errorf("%s: not a process group id", pidfile)
	}
	return pgid, nil
}

// procStat is what /proc/PID/stat says of a process (proc(5)).
type procStat struct {
	pid, ppid, pgrp int
	state           string
	start           uint64 // clock ticks after boot
}

// processes lists the processes in /proc (nil where there is no /proc).
func processes() []procStat {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var ps []procStat
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		data, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid pgrp ...; comm may hold spaces and parens.
		s := string(data)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		// f[0] is field 3 of proc(5)'s stat, state; starttime is field 22.
		if len(f) < 20 {
			continue
		}
		ppid, _ := strconv.Atoi(f[1])
		pgrp, _ := strconv.Atoi(f[2])
		start, _ := strconv.ParseUint(f[19], 10, 64)
		ps = append(ps, procStat{pid: pid, ppid: ppid, pgrp: pgrp, state: f[0], start: start})
	}
	return ps
}

// live reports whether the process has not exited (a zombie has; it only
// waits for its parent to reap it).
func (p procStat) live() bool { return p.state != "Z" && p.state != "X" }

// agentTree lists the live processes of the agent's tree: the
// descendants of root (the helper) and, with sweep (no subreaper, so
// orphans went to init), every child of the sandbox's init (pid 1, sbx's
// own, which starts no process of its own) that started after root, with
// its descendants.
func agentTree(root int, sweep bool) []int {
	ps := processes()
	roots := []int{root}
	if sweep {
		var since uint64
		found := false
		for _, p := range ps {
			if p.pid == root {
				since, found = p.start, true
			}
		}
		for _, p := range ps {
			if found && p.ppid == 1 && p.pid != root && p.start >= since {
				roots = append(roots, p.pid)
			}
		}
	}
	return below(ps, roots)
}

// below lists the live processes below roots in ps's tree, and the roots
// other than the first.
func below(ps []procStat, roots []int) []int {
	children := map[int][]procStat{}
	live := map[int]bool{}
	for _, p := range ps {
		children[p.ppid] = append(children[p.ppid], p)
		live[p.pid] = p.live()
	}
	var out []int
	seen := map[int]bool{}
	for i, r := range roots {
		seen[r] = true
		if i > 0 && live[r] {
			out = append(out, r)
		}
	}
	queue := append([]int(nil), roots...)
	for len(queue) > 0 {
		pid := queue[0]
		queue = queue[1:]
		for _, c := range children[pid] {
			if seen[c.pid] {
				continue
			}
			seen[c.pid] = true
			queue = append(queue, c.pid)
			if c.live() {
				out = append(out, c.pid)
			}
		}
	}
	return out
}

// processAlive reports whether pid is a live process.
func processAlive(pid int) bool {
	for _, p := range processes() {
		if p.pid == pid {
			return p.live()
		}
	}
	return false
}

// runGroupHelpers lists the live `__run-group PIDFILE` processes: their
// command line is the helper's own, which the agent cannot rewrite.
func runGroupHelpers(pidfile string) []int {
	var out []int
	for _, p := range processes() {
		if !p.live() {
			continue
		}
		data, err := os.ReadFile("/proc/" + strconv.Itoa(p.pid) + "/cmdline")
		if err != nil {
			continue
		}
		argv := bytes.Split(data, []byte{0})
		if len(argv) >= 3 && string(argv[1]) == "__run-group" && string(argv[2]) == pidfile {
			out = append(out, p.pid)
		}
	}
	return out
}

// GroupAlive reports whether a process group has a member that is not a
// zombie.
func GroupAlive(pgid int) bool {
	ps := processes()
	if ps == nil {
		return syscall.Kill(-pgid, 0) == nil
	}
	for _, p := range ps {
		if p.pgrp == pgid && p.live() {
			return true
		}
	}
	return false
}
