// Package state owns sbx's state directory: what sbx remembers on this
// machine, outside any workspace the agent can write. Every path in it is
// spelled here, and every file is replaced whole through Write (only a
// loop run's logs are appended to), so a crash leaves the old content or
// the new, never half of one. The packages that give the files their
// meaning (reconcile's records and approvals, session's identities,
// checkpoint's catalog, the loop's runs and hints) find them and write
// them through this package.
//
// The layout, every directory 0700 and every file 0600:
//
//	DIR/key                        32 random bytes, hex: the machine's
//	                               fingerprint key (reconcile.Key), made
//	                               once, never replaced
//	DIR/records/DRIVER/NAME.json   the record of sandbox NAME on DRIVER
//	                               (reconcile.Record): what sbx last applied
//	DIR/approved/NAME.json         the last record applied to NAME on any
//	                               driver, kept by destroy: what the user
//	                               last approved
//	DIR/locks/NAME.lock            sandbox NAME's lock (Lock): held by the
//	                               sbx that changes it, with who holds it
//	DIR/identities.json            the backends' identities (version and
//	                               capabilities) by CLI path, size and
//	                               modification time, kept a while so that
//	                               every command need not ask (session)
//	DIR/cas/DRIVER/NAME.pem        sandbox NAME's CA on DRIVER, certificate
//	                               and key (egress.CA), made once
//	                               (ReadOrCreate), removed by destroy
//	DIR/checkpoints/DRIVER/NAME.json  sbx's record of checkpoint NAME
//	                               (checkpoint.Catalog)
//	DIR/loops/SANDBOX/             the loop of a sandbox (LoopDir;
//	                               loop.Control):
//	    locks/run.lock             held by the process of its live run
//	    latest                     where its latest run is: LEAD/runs/RUN
//	    hints/TARGET.STAMP.txt     hints waiting for its agent
//	    runs/RUN/                  the runs it led (RunDir): status.json,
//	                               stop; appended to: run.log,
//	                               records.jsonl, iter-NNN.log
//
// Which record of a sandbox counts, this machine's or the one a backend
// keeps in its labels, is reconcile.RecordOf's rule: this machine's.
package state

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/sbxhq/sbx/internal/atomicfile"
)

// Dir is a state directory.
type Dir string

// Default is where state lives: $SBX_STATE_DIR, else $XDG_STATE_HOME/sbx,
// else HOME/.local/state/sbx.
func Default(getenv func(string) string) (Dir, error) {
	if d := getenv("SBX_STATE_DIR"); d != "" {
		return Dir(d), nil
	}
	if d := getenv("XDG_STATE_HOME"); d != "" {
		return Dir(filepath.Join(d, "sbx")), nil
	}
	home := getenv("HOME")
	if home == "" {
		return "", errors.New("cannot find a state directory: set SBX_STATE_DIR, XDG_STATE_HOME or HOME")
	}
	return Dir(filepath.Join(home, ".local", "state", "sbx")), nil
}

// Create makes the directory (0700) when it does not exist.
func (d Dir) Create() error {
	if err := os.MkdirAll(string(d), 0o700); err != nil {
		return fmt.Errorf("state directory: %w", err)
	}
	return nil
}

// Exists reports whether the directory exists: commands that only read
// state (completion, ls without a backend) do not create it.
func (d Dir) Exists() bool {
	_, err := os.Stat(string(d))
	return err == nil
}

func (d Dir) path(elem ...string) string {
	return filepath.Join(append([]string{string(d)}, elem...)...)
}

// Key is the path of the machine's fingerprint key.
func (d Dir) Key() string { return d.path("key") }

// Records is the directory of a driver's records.
func (d Dir) Records(driver string) string { return d.path("records", driver) }

// Record is the path of a sandbox's record on a driver.
func (d Dir) Record(driver, name string) string { return d.path("records", driver, name+".json") }

// Approvals is the directory of what the user last approved.
func (d Dir) Approvals() string { return d.path("approved") }

// Approved is the path of what the user last approved of a sandbox.
func (d Dir) Approved(name string) string { return d.path("approved", name+".json") }

// Locks is the directory of the sandboxes' locks.
func (d Dir) Locks() string { return d.path("locks") }

// Identities is the path of the backends' identities.
func (d Dir) Identities() string { return d.path("identities.json") }

// Checkpoints is the directory of a driver's checkpoint records.
func (d Dir) Checkpoints(driver string) string { return d.path("checkpoints", driver) }

// CA is the path of a sandbox's CA, certificate and key (egress.CA): the
// proxy signs with it the certificates it shows the sandbox for the hosts
// it adds secrets for. The key never leaves the host but to the proxy.
func (d Dir) CA(driver, name string) string { return d.path("cas", driver, name+".pem") }

// Checkpoint is the path of sbx's record of a checkpoint.
func (d Dir) Checkpoint(driver, name string) string {
	return d.path("checkpoints", driver, name+".json")
}

// Loops is the directory of every sandbox's loop.
func (d Dir) Loops() string { return d.path("loops") }

// Loop is the directory of a sandbox's loop.
func (d Dir) Loop(sandbox string) LoopDir { return LoopDir(d.path("loops", sandbox)) }

// RunsWithID lists the directories of the runs with the given id,
// whichever sandbox led them.
func (d Dir) RunsWithID(id string) ([]RunDir, error) {
	dirs, err := filepath.Glob(d.path("loops", "*", "runs", id))
	runs := make([]RunDir, len(dirs))
	for i, dir := range dirs {
		runs[i] = RunDir(dir)
	}
	return runs, err
}

