package main

import (
	"os"

	"golang.org/x/term"
)

// isTerminal reports whether a stream is a terminal (a console on
// Windows). /dev/null is a character device too, but not a terminal.
func isTerminal(w any) bool {
	f, ok := stream(w).(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}
