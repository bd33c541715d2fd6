package loop

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/sbxhq/sbx/state"
)

// Control is one sandbox's loop directory in sbx's state directory
// (state.Dir.Loop, whose doc has its layout), outside the workspace the
// agent can write. A multi-agent run lives under its first sandbox; every
// sandbox of it points at it with latest.
type Control struct {
	Sandbox string
	Dir     state.LoopDir
}

// NewControl returns the control directory of a sandbox's loop.
func NewControl(stateDir state.Dir, sandbox string) *Control {
	return &Control{Sandbox: sandbox, Dir: stateDir.Loop(sandbox)}
}

// NoRunError says a sandbox has had no run (that this machine knows of).
type NoRunError struct{ Sandbox string }

func (e *NoRunError) Error() string {
	return fmt.Sprintf("no loop has run on sandbox %q", e.Sandbox)
}

// runRef is how latest names a run: its directory relative to loops/.
var runRef = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9.-]*/runs/[0-9]{8}T[0-9]{6}Z-[0-9a-f]{6}$`)

// Latest returns the sandbox's latest run, live or not (*NoRunError when
// it has had none).
func (c *Control) Latest() (*Status, error) {
	data, err := os.ReadFile(c.Dir.Latest())
	if errors.Is(err, fs.ErrNotExist) {
		return nil, &NoRunError{Sandbox: c.Sandbox}
	}
	if err != nil {
		return nil, err
	}
	ref := strings.TrimSpace(string(data))
	if !runRef.MatchString(ref) {
		return nil, fmt.Errorf("%s: not a run: %q", c.Dir.Latest(), ref)
	}
	return ReadRun(c.Dir.RunAt(ref))
}

// Live returns the sandbox's live run, or nil when none is.
func (c *Control) Live() (*Status, error) {
	s, err := c.Latest()
	var nr *NoRunError
	switch {
	case errors.As(err, &nr):
		return nil, nil
	case err != nil:
		return nil, err
	case !s.Live():
		return nil, nil
	}
	return s, nil
}

// RunID is the form of a run's id: when it began (UTC) and a random part.
var RunID = regexp.MustCompile(`^[0-9]{8}T[0-9]{6}Z-[0-9a-f]{6}$`)

// FindRun returns the run with the given id, whichever sandbox led it.
func FindRun(stateDir state.Dir, id string) (*Status, error) {
	if !RunID.MatchString(id) {
		return nil, fmt.Errorf("%q is not a run id (they look like 20260102T150405Z-1a2b3c)", id)
	}
	dirs, err := stateDir.RunsWithID(id)
	if err != nil {
		return nil, err
	}
	if len(dirs) != 1 {
		return nil, fmt.Errorf("no run %s in %s", id, stateDir.Loops())
	}
	return ReadRun(dirs[0])
}

// hintNext is the target of hints queued for a sandbox's next run.
const hintNext = "next"

// AddHint queues text for the sandbox's agent: for its next turn in the
// live run runID, or, with runID "", for the first turn of its next run.
func (c *Control) AddHint(runID, text string) error {
	if strings.TrimSpace(text) == "" {
		return errors.New("the hint is empty")
	}
	if runID == "" {
		runID = hintNext
	}
	name := fmt.Sprintf("%s.%020d-%s.txt", runID, time.Now().UnixNano(), randomID(4))
	return state.Write(c.Dir.Hint(name), []byte(text))
}

// hintFiles lists the queued hints, oldest first, with their targets.
func (c *Control) hintFiles() (names, targets []string, err error) {
	entries, err := os.ReadDir(c.Dir.Hints())
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	type hint struct{ name, target, stamp string }
	var hs []hint
	for _, e := range entries {
		target, stamp, ok := strings.Cut(e.Name(), ".")
		if ok && strings.HasSuffix(stamp, ".txt") && !strings.HasPrefix(e.Name(), ".") {
			hs = append(hs, hint{e.Name(), target, stamp})
		}
	}
	sort.Slice(hs, func(i, j int) bool { return hs[i].stamp < hs[j].stamp })
	for _, h := range hs {
		names, targets = append(names, h.name), append(targets, h.target)
	}
	return names, targets, nil
}

// takeHints removes and returns, oldest first, the hints for run runID:
// those queued for it and those queued for the sandbox's next run.
func (c *Control) takeHints(runID string) ([]string, error) {
	names, targets, err := c.hintFiles()
	if err != nil {
		return nil, err
	}
	var hints []string
	for i, n := range names {
		if targets[i] != runID && targets[i] != hintNext {
			continue
		}
		p := c.Dir.Hint(n)
		data, err := os.ReadFile(p)
		if err != nil {
			return hints, err
		}
		if err := os.Remove(p); err != nil {
			return hints, err
		}
		hints = append(hints, string(data))
	}
	return hints, nil
}

// dropHints removes the hints whose target drop says, and counts them.
func (c *Control) dropHints(drop func(target string) bool) (int, error) {
	names, targets, err := c.hintFiles()
	if err != nil {
		return 0, err
	}
	n := 0
	for i, name := range names {
		if drop(targets[i]) {
			if err := os.Remove(c.Dir.Hint(name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return n, err
			}
			n++
		}
	}
	return n, nil
}

// ClearHints forgets every hint queued for the sandbox (sbx destroy: a
// hint for an agent of a sandbox that is gone must not reach a later
// one).
func (c *Control) ClearHints() error {
	err := os.RemoveAll(c.Dir.Hints())
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}

// NotRunningError says a sandbox has no live run.
type NotRunningError struct {
	Sandbox string
	// Last is the sandbox's latest run, nil when it has had none.
	Last *Status
}

func (e *NotRunningError) Error() string {
	msg := fmt.Sprintf("no loop is running on sandbox %q", e.Sandbox)
	if e.Last != nil {
		msg += fmt.Sprintf(" (the last run, %s, ended: %s)", e.Last.RunID, e.Last.State)
	}
	return msg
}

// Stop asks the sandbox's live run to stop (the stop file in its run
// directory, which the run watches: a file, not a signal, so that it
// works on every OS and for a run in the background). The run kills its
// agent inside the sandbox and records its end; Stop waits up to wait
// for that.
func (c *Control) Stop(wait time.Duration) (*Status, error) {
	s, err := c.Latest()
	var nr *NoRunError
	switch {
	case errors.As(err, &nr):
		return nil, &NotRunningError{Sandbox: c.Sandbox}
	case err != nil:
		return nil, err
	case !s.Live():
		return s, &NotRunningError{Sandbox: c.Sandbox, Last: s}
	}
	if err := state.Write(state.RunDir(s.RunDir).Stop(), []byte(s.RunID+"\n")); err != nil {
		return s, fmt.Errorf("ask the loop to stop: %v", err)
	}
	deadline := time.Now().Add(wait)
	for time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
		if s2, err := ReadRun(state.RunDir(s.RunDir)); err == nil && s2.State != StateRunning {
			return s2, nil
		}
	}
	return s, fmt.Errorf("the loop (pid %d) did not stop within %s", s.PID, wait)
}

// Reap ends what the sandbox's latest run left behind when its process
// died: holding the sandbox's run lock (so that no run starts meanwhile),
// it calls kill for each agent the run left running in the sandbox, then
// records the run as interrupted. With nothing to reap it returns a
// *NotRunningError (or a *BusyError when a run is live: stop that one).
func (c *Control) Reap(kill func(Orphan) error) (*Status, []Orphan, error) {
	l, err := c.Dir.AcquireRunLock(context.Background(), state.LockOptions{Command: "sbx loop stop"})
	var le *state.LockedError
	if errors.As(err, &le) {
		live, _ := c.Live()
		return nil, nil, &BusyError{Sandbox: c.Sandbox, Run: live, Holder: le.Holder}
	}
	if err != nil {
		return nil, nil, err
	}
	defer l.Release()
	orphans := c.orphans()
	prev, err := c.Latest()
	var nr *NoRunError
	switch {
	case errors.As(err, &nr):
		return nil, nil, &NotRunningError{Sandbox: c.Sandbox}
	case err != nil:
		return nil, nil, err
	case len(orphans) == 0:
		return prev, nil, &NotRunningError{Sandbox: c.Sandbox, Last: prev}
	}
	for _, o := range orphans {
		if err := kill(o); err != nil {
			return prev, nil, fmt.Errorf("killing the agent run %s left running in sandbox %q: %v", o.RunID, o.Sandbox, err)
		}
	}
	prev.State, prev.ExitCode, prev.Phase = StateInterrupted, ExitInterrupted, PhaseFinished
	prev.Detail = "its sbx process died while its agent ran; sbx loop stop killed the agent"
	prev.AgentPidfile, prev.Orphans, prev.IterationStarted, prev.PauseUntil = "", nil, nil, nil
	prev.Updated = time.Now()
	if err := state.WriteJSON(state.RunDir(prev.RunDir).Status(), prev); err != nil {
		return prev, orphans, err
	}
	return prev, orphans, nil
}

func randomID(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}
