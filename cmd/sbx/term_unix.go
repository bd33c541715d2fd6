//go:build unix

package main

import (
	"os"

	"golang.org/x/sys/unix"
)

// isTerminal reports whether a stream is a terminal: a file whose
// terminal attributes can be read. /dev/null is a character device too,
// but not a terminal.
func isTerminal(w any) bool {
	f, ok := stream(w).(*os.File)
	if !ok {
		return false
	}
	_, err := unix.IoctlGetTermios(int(f.Fd()), ioctlReadTermios)
	return err == nil
}
