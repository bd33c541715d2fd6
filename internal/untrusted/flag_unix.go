//go:build unix

package untrusted

import "syscall"

// nonblock makes opening a FIFO return at once instead of waiting for a
// writer (open(2): O_NONBLOCK); reads of regular files ignore it.
const nonblock = syscall.O_NONBLOCK
