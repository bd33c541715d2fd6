package loop

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"sync"
	"time"

	"github.com/sbxhq/sbx/internal/proc"
	"github.com/sbxhq/sbx/state"
)

// Run is one run of the loop from its first instant: it holds each of its
// sandboxes' run lock, so that no second run starts on them, and keeps
// its status.json true from converging to the end. Begin makes one; the
// loop itself is Run.Loop.
type Run struct {
	ID  string
	Dir state.RunDir

	controls []*Control // the run's sandboxes, in turn order
	locks    []*state.Lock
	log      *os.File

	mu        sync.Mutex
	status    Status
	ended     bool // status.json records the end
	handedOff bool // a detached process carries on the run
}

// BusyError says a sandbox already has a live run: a second one is
// refused at once, never queued behind the first.
type BusyError struct {
	Sandbox string
	// Run is the live run's status; nil when it is starting and has
	// written none yet (Holder says who holds the lock).
	Run    *Status
	Holder string
}

func (e *BusyError) Error() string {
	who := e.Holder
	if e.Run != nil {
		who = fmt.Sprintf("run %s, pid %d, %s", e.Run.RunID, e.Run.PID, e.Run.Doing())
	}
	return fmt.Sprintf("a loop is already running on sandbox %q (%s); follow it with 'sbx loop status' or 'sbx loop logs --follow', or end it with 'sbx loop stop'", e.Sandbox, who)
}

// BeginOptions describe a run that starts.
type BeginOptions struct {
	// Sandboxes in turn order: the first one's files set the bounds.
	Sandboxes     []RunSandbox
	MaxIterations int
	Detached      bool
}

// runLockCommand is what a run's lock file says of its holder.
const runLockCommand = "sbx loop"

// Begin starts a run on the sandboxes: it takes their run locks without
// waiting (a *BusyError when one has a live run), drops hints left for
// runs that are over, and writes the run's first status: converging.
func Begin(stateDir state.Dir, o BeginOptions) (*Run, error) {
	if len(o.Sandboxes) == 0 {
		return nil, errors.New("a run needs a sandbox")
	}
	r := &Run{}
	for _, sb := range o.Sandboxes {
		r.controls = append(r.controls, NewControl(stateDir, sb.Name))
	}
	// In name order, so that two runs sharing sandboxes never wait for
	// each other (they do not wait at all, but the refusal names the
	// same sandbox whichever started first).
	byName := append([]*Control(nil), r.controls...)
	sort.Slice(byName, func(i, j int) bool { return byName[i].Sandbox < byName[j].Sandbox })
	for _, c := range byName {
		l, err := c.Dir.AcquireRunLock(context.Background(), state.LockOptions{Command: runLockCommand})
		var le *state.LockedError
		if errors.As(err, &le) {
			r.release()
			live, _ := c.Live()
			return nil, &BusyError{Sandbox: c.Sandbox, Run: live, Holder: le.Holder}
		}
		if err != nil {
			r.release()
			return nil, err
		}
		r.locks = append(r.locks, l)
	}
	r.ID = time.Now().UTC().Format("20060102T150405Z") + "-" + randomID(3)
	lead := r.controls[0]
	r.Dir = lead.Dir.Run(r.ID)
	if err := os.MkdirAll(string(r.Dir), 0o700); err != nil {
		r.release()
		return nil, err
	}
	var err error
	if r.log, err = os.OpenFile(r.Dir.Log(), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600); err != nil {
		r.release()
		return nil, err
	}
	var orphans []Orphan
	for _, c := range r.controls {
		orphans = append(orphans, c.orphans()...)
	}
	r.status = Status{
		Orphans:       orphans,
		FormatVersion: StatusFormat, RunID: r.ID, Sandbox: lead.Sandbox, Sandboxes: o.Sandboxes,
		PID: os.Getpid(), PIDStart: proc.Start(os.Getpid()), Detached: o.Detached,
		State: StateRunning, Phase: PhaseConverging, Started: time.Now(), MaxIterations: o.MaxIterations,
		Denials: []int{}, UpstreamErrors: []int{}, RunDir: string(r.Dir), Log: r.log.Name(),
	}
	if err := r.update(func(*Status) {}); err != nil {
		r.release()
		return nil, err
	}
	ref := []byte(lead.Sandbox + "/runs/" + r.ID + "\n")
	for _, c := range r.controls {
		// No run of this sandbox is live (we hold its lock): hints
		// left for one are for a run that is over.
		if _, err := c.dropHints(func(target string) bool { return target != hintNext }); err != nil {
			r.release()
			return nil, err
		}
		if err := state.Write(c.Dir.Latest(), ref); err != nil {
			r.release()
			return nil, err
		}
	}
	return r, nil
}

