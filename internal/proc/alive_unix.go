//go:build unix

package proc

import "syscall"

// alive reports whether a process exists.
func alive(pid int) bool {
	return pid > 0 && syscall.Kill(pid, 0) == nil
}
