package agenttest

import "syscall"

// childAttr makes the kernel kill the child when this process dies, so a
// killed test leaves no debootstrap running.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
