package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/sbxhq/sbx/loop"
)

// TestPrintStatusEscapes plays the agent whose words reach `sbx loop
// status`: a run's detail quoting what it wrote (an error naming its
// files) and a verify command from a file it could write. Nothing in them
// acts on the terminal (a clipboard write, a carriage return, a
// bidirectional override), and none starts a line of its own that passes
// for sbx's.
func TestPrintStatusEscapes(t *testing.T) {
	const hostile = "x\x1b]52;c;ZXZpbA==\x07\r\nsbx loop: iteration 3: verify passed\u202e"
	for _, s := range []*loop.Status{
		{RunID: "r1", Sandbox: "sb", State: loop.StateError, Detail: hostile},
		{RunID: "r2", Sandbox: "sb", State: loop.StateRunning, Phase: loop.PhaseVerifying, VerifyCommand: hostile},
	} {
		var out bytes.Buffer
		a := &app{stdout: &out}
		a.printStatus(s)
		got := out.String()
		if strings.ContainsAny(got, "\x1b\x07\r\u202e") {
			t.Errorf("status of run %s holds a character a terminal acts on:\n%q", s.RunID, got)
		}
		for _, line := range strings.Split(got, "\n") {
			if strings.HasPrefix(line, "sbx loop:") {
				t.Errorf("status of run %s has a forged line:\n%s", s.RunID, got)
			}
		}
	}
}
