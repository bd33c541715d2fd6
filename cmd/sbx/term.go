package main

import (
	"os"
	"strconv"
	"strings"

	"golang.org/x/term"
)

// isTerminal reports whether a stream is a terminal (a console on
// Windows). /dev/null is a character device too, but not a terminal.
func isTerminal(w any) bool {
	f, ok := stream(w).(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// termWidth is the columns a plan printed to w wraps to: $COLUMNS when
// it is set (POSIX's preferred width of the output), else the terminal's
// width; 0, no wrapping, for a pipe, a file or a CI log, whose viewer
// wraps (as Terraform's plans and docker's tables are not wrapped there):
// each change and each widening with its file:line stays one line that
// grep and an annotation can take whole.
func (a *app) termWidth(w any) int {
	if v, ok := a.lookupEnv("COLUMNS"); ok {
		if n, err := strconv.Atoi(strings.TrimSpace(v)); err == nil && n > 0 {
			return n
		}
	}
	if f, ok := stream(w).(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		if cols, _, err := term.GetSize(int(f.Fd())); err == nil && cols > 0 {
			return cols
		}
	}
	return 0
}
