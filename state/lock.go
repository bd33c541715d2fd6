package state

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Lock serialises applies to one sandbox: an exclusive lock on
// STATE/locks/NAME.lock (flock on Unix, LockFileEx on Windows), which the
// system releases if the process dies.
type Lock struct {
	f *os.File
}

// LockedError says another process holds a sandbox's lock.
type LockedError struct {
	Sandbox string
	// Holder is what the holder wrote: "pid 42 on host (sbx apply)".
	Holder string
	// Waited is how long AcquireLock waited for it.
	Waited time.Duration
}

func (e *LockedError) Error() string {
	return fmt.Sprintf("sandbox %q is locked by %s; gave up after %s", e.Sandbox, e.Holder, e.Waited)
}

// LockOptions tune Acquire.
type LockOptions struct {
	// Timeout is how long to wait for another holder; 0 tries once.
	Timeout time.Duration
	// Poll is the interval between attempts (default 100ms).
	Poll time.Duration
	// Command describes the holder for whoever waits ("sbx apply").
	Command string
}

// AcquireLock takes the lock name under dir (dir.Locks(): a sandbox's in
// the state directory, a loop's run lock in its loop directory), retrying
// until opts.Timeout, and writes the holder's pid, host and command into
// the lock file. On timeout the error names the holder.
func AcquireLock(ctx context.Context, dir Dir, name string, opts LockOptions) (*Lock, error) {
	ldir := dir.Locks()
	if err := os.MkdirAll(ldir, 0o700); err != nil {
		return nil, fmt.Errorf("lock sandbox %q: %w", name, err)
	}
	path := filepath.Join(ldir, name+".lock")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock sandbox %q: %w", name, err)
	}
	poll := opts.Poll
	if poll <= 0 {
		poll = 100 * time.Millisecond
	}
	deadline := time.Now().Add(opts.Timeout)
	for {
		held, err := tryLock(f)
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("lock sandbox %q: %w", name, err)
		}
		if held {
			break
		}
		if !time.Now().Before(deadline) {
			holder, _ := os.ReadFile(path)
			f.Close()
			h := strings.TrimSpace(string(holder))
			if h == "" {
				h = "another process"
			}
			return nil, &LockedError{Sandbox: name, Holder: h, Waited: opts.Timeout}
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("lock sandbox %q: %w", name, ctx.Err())
		case <-time.After(poll):
		}
	}
	writeHolder(f, opts.Command)
	return &Lock{f: f}, nil
}

// writeHolder records in the lock file who holds it, for whoever waits.
func writeHolder(f *os.File, command string) {
	host, _ := os.Hostname()
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(fmt.Sprintf("pid %d on %s (%s)\n", os.Getpid(), host, command)), 0)
	}
}

// Release clears the holder and unlocks.
func (l *Lock) Release() error {
	if l == nil || l.f == nil {
		return nil
	}
	_ = l.f.Truncate(0)
	err := unlock(l.f)
	if cerr := l.f.Close(); err == nil {
		err = cerr
	}
	l.f = nil
	return err
}

// File is the lock's open file. A child process given it (os/exec's
// ExtraFiles) holds the lock with this process, and alone once this one
// has closed its copy: the lock belongs to the open file, not to a
// process. Close that copy with Disown, never with Release, which would
// unlock it for the child too.
func (l *Lock) File() *os.File { return l.f }

// Disown closes this process's copy of the lock's file without unlocking
// it: the lock stays with the child process that was given the file.
func (l *Lock) Disown() error {
	if l == nil || l.f == nil {
		return nil
	}
	err := l.f.Close()
	l.f = nil
	return err
}

// AdoptLock takes over a lock a parent process handed down (File): it
// checks that f really holds it and records the new holder.
func AdoptLock(f *os.File, command string) (*Lock, error) {
	held, err := tryLock(f)
	if err != nil {
		return nil, fmt.Errorf("adopt lock %s: %w", f.Name(), err)
	}
	if !held {
		return nil, fmt.Errorf("adopt lock %s: another process holds it", f.Name())
	}
	writeHolder(f, command)
	return &Lock{f: f}, nil
}
