package loop

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"time"

	"github.com/sbxhq/sbx/internal/proc"
	"github.com/sbxhq/sbx/state"
)

// StatusFormat is the version of a run's status.json and of `sbx loop
// status --json` (docs/loop-status-json.md): fields may be added within a
// version, never removed or changed in meaning.
const StatusFormat = "1"

// Phases of a run: what it is doing now (Status.Phase).
const (
	// PhaseConverging: planning and applying the sandboxes' files.
	PhaseConverging = "converging"
	// PhaseCheckpointing: the Checkpointer runs.
	PhaseCheckpointing = "checkpointing"
	// PhaseAgent: iteration Status.Iteration runs its agent, then
	// measures what it did.
	PhaseAgent = "agent"
	// PhaseVerifying: a completion.verify command runs
	// (Status.VerifyCommand).
	PhaseVerifying = "verifying"
	// PhasePausing: loop.backoff's pause after a failing iteration
	// (Status.PauseUntil).
	PhasePausing = "pausing"
	// PhasePulling: the run has ended and the sandboxes' copies of the
	// workspace are copied home (Agent.Pull).
	PhasePulling = "pulling"
	// PhaseFinished: the run ended (Status.State says how).
	PhaseFinished = "finished"
)

// StateVanished is how a run reads whose process is gone without having
// recorded its end (killed, or its machine restarted).
const StateVanished = "vanished"

// Status is a run as `sbx loop status` reports it, from the first instant
// of the run to its end. It is written to the run's status.json at every
// change of phase and read by other sbx processes.
type Status struct {
	FormatVersion string `json:"format_version"`
	RunID         string `json:"run_id"`
	// Sandbox is the run's first sandbox (the only one but in a
	// multi-agent run), whose files set the run's bounds.
	Sandbox string `json:"sandbox"`
	// Sandboxes are the run's sandboxes in turn order.
	Sandboxes []RunSandbox `json:"sandboxes"`
	// PID is the process running the loop, PIDStart when it started (an
	// opaque token, "" where unknown): together they tell a live run
	// from one whose process died and whose pid was given to another.
	PID      int    `json:"pid"`
	PIDStart string `json:"pid_start,omitempty"`
	Detached bool   `json:"detached"`
	// State is "running" until the run ends, then how it ended.
	State    string    `json:"state"`
	Phase    string    `json:"phase"`
	ExitCode int       `json:"exit_code"`
	Detail   string    `json:"detail,omitempty"`
	Started  time.Time `json:"started"`
	Updated  time.Time `json:"updated"`
	// ElapsedMS is the run's age when Updated (and, for a live run,
	// when read).
	ElapsedMS int64 `json:"elapsed_ms"`
	// Iteration is the iteration running (phases agent, verifying and
	// checkpointing before it), else the number finished.
	Iteration        int        `json:"iteration"`
	IterationSandbox string     `json:"iteration_sandbox,omitempty"`
	IterationStarted *time.Time `json:"iteration_started,omitempty"`
	// VerifyCommand is the completion.verify command running.
	VerifyCommand string `json:"verify_command,omitempty"`
	// AgentPidfile is, while an agent runs, its process group's pid file
	// inside IterationSandbox: what kills it if this run's process dies.
	AgentPidfile string `json:"agent_pidfile,omitempty"`
	// PauseUntil is when loop.backoff's pause ends (phase pausing).
	PauseUntil *time.Time `json:"pause_until,omitempty"`
	// Orphans are agents that runs whose process died left running in
	// this run's sandboxes, killed before its first iteration.
	Orphans       []Orphan `json:"orphans,omitempty"`
	MaxIterations int      `json:"max_iterations"`
	// LastOutcome is the last finished iteration's record.
	LastOutcome *Record `json:"last_outcome,omitempty"`
	Breaker     Breaker `json:"breaker"`
	// Completion is the state of the completion checks.
	Completion CompletionState `json:"completion"`
	// Denials counts the network requests egress denied in each finished
	// iteration, on drivers that log them; empty elsewhere.
	Denials []int `json:"denials_per_iteration"`
	// UpstreamErrors counts the requests that failed upstream in each
	// finished iteration, on the same drivers.
	UpstreamErrors []int  `json:"upstream_errors_per_iteration"`
	RunDir         string `json:"run_dir"`
	// Log is everything the run printed (sbx loop logs).
	Log string `json:"log"`
	// Records are the finished iterations (records.jsonl), filled by
	// ReadRecords for `sbx loop status --json`; never in status.json.
	Records []Record `json:"records,omitempty"`
}

// RunSandbox is one sandbox of a run.
type RunSandbox struct {
	Name  string `json:"name"`
	Agent string `json:"agent"`
	File  string `json:"file"`
}

// CompletionState says what the loop waits for and what it has seen.
type CompletionState struct {
	Promise      string `json:"promise,omitempty"`
	PromiseSeen  bool   `json:"promise_seen"`
	Verify       int    `json:"verify_commands"`
	VerifyPassed bool   `json:"verify_passed"`
	Complete     bool   `json:"complete"`
}

// Live reports whether the run is still going: it says it is running and
// the process that said so is still there.
func (s *Status) Live() bool {
	return s.State == StateRunning && proc.Running(s.PID, s.PIDStart)
}

// ReadRun reads the status of the run in runDir. A run that says it is
// running but whose process is gone reads as vanished.
func ReadRun(runDir state.RunDir) (*Status, error) {
	path := runDir.Status()
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var s Status
	if err := json.Unmarshal(data, &s); err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	if s.FormatVersion != StatusFormat {
		return nil, fmt.Errorf("%s: status format %q, this sbx reads %q", path, s.FormatVersion, StatusFormat)
	}
	switch {
	case s.State != StateRunning:
	case !proc.Running(s.PID, s.PIDStart):
		s.State, s.ExitCode = StateVanished, ExitError
		s.Detail = fmt.Sprintf("the run's process (pid %d) is gone without recording how the run ended", s.PID)
	default:
		s.ElapsedMS = time.Since(s.Started).Milliseconds()
	}
	return &s, nil
}

// Report is a Status as `sbx loop status --json` prints it: with records,
// [] before the first iteration ends (docs/loop-status-json.md), where
// status.json has none.
type Report struct {
	*Status
	Records []Record `json:"records"`
}

// Report reads the run's records (ReadRecords) into a Report.
func (s *Status) Report() (Report, error) {
	if err := s.ReadRecords(); err != nil {
		return Report{}, err
	}
	return Report{Status: s, Records: s.Records}, nil
}

// ReadRecords fills s.Records from the run's records.jsonl.
func (s *Status) ReadRecords() error {
	f, err := os.Open(state.RunDir(s.RunDir).Records())
	if errors.Is(err, fs.ErrNotExist) {
		s.Records = []Record{}
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	s.Records = []Record{}
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		var r Record
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			return fmt.Errorf("%s: %v", f.Name(), err)
		}
		s.Records = append(s.Records, r)
	}
	return sc.Err()
}
