// Package proc tells a live process from one that is gone, by its pid
// and its start time, so that a pid the system gave to a later process is
// not taken for the one that recorded it (a loop run's status, a test
// run's cluster namespace).
package proc

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
