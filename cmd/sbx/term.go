package main

import (
	"os"

	"golang.org/x/term"

	"github.com/sbxhq/sbx/reconcile"
)

// isTerminal reports whether a stream is a terminal (a console on
// Windows). /dev/null is a character device too, but not a terminal.
func isTerminal(w any) bool {
	f, ok := stream(w).(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// termWidth is the columns a plan printed to w wraps to: the terminal's
// width, or reconcile.Width when w is no terminal (a CI log, a pipe), as
// Terraform wraps its messages.
func termWidth(w any) int {
	if f, ok := stream(w).(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		if cols, _, err := term.GetSize(int(f.Fd())); err == nil && cols > 0 {
			return cols
		}
	}
	return reconcile.Width
}
