//go:build !linux

package agenttest

import "syscall"

// childAttr is nil where there is no parent-death signal; the template is
// built only on Linux (debootstrap).
func childAttr() *syscall.SysProcAttr { return nil }
