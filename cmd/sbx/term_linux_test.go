package main

import (
	"fmt"
	"os"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/sbxhq/sbx/reconcile"
)

// TestIsTerminal: /dev/null and a pipe are not terminals (sbx shell must
// not ask docker for a TTY, apply must not prompt); a pseudo-terminal is.
func TestIsTerminal(t *testing.T) {
	null, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	if isTerminal(null) {
		t.Error("/dev/null is taken for a terminal")
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	if isTerminal(r) || isTerminal(w) {
		t.Error("a pipe is taken for a terminal")
	}
	if isTerminal(&struct{}{}) {
		t.Error("a stream that is not a file is taken for a terminal")
	}

	ptmx, err := os.OpenFile("/dev/ptmx", os.O_RDWR, 0)
	if err != nil {
		t.Fatalf("no pseudo-terminals here: %v", err)
	}
	defer ptmx.Close()
	if err := unix.IoctlSetPointerInt(int(ptmx.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(int(ptmx.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	pts, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer pts.Close()
	if !isTerminal(pts) {
		t.Error("a pseudo-terminal is not taken for a terminal")
	}

	// A plan wraps to the terminal's width, and to reconcile.Width
	// elsewhere.
	if err := unix.IoctlSetWinsize(int(ptmx.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Row: 40, Col: 132}); err != nil {
		t.Fatal(err)
	}
	if got := termWidth(pts); got != 132 {
		t.Errorf("termWidth of a 132-column terminal = %d", got)
	}
	if got := termWidth(w); got != reconcile.Width {
		t.Errorf("termWidth of a pipe = %d, want %d", got, reconcile.Width)
	}
}