// LoopDir is the directory of a sandbox's loop (Dir.Loop).
type LoopDir string

func (l LoopDir) path(elem ...string) string { return Dir(l).path(elem...) }

// Latest is the file naming the sandbox's latest run.
func (l LoopDir) Latest() string { return l.path("latest") }

// Hints is the directory of the hints waiting for the sandbox's agent.
func (l LoopDir) Hints() string { return l.path("hints") }

// Hint is the path of one hint.
func (l LoopDir) Hint(name string) string { return l.path("hints", name) }

// RunLock is the path of the lock held by the process of the sandbox's
// live run.
func (l LoopDir) RunLock() string { return l.path("locks", "run.lock") }

// AcquireRunLock takes the lock at RunLock (AcquireLock).
func (l LoopDir) AcquireRunLock(ctx context.Context, opts LockOptions) (*Lock, error) {
	return AcquireLock(ctx, Dir(l), "run", opts)
}

// RunAt is the run that the sandbox's latest file names ("LEAD/runs/RUN",
// relative to the directory of every sandbox's loop; the caller checks
// its form).
func (l LoopDir) RunAt(ref string) RunDir {
	return RunDir(filepath.Join(filepath.Dir(string(l)), filepath.FromSlash(ref)))
}

// Run is the directory of a run the sandbox led.
func (l LoopDir) Run(id string) RunDir { return RunDir(l.path("runs", id)) }

// RunDir is the directory of one loop run.
type RunDir string

func (r RunDir) path(elem ...string) string { return Dir(r).path(elem...) }

// Status is the run's status (loop.Status), replaced on every change.
func (r RunDir) Status() string { return r.path("status.json") }

// Stop is the file that asks the run to stop.
func (r RunDir) Stop() string { return r.path("stop") }

// Log is the run's log, appended to.
func (r RunDir) Log() string { return r.path("run.log") }

// Records is the run's iteration records, one JSON object a line,
// appended to.
func (r RunDir) Records() string { return r.path("records.jsonl") }

// IterationLog is the log of iteration i, from 1.
func (r RunDir) IterationLog(i int) string { return r.path(fmt.Sprintf("iter-%03d.log", i)) }

// Write replaces the file at path, in a state directory, with data: a
// synced temporary file in the same directory renamed over it (created
// 0600, its directories 0700), so a reader or a crash sees the old
// content or the new. It is the one way sbx writes state.
func Write(path string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	return atomicfile.Replace(path, 0o600, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
}

// WriteJSON is Write of v as indented JSON and a newline.
func WriteJSON(path string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return Write(path, append(data, '\n'))
}

// KeySize is the size of the machine's fingerprint key.
const KeySize = 32

// ReadKey returns the machine's fingerprint key, making it on first use.
// A new key is written to a temporary file and linked into place, which
// fails if the key exists (the O_EXCL guarantee without a window where
// another process could read a half-written key); the loser reads the
// winner's key.
func (d Dir) ReadKey() ([]byte, error) {
	if k, err := d.readKey(); err == nil || !errors.Is(err, fs.ErrNotExist) {
		return k, err
	}
	k := make([]byte, KeySize)
	if _, err := rand.Read(k); err != nil {
		return nil, err
	}
	if err := d.Create(); err != nil {
		return nil, err
	}
	if err := createOnce(d.Key(), []byte(hex.EncodeToString(k)+"\n")); err != nil {
		return nil, fmt.Errorf("create key: %w", err)
	}
	return d.readKey()
}

// ReadOrCreate returns the file at path, a state file that is made once
// and never replaced (the key, a sandbox's CA): when there is none, it
// writes what create returns. Of two processes making it at once, one
// wins and both get its content.
func ReadOrCreate(path string, create func() ([]byte, error)) ([]byte, error) {
	if b, err := os.ReadFile(path); err == nil || !errors.Is(err, fs.ErrNotExist) {
		return b, err
	}
	data, err := create()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, err
	}
	if err := createOnce(path, data); err != nil {
		return nil, err
	}
	return os.ReadFile(path)
}

// createOnce writes data to a synced temporary file beside path and links
// it into place, which fails if path exists (the O_EXCL guarantee without
// a window where another process could read half of it); a path that
// exists is not an error: the other writer won.
func createOnce(path string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), ".once.tmp-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer os.Remove(tmp)
	_, err = f.Write(data)
	if err == nil {
		err = f.Chmod(0o600)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if err := os.Link(tmp, path); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	return nil
}

func (d Dir) readKey() ([]byte, error) {
	b, err := os.ReadFile(d.Key())
	if err != nil {
		return nil, err
	}
	k, err := hex.DecodeString(strings.TrimSpace(string(b)))
	if err != nil || len(k) != KeySize {
		return nil, fmt.Errorf("key file %s is corrupt: want %d hex-encoded bytes", d.Key(), KeySize)
	}
	return k, nil
}

// Check reports state files that others could read or write: directories
// must be 0700 and files 0600 (no group or other bits).
func (d Dir) Check() error {
	var problems []string
	err := filepath.WalkDir(string(d), func(path string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := e.Info()
		if err != nil {
			return err
		}
		if mode := info.Mode().Perm(); mode&0o077 != 0 {
			want := fs.FileMode(0o600)
			if e.IsDir() {
				want = 0o700
			}
			problems = append(problems, fmt.Sprintf("%s has mode %04o, want %04o", path, mode, want))
		}
		return nil
	})
	if err != nil {
		return err
	}
	if len(problems) > 0 {
		return fmt.Errorf("state directory is not private: %s", strings.Join(problems, "; "))
	}
	return nil
}
