package loop

import (
	"bytes"
	"io"
	"strings"
	"sync"

	"github.com/sbxhq/sbx/internal/untrusted"
)

// AgentMark begins every line of what an agent (or a verify command in its
// sandbox) printed, on the terminal, in the run's log and in the
// iteration's (an empty line is AgentMark without its space): sbx's own
// lines begin at the start of the line ("sbx loop: …", "[sbx: …]"), so no
// output of the agent's can pass for one of them.
const AgentMark = "| "

// agentLines writes what the agent printed to w as lines marked with
// AgentMark, each character a terminal could act on made visible
// (untrusted.Visible: OSC 52 clipboard writes, title changes, a carriage
// return that would overwrite the mark, bidirectional overrides). The
// redactor before it writes whole lines, but for a line longer than its
// buffer and the last one, which may come in parts.
type agentLines struct {
	mu sync.Mutex
	w  io.Writer
	// mid is set while a line is open: what comes next continues it.
	mid bool
}

func (a *agentLines) Write(p []byte) (int, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	var b []byte
	for rest := p; len(rest) > 0; {
		line, after, found := bytes.Cut(rest, []byte{'\n'})
		switch {
		case a.mid:
		case len(line) == 0:
			b = append(b, strings.TrimSpace(AgentMark)...)
		default:
			b = append(b, AgentMark...)
		}
		b = append(b, untrusted.Visible(string(line))...)
		if found {
			b = append(b, '\n')
		}
		a.mid, rest = !found, after
	}
	if _, err := a.w.Write(b); err != nil {
		return 0, err
	}
	return len(p), nil
}

// End ends a line the agent left open, so that what sbx prints next
// begins a line of its own.
func (a *agentLines) End() {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.mid {
		a.w.Write([]byte{'\n'})
		a.mid = false
	}
}

// agentOutput is where one stream of the agent goes: through the
// redactor, marked and made visible to the terminal and the logs, and as
// it is (redacted) to what the loop reads of it (the promise, the last
// error line).
type agentOutput struct {
	*redactor
	lines *agentLines
}

func newAgentOutput(shown io.Writer, read io.Writer, secrets []string) *agentOutput {
	lines := &agentLines{w: shown}
	return &agentOutput{redactor: newRedactor(io.MultiWriter(lines, read), secrets), lines: lines}
}

// Flush writes what the redactor holds and ends an open line.
func (o *agentOutput) Flush() {
	o.redactor.Flush()
	o.lines.End()
}
