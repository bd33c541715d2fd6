package main

import (
	"fmt"
	"os"
	"testing"

	"golang.org/x/sys/unix"
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

	// A plan wraps to $COLUMNS, else to the terminal's width, and not at
	// all elsewhere (0).
	if err := unix.IoctlSetWinsize(int(ptmx.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Row: 40, Col: 132}); err != nil {
		t.Fatal(err)
	}
	a := &app{env: []string{"PATH=/usr/bin"}}
	if got := a.termWidth(pts); got != 132 {
		t.Errorf("termWidth of a 132-column terminal = %d", got)
	}
	if got := a.termWidth(w); got != 0 {
		t.Errorf("termWidth of a pipe = %d, want 0 (no wrapping)", got)
	}
	for _, tc := range []struct {
		columns string
		want    int
	}{{"80", 80}, {" 90 ", 90}, {"0", 0}, {"-5", 0}, {"wide", 0}} {
		a := &app{env: []string{"PATH=/usr/bin", "COLUMNS=" + tc.columns}}
		if got := a.termWidth(w); got != tc.want {
			t.Errorf("termWidth of a pipe with COLUMNS=%q = %d, want %d", tc.columns, got, tc.want)
		}
	}
	a = &app{env: []string{"PATH=/usr/bin", "COLUMNS=70"}}
	if got := a.termWidth(pts); got != 70 {
		t.Errorf("termWidth of a terminal with COLUMNS=70 = %d, want 70", got)
	}
}