// orphans are the agents the sandbox's latest run left running, when its
// process died without ending them (called with the sandbox's run lock
// held, before a new run becomes its latest).
func (c *Control) orphans() []Orphan {
	prev, err := c.Latest()
	if err != nil || prev.State != StateVanished {
		return nil
	}
	var out []Orphan
	for _, o := range prev.Orphans {
		if o.Sandbox == c.Sandbox {
			out = append(out, o)
		}
	}
	if prev.AgentPidfile != "" && prev.IterationSandbox == c.Sandbox {
		out = append(out, Orphan{RunID: prev.RunID, Sandbox: c.Sandbox, Pidfile: prev.AgentPidfile})
	}
	return out
}

// LockFiles are the run's lock files, in the order Resume takes them, to
// hand to the detached process that carries on the run.
func (r *Run) LockFiles() []*os.File {
	var fs []*os.File
	for _, l := range r.locks {
		fs = append(fs, l.File())
	}
	return fs
}

// HandOff gives the run to the detached process that was given
// LockFiles: this process keeps no lock and writes no more status.
func (r *Run) HandOff() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.handedOff = true
	for _, l := range r.locks {
		l.Disown()
	}
	r.locks = nil
	r.log.Close()
}

// Resume carries on, in a detached process, a run that Begin started in
// another: lockFiles are the run's lock files that process handed down
// (LockFiles, same order). It checks that they are the sandboxes' lock
// files and held, then records this process as the run's.
func Resume(stateDir state.Dir, id string, sandboxes []string, lockFiles []*os.File) (*Run, error) {
	if !RunID.MatchString(id) {
		return nil, fmt.Errorf("%q is not a run id", id)
	}
	if len(sandboxes) == 0 || len(lockFiles) != len(sandboxes) {
		return nil, fmt.Errorf("%d lock files for %d sandboxes", len(lockFiles), len(sandboxes))
	}
	r := &Run{ID: id}
	for _, n := range sandboxes {
		r.controls = append(r.controls, NewControl(stateDir, n))
	}
	byName := append([]*Control(nil), r.controls...)
	sort.Slice(byName, func(i, j int) bool { return byName[i].Sandbox < byName[j].Sandbox })
	for i, c := range byName {
		want, err := os.Stat(c.Dir.RunLock())
		if err != nil {
			return nil, err
		}
		got, err := lockFiles[i].Stat()
		if err != nil || !os.SameFile(want, got) {
			return nil, fmt.Errorf("lock file %d is not the run lock of sandbox %q", i, c.Sandbox)
		}
		l, err := state.AdoptLock(lockFiles[i], runLockCommand+" --detach")
		if err != nil {
			r.release()
			return nil, err
		}
		r.locks = append(r.locks, l)
	}
	r.Dir = r.controls[0].Dir.Run(id)
	s, err := ReadRun(r.Dir)
	if err != nil {
		r.release()
		return nil, err
	}
	if len(s.Sandboxes) != len(sandboxes) {
		r.release()
		return nil, fmt.Errorf("run %s has %d sandboxes, the files %d", id, len(s.Sandboxes), len(sandboxes))
	}
	for i, sb := range s.Sandboxes {
		if sb.Name != sandboxes[i] {
			r.release()
			return nil, fmt.Errorf("run %s is not a run of the files' sandboxes", id)
		}
	}
	if r.log, err = os.OpenFile(r.Dir.Log(), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600); err != nil {
		r.release()
		return nil, err
	}
	r.status = *s
	r.status.State, r.status.Detail = StateRunning, ""
	r.status.PID, r.status.PIDStart, r.status.Detached = os.Getpid(), proc.Start(os.Getpid()), true
	if err := r.update(func(*Status) {}); err != nil {
		r.release()
		return nil, err
	}
	return r, nil
}

