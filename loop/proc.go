package loop

// running reports whether the process that wrote a status is still there:
// pid exists and, where the system says when a process started, started
// when it did then, so a later process given the same pid is not taken
// for it.
func running(pid int, start string) bool {
	if !alive(pid) {
		return false
	}
	if start == "" {
		return true
	}
	now := procStart(pid)
	return now == "" || now == start
}
