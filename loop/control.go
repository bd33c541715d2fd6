package loop

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// Control is the loop's directory under sbx's state directory, outside the
// workspace the agent can write:
//
//	loops/SANDBOX/status.json     the current or last run (sbx loop status)
//	loops/SANDBOX/stop            the id of a run asked to stop (sbx loop stop)
//	loops/SANDBOX/hints/*.txt     hints waiting for the next iteration
//	loops/SANDBOX/runs/RUN/       per-iteration logs and records.jsonl
type Control struct {
	Dir string
}

// NewControl returns the control directory of a sandbox's loop.
func NewControl(stateDir, sandbox string) *Control {
	return &Control{Dir: filepath.Join(stateDir, "loops", sandbox)}
}

// Status is what `sbx loop status` reports.
type Status struct {
	RunID         string    `json:"run_id"`
	Sandbox       string    `json:"sandbox"`
	PID           int       `json:"pid"`
	State         string    `json:"state"` // running, or the stop reason
	ExitCode      int       `json:"exit_code"`
	Detail        string    `json:"detail,omitempty"`
	Started       time.Time `json:"started"`
	Updated       time.Time `json:"updated"`
	ElapsedMS     int64     `json:"elapsed_ms"`
	Iteration     int       `json:"iteration"`
	MaxIterations int       `json:"max_iterations"`
	// LastOutcome is the last finished iteration's record.
	LastOutcome *Record `json:"last_outcome,omitempty"`
	Breaker     Breaker `json:"breaker"`
	// Completion is the state of the completion checks.
	Completion CompletionState `json:"completion"`
	// Denials counts the network requests egress denied in each iteration
	// (docker driver only; empty elsewhere).
	Denials []int  `json:"denials_per_iteration"`
	RunDir  string `json:"run_dir"`
}

// CompletionState says what the loop waits for and what it has seen.
type CompletionState struct {
	Promise      string `json:"promise,omitempty"`
	PromiseSeen  bool   `json:"promise_seen"`
	Verify       int    `json:"verify_commands"`
	VerifyPassed bool   `json:"verify_passed"`
	Complete     bool   `json:"complete"`
}

func (c *Control) statusPath() string { return filepath.Join(c.Dir, "status.json") }

// WriteStatus replaces status.json atomically.
func (c *Control) WriteStatus(s *Status) error {
	if err := os.MkdirAll(c.Dir, 0o700); err != nil {
		return err
	}
	s.Updated = time.Now()
	s.ElapsedMS = s.Updated.Sub(s.Started).Milliseconds()
	return writeAtomic(c.statusPath(), s)
}

// ReadStatus reads the current or last run's status; for a running loop
// whose process is gone it reports the state as "vanished".
func (c *Control) ReadStatus() (*Status, error) {
	data, err := os.ReadFile(c.statusPath())
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("no loop has run for this sandbox (nothing in %s)", c.Dir)
	}
	if err != nil {
		return nil, err
	}
	var s Status
	if err := json.Unmarshal(data, &s); err != nil {
		return nil, fmt.Errorf("%s: %v", c.statusPath(), err)
	}
	if s.State == StateRunning {
		if !alive(s.PID) {
			s.State, s.Detail = "vanished", "the loop's process is gone without recording how it ended"
		} else {
			s.ElapsedMS = time.Since(s.Started).Milliseconds()
		}
	}
	return &s, nil
}

func (c *Control) stopPath() string { return filepath.Join(c.Dir, "stop") }

// stopRequested reports whether run runID was asked to stop.
func (c *Control) stopRequested(runID string) bool {
	data, err := os.ReadFile(c.stopPath())
	return err == nil && strings.TrimSpace(string(data)) == runID
}

// watchStop cancels a run when it is asked to stop, checking every poll
// until ctx ends. A file, not a signal, so that it works on every OS and
// for a run in the background.
func (c *Control) watchStop(ctx context.Context, runID string, poll time.Duration, cancel context.CancelFunc) {
	t := time.NewTicker(poll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if c.stopRequested(runID) {
				cancel()
				return
			}
		}
	}
}

// AddHint queues text for the next iteration's prompt.
func (c *Control) AddHint(text string) error {
	if strings.TrimSpace(text) == "" {
		return errors.New("the hint is empty")
	}
	dir := filepath.Join(c.Dir, "hints")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	name := fmt.Sprintf("%020d-%s.txt", time.Now().UnixNano(), randomID(4))
	tmp := filepath.Join(dir, "."+name)
	if err := os.WriteFile(tmp, []byte(text), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(dir, name))
}

// TakeHints returns the queued hints, oldest first, and removes them.
func (c *Control) TakeHints() ([]string, error) {
	dir := filepath.Join(c.Dir, "hints")
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".txt") && !strings.HasPrefix(e.Name(), ".") {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	var hints []string
	for _, n := range names {
		p := filepath.Join(dir, n)
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

// Stop asks the running loop to stop (the stop file, which the run watches):
// it kills the agent inside the sandbox and exits. Stop waits up to wait
// for the loop to record that it stopped.
func (c *Control) Stop(wait time.Duration) (*Status, error) {
	s, err := c.ReadStatus()
	if err != nil {
		return nil, err
	}
	if s.State != StateRunning {
		return s, fmt.Errorf("no loop is running for sandbox %q (the last run %s ended: %s)", s.Sandbox, s.RunID, s.State)
	}
	if err := writeFileAtomic(c.stopPath(), []byte(s.RunID+"\n")); err != nil {
		return s, fmt.Errorf("ask the loop to stop: %v", err)
	}
	deadline := time.Now().Add(wait)
	for time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
		if s2, err := c.ReadStatus(); err == nil && s2.State != StateRunning {
			return s2, nil
		}
	}
	return s, fmt.Errorf("the loop (pid %d) did not stop within %s", s.PID, wait)
}

func writeAtomic(path string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return writeFileAtomic(path, append(data, '\n'))
}

func writeFileAtomic(path string, data []byte) error {
	tmp := path + ".tmp-" + randomID(4)
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

func randomID(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}