// Log is the run's log file (run.log): what the run prints, so that
// `sbx loop logs` shows it whether the run is in the background or not.
func (r *Run) Log() io.Writer { return r.log }

// Status returns a copy of the run's status.
func (r *Run) Status() Status {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.status
}

// update changes the status and writes status.json atomically. Once the
// run is handed off, only the process it was handed to writes it.
func (r *Run) update(change func(*Status)) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.handedOff {
		return nil
	}
	change(&r.status)
	r.status.Updated = time.Now()
	r.status.ElapsedMS = r.status.Updated.Sub(r.status.Started).Milliseconds()
	return state.WriteJSON(r.Dir.Status(), &r.status)
}

// SetPhase records what the run does now, outside its iterations
// (converging).
func (r *Run) SetPhase(phase string) error {
	return r.update(func(s *Status) { s.Phase = phase })
}

// Watch returns ctx, cancelled when `sbx loop stop` asks the run to stop
// (the stop file in its directory, checked every 100 ms), from whatever
// phase the run is in.
func (r *Run) Watch(ctx context.Context) context.Context {
	ctx, cancel := context.WithCancel(ctx)
	go func() {
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		stop := r.Dir.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if _, err := os.Stat(stop); err == nil {
					cancel()
					return
				}
			}
		}
	}()
	return ctx
}

// Finish records how the run ended, unless it already did; hints queued
// for it and not delivered are dropped, and their count returned.
func (r *Run) Finish(state string, exitCode int, detail string) int {
	r.mu.Lock()
	done := r.ended || r.handedOff
	r.ended = true
	r.mu.Unlock()
	if done {
		return 0
	}
	dropped := 0
	for _, c := range r.controls {
		n, _ := c.dropHints(func(target string) bool { return target == r.ID })
		dropped += n
	}
	r.update(func(s *Status) {
		s.State, s.ExitCode, s.Detail, s.Phase = state, exitCode, detail, PhaseFinished
		s.IterationStarted, s.VerifyCommand = nil, ""
	})
	return dropped
}

// Close ends the run: a run that did not record its end (it failed or was
// interrupted before its loop) records it now, from the exit code sbx
// returns and the last error it printed; then the locks go.
func (r *Run) Close(exitCode int, lastError string) {
	state := StateError
	switch exitCode {
	case ExitInterrupted:
		state = StateInterrupted
		if lastError == "" {
			lastError = "interrupted before the loop started"
		}
	case ExitCompleted:
		exitCode, lastError = ExitError, "ended before the loop started"
	}
	r.Finish(state, exitCode, lastError)
	r.release()
}

func (r *Run) release() {
	for _, l := range r.locks {
		l.Release()
	}
	r.locks = nil
	if r.log != nil {
		r.log.Close()
	}
}

// Doing says in a few words what a run does now.
func (s *Status) Doing() string {
	switch s.Phase {
	case PhaseConverging:
		return "converging its sandboxes"
	case PhaseCheckpointing:
		return "checkpointing"
	case PhaseAgent:
		return fmt.Sprintf("iteration %d of %d running", s.Iteration, s.MaxIterations)
	case PhaseVerifying:
		return fmt.Sprintf("iteration %d of %d verifying", s.Iteration, s.MaxIterations)
	case PhasePausing:
		return fmt.Sprintf("pausing after iteration %d of %d failed (loop.backoff)", s.Iteration, s.MaxIterations)
	case PhasePulling:
		return "pulling the sandbox's workspace home"
	}
	return s.State
}
