package loop

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/sbxhq/sbx/driver/cliutil"
	"github.com/sbxhq/sbx/internal/untrusted"
)

// ProgressVerb is the hidden verb of sbx's static binary that measures a
// workspace inside a sandbox (ProgressMain), for SandboxProgress.
const ProgressVerb = "__progress"

// remoteMeasure is how long a measurement inside the sandbox may take by
// default: within the Scanner's own bounds (MaxEntries paths, 1 GiB
// hashed) any machine takes far less, so a measurement still running
// then is stuck, or held up by the agent.
const remoteMeasure = 5 * time.Minute

// maxCountAnswer bounds the answer of `sbx __progress commits`: a number.
const maxCountAnswer = 32

// ProgressMain is `sbx __progress snapshot DIR` (a Scanner's snapshot of
// DIR, encoded as DecodeSnapshot reads it) and `sbx __progress commits
// DIR OLD NEW` (Commits' count), run inside the sandbox by
// SandboxProgress: the same measurement as on the host, where the agent's
// copy of the workspace is.
func ProgressMain(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fail := func(err error) int {
		fmt.Fprintf(stderr, "sbx %s: %v\n", ProgressVerb, err)
		return 1
	}
	switch {
	case len(args) == 2 && args[0] == "snapshot":
		s, err := NewScanner(args[1]).Snapshot(ctx)
		if err != nil {
			return fail(err)
		}
		if err := s.Encode(stdout); err != nil {
			return fail(err)
		}
		return 0
	case len(args) == 4 && args[0] == "commits":
		n, err := Commits(ctx, args[1], args[2], args[3])
		if err != nil {
			return fail(err)
		}
		fmt.Fprintln(stdout, n)
		return 0
	}
	fmt.Fprintf(stderr, "usage: sbx %s snapshot DIR | commits DIR OLD NEW\n", ProgressVerb)
	return 2
}

// SandboxProgress measures the workspace inside the sandbox, for backends
// whose sandboxes work on their own copy of it (driver.Puller) and hold
// sbx's static binary (driver.Helper): the Scanner runs there, through
// Exec, as ProgressVerb, and the host decodes its answer. The answer comes
// from where the agent runs, so it is read within bounds (DecodeSnapshot,
// maxCountAnswer, remoteMeasure) and becomes no more than a Snapshot to
// compare and a count.
type SandboxProgress struct {
	// Exec runs a command in the sandbox (as the agent's user: the
	// Scanner reads no more than the agent can).
	Exec Sandbox
	// Binary is sbx's static binary inside the sandbox.
	Binary string
	// Dir is the workspace inside the sandbox.
	Dir string
	// Timeout bounds each measurement (0: five minutes).
	Timeout time.Duration
}

// Snapshot takes a snapshot of the workspace inside the sandbox.
func (p *SandboxProgress) Snapshot(ctx context.Context) (Snapshot, error) {
	var s Snapshot
	err := p.run(ctx, []string{"snapshot", p.Dir}, func(r io.Reader) error {
		var err error
		s, err = DecodeSnapshot(r)
		return err
	})
	return s, err
}

// Commits counts the commits between two HEADs inside the sandbox.
func (p *SandboxProgress) Commits(ctx context.Context, before, after string) (int, error) {
	if after == "" || before == after {
		return 0, nil
	}
	var n int
	err := p.run(ctx, []string{"commits", p.Dir, before, after}, func(r io.Reader) error {
		answer, err := io.ReadAll(io.LimitReader(r, maxCountAnswer+1))
		if err != nil {
			return err
		}
		if len(answer) <= maxCountAnswer && !strings.HasSuffix(string(answer), "\n") {
			return io.ErrUnexpectedEOF // the command's end says why
		}
		text := strings.TrimSuffix(string(answer), "\n")
		if n, err = strconv.Atoi(text); err != nil || n < 0 || len(answer) > maxCountAnswer {
			return fmt.Errorf("not a count: %s", quoteStart(answer))
		}
		return nil
	})
	return n, err
}

// run runs the binary's ProgressVerb with args in the sandbox and hands
// its standard output to read as it comes. When read fails on what it
// got (a malformed or oversized answer) the command is stopped rather
// than read to its end; when the command failed instead, its exit status
// and the end of its standard error say why.
func (p *SandboxProgress) run(ctx context.Context, args []string, read func(io.Reader) error) error {
	timeout := p.Timeout
	if timeout <= 0 {
		timeout = remoteMeasure
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	pr, pw := io.Pipe()
	stderr := &tail{max: 1 << 10}
	type result struct {
		code int
		err  error
	}
	done := make(chan result, 1)
	argv := append([]string{p.Binary, ProgressVerb}, args...)
	go func() {
		code, err := p.Exec.Exec(ctx, argv, cliutil.ExecOptions{Stdout: pw, Stderr: stderr})
		pw.Close()
		done <- result{code, err}
	}()
	readErr := read(bufio.NewReader(pr))
	if readErr != nil {
		// Whatever else the command writes is not read: it is stopped.
		cancel()
	}
	pr.CloseWithError(errors.New("the answer was read"))
	res := <-done
	const what = "measuring the workspace inside the sandbox"
	switch {
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return fmt.Errorf("%s: no answer within %s", what, timeout)
	case readErr == nil && res.err == nil && res.code == 0:
		return nil
	case readErr != nil && !errors.Is(readErr, io.ErrUnexpectedEOF):
		// What came was wrong, not cut short by the command's end.
		return fmt.Errorf("%s: %w", what, readErr)
	case res.err != nil:
		return fmt.Errorf("%s: %v", what, res.err)
	case res.code != 0:
		return fmt.Errorf("%s: sbx %s exited %d: %s", what, ProgressVerb, res.code, untrusted.Text(strings.TrimSpace(stderr.String())))
	}
	return fmt.Errorf("%s: %w", what, readErr)
}
