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

	"github.com/sbxhq/sbx/driver"
	"github.com/sbxhq/sbx/internal/gitdir"
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

// maxCountAnswer bounds the answer of `git rev-list --count`: a number.
const maxCountAnswer = 32

// ProgressMain is `sbx __progress snapshot DIR` (a Scanner's snapshot of
// DIR, encoded as DecodeSnapshot reads it), run inside the sandbox by
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
	}
	fmt.Fprintf(stderr, "usage: sbx %s snapshot DIR\n", ProgressVerb)
	return 2
}

// SandboxProgress measures the workspace inside the sandbox, for backends
// whose sandboxes work on their own copy of it (driver.Puller) and hold
// sbx's static binary (driver.Helper): the Scanner runs there, through
// Exec, as ProgressVerb, and the host decodes its answer. The answer comes
// from where the agent runs, so it is read within bounds (DecodeSnapshot,
// remoteMeasure) and becomes no more than a Snapshot to compare.
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

// run runs the binary's ProgressVerb with args in the sandbox (measure).
func (p *SandboxProgress) run(ctx context.Context, args []string, read func(io.Reader) error) error {
	argv := append([]string{p.Binary, ProgressVerb}, args...)
	return measure(ctx, p.Exec, p.Timeout, argv, "", "sbx "+ProgressVerb, "measuring the workspace inside the sandbox", read)
}

// CountCommits counts the commits HEAD gained inside the sandbox, from
// before to after (git rev-list --count before..after; every ancestor of
// after when before is ""), with the sandbox's own git, as the agent's
// user, in dir. The host reads no object of the agent's repository and
// runs no git on it: the sandbox's git, whatever the agent made of it,
// can only answer, and its answer is read as one bounded number.
// timeout bounds it (0: five minutes). A sandbox without git cannot
// count (an error).
func CountCommits(ctx context.Context, sb Sandbox, dir, before, after string, timeout time.Duration) (int, error) {
	if after == "" || before == after {
		return 0, nil
	}
	if !gitdir.IsObjectName(after) || before != "" && !gitdir.IsObjectName(before) {
		return 0, fmt.Errorf("counting commits from %q to %q: not object names", before, after)
	}
	rng := after
	if before != "" {
		rng = before + ".." + after
	}
	argv := []string{"git", "-c", "safe.directory=*", "rev-list", "--count", rng}
	var n int
	err := measure(ctx, sb, timeout, argv, dir, "git", "counting commits inside the sandbox", func(r io.Reader) error {
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

// measure runs argv in the sandbox, in dir ("": where the sandbox's
// commands start), and hands its standard output to read
// as it comes, within timeout (0: remoteMeasure). When read fails on what
// it got (a malformed or oversized answer) the command is stopped rather
// than read to its end; when the command failed instead, its exit status
// and the end of its standard error say why, naming the command as name.
// what starts every error.
func measure(ctx context.Context, sb Sandbox, timeout time.Duration, argv []string, dir, name, what string, read func(io.Reader) error) error {
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
	go func() {
		code, err := sb.Exec(ctx, argv, driver.ExecOptions{Workdir: dir, Stdout: pw, Stderr: stderr})
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
		return fmt.Errorf("%s: %s exited %d: %s", what, name, res.code, untrusted.Text(strings.TrimSpace(stderr.String())))
	}
	return fmt.Errorf("%s: %w", what, readErr)
}
