package proc

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// Start is when process pid started (sysctl kern.proc.pid's
// p_starttime); "" when it cannot be read.
func Start(pid int) string {
	kp, err := unix.SysctlKinfoProc("kern.proc.pid", pid)
	if err != nil || int(kp.Proc.P_pid) != pid {
		return ""
	}
	t := kp.Proc.P_starttime
	return fmt.Sprintf("%d.%06d", t.Sec, t.Usec)
}
