package loop

import (
	"bytes"
	"strings"
	"testing"
)

// TestOutputBounds: an agent that prints without end costs the host a
// bounded log and a bounded buffer, and the promise at the end of its
// output is still seen.
func TestOutputBounds(t *testing.T) {
	var log bytes.Buffer
	c := &capped{w: &log, max: 1 << 20}
	tl := &tail{max: 64 << 10}
	chunk := []byte(strings.Repeat("x", 4000) + "\n")
	for i := 0; i < 1000; i++ {
		c.Write(chunk)
		tl.Write(chunk)
	}
	tl.Write([]byte("<promise>DONE</promise>\n"))
	if log.Len() > 1<<20+200 || !strings.Contains(log.String(), "[sbx: the log stops here") {
		t.Errorf("log is %d bytes, or lacks the note", log.Len())
	}
	if strings.Count(log.String(), "the log stops here") != 1 {
		t.Error("the note is written more than once")
	}
	if got := tl.String(); len(got) > 64<<10 || !PromiseSeen(got, "DONE") {
		t.Errorf("tail is %d bytes; promise seen: %v", len(got), PromiseSeen(got, "DONE"))
	}
}
