package session

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/sbxhq/sbx/checkpoint"
	"github.com/sbxhq/sbx/driver"
	"github.com/sbxhq/sbx/internal/atomicfile"
	"github.com/sbxhq/sbx/reconcile"
	"github.com/sbxhq/sbx/spec"
	"github.com/sbxhq/sbx/state"
)

// Checkpoints are the checkpoints of one backend: sbx's catalog of them
// (its record) and the backend's images.
type Checkpoints struct {
	Backend driver.Backend
	Catalog checkpoint.Catalog
	// Now is the clock of new checkpoints' times (time.Now when nil).
	Now func() time.Time
}

// NoCheckpointsError is a backend that keeps no checkpoints.
type NoCheckpointsError struct{ Driver, Why string }

func (e *NoCheckpointsError) Error() string {
	if e.Why != "" {
		return e.Why
	}
	return fmt.Sprintf("the %s driver cannot save or restore checkpoints", e.Driver)
}

// OpenCheckpoints makes and identifies the named driver for checkpoint
// work without a sandbox file (sbx checkpoint ls --driver NAME).
func OpenCheckpoints(ctx context.Context, env driver.Env, stateDir state.Dir, name string) (*Checkpoints, error) {
	c, err := Choose(ctx, env, stateDir, name)
	if err != nil {
		return nil, err
	}
	return &Checkpoints{Backend: c.Backend, Catalog: checkpoint.Catalog{Dir: stateDir}}, nil
}

// Checkpoints are the checkpoints of the session's backend.
func (s *Session) Checkpoints() *Checkpoints {
	return &Checkpoints{Backend: s.Backend, Catalog: checkpoint.Catalog{Dir: s.stateDir}}
}

// Supported says why the backend keeps no checkpoints (nil when it does).
func (c *Checkpoints) Supported() error {
	_, err := c.backend()
	return err
}

func (c *Checkpoints) backend() (driver.Checkpointer, error) {
	cp, ok := c.Backend.(driver.Checkpointer)
	if !ok {
		return nil, &NoCheckpointsError{Driver: c.Backend.Name(), Why: c.Backend.Caps().Constraints.NoCheckpoints}
	}
	return cp, nil
}

func (c *Checkpoints) now() time.Time {
	if c.Now != nil {
		return c.Now()
	}
	return time.Now()
}

// SavedCheckpoint is one checkpoint as sbx checkpoint ls shows it: sbx's record,
// and whether the backend still has its image.
type SavedCheckpoint struct {
	checkpoint.Checkpoint
	// Present is whether the backend has the image.
	Present bool `json:"present"`
	// Size is the image's size in bytes where the backend says (docker).
	Size int64 `json:"size,omitempty"`
}

// List returns sbx's records of the backend's checkpoints, oldest first,
// each with whether the backend still holds it.
func (c *Checkpoints) List(ctx context.Context) ([]SavedCheckpoint, error) {
	b, err := c.backend()
	if err != nil {
		return nil, err
	}
	recs, err := c.Catalog.List(c.Backend.Name())
	if err != nil {
		return nil, err
	}
	images, err := b.Checkpoints(ctx)
	if err != nil {
		return nil, err
	}
	out := []SavedCheckpoint{}
	for _, r := range recs {
		img, ok := images[r.Name]
		out = append(out, SavedCheckpoint{Checkpoint: r, Present: ok, Size: img.Size})
	}
	return out, nil
}

// free checks that name is taken neither in sbx's catalog nor on the
// backend.
func (c *Checkpoints) free(ctx context.Context, b driver.Checkpointer, name string) error {
	if err := checkpoint.ValidName(name); err != nil {
		return err
	}
	if _, err := c.Catalog.Get(c.Backend.Name(), name); err == nil {
		return fmt.Errorf("checkpoint %q exists; remove it first (sbx checkpoint rm %s) or pick another name", name, name)
	} else if !errors.Is(err, checkpoint.ErrNotFound) {
		return err
	}
	images, err := b.Checkpoints(ctx)
	if err != nil {
		return err
	}
	if _, ok := images[name]; ok {
		return fmt.Errorf("the %s backend has an image %s that sbx has no record of; remove it or pick another name", c.Backend.Name(), checkpoint.Ref(name))
	}
	return nil
}

// Remove removes a checkpoint: the backend's image, then sbx's record. A
// checkpoint a sandbox was made from stays (the backend refuses).
func (c *Checkpoints) Remove(ctx context.Context, name string) error {
	b, err := c.backend()
	if err != nil {
		return err
	}
	if _, err := c.Catalog.Get(c.Backend.Name(), name); err != nil {
		return err
	}
	if err := b.RemoveCheckpoint(ctx, name); err != nil {
		return err
	}
	return c.Catalog.Delete(c.Backend.Name(), name)
}

// Export writes a checkpoint's archive to path, replacing what is there
// (a link is replaced, not followed).
func (c *Checkpoints) Export(ctx context.Context, name, path string) error {
	b, err := c.backend()
	if err != nil {
		return err
	}
	if _, err := c.Catalog.Get(c.Backend.Name(), name); err != nil {
		return err
	}
	return atomicfile.Replace(path, 0o600, func(w io.Writer) error { return b.ExportCheckpoint(ctx, name, w) })
}

// Import loads the archive at path as checkpoint name: checked and
// rewritten first (checkpoint.Sanitize: only the image, every dev.sbx.*
// label of the archive's replaced by sbx's own), then loaded, then
// recorded as imported. Nothing the archive says about itself is recorded.
func (c *Checkpoints) Import(ctx context.Context, name, path string, lim checkpoint.Limits) (*checkpoint.Checkpoint, error) {
	b, err := c.backend()
	if err != nil {
		return nil, err
	}
	if err := c.free(ctx, b, name); err != nil {
		return nil, err
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	cp := checkpoint.Checkpoint{Name: name, Driver: c.Backend.Name(), Created: c.now().UTC(), Kind: checkpoint.KindManual,
		Origin: checkpoint.OriginImported, Source: abs, Image: checkpoint.Ref(name)}
	dir, err := os.MkdirTemp("", "sbx-import-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	archive := filepath.Join(dir, "checkpoint.tar")
	labels := map[string]string{
		checkpoint.LabelPrefix + "checkpoint":         name,
		checkpoint.LabelPrefix + "checkpoint.origin":  checkpoint.OriginImported,
		checkpoint.LabelPrefix + "checkpoint.created": cp.Created.Format(time.RFC3339),
	}
	err = atomicfile.Replace(archive, 0o600, func(w io.Writer) error {
		return checkpoint.Sanitize(path, checkpoint.Ref(name), labels, lim, w)
	})
	if err != nil {
		return nil, fmt.Errorf("import %s: %w", path, err)
	}
	if err := b.ImportCheckpoint(ctx, name, archive); err != nil {
		return nil, err
	}
	images, err := b.Checkpoints(ctx)
	if err != nil {
		return nil, err
	}
	img, ok := images[name]
	if !ok {
		return nil, fmt.Errorf("the %s backend does not list %s after loading it", c.Backend.Name(), checkpoint.Ref(name))
	}
	cp.ID = img.ID
	if err := c.Catalog.Put(cp); err != nil {
		return nil, err
	}
	return &cp, nil
}

// CreateOptions say how to take a checkpoint.
type CreateOptions struct {
	// Name is the checkpoint's; "" gives SANDBOX-TIME.
	Name string
	// Kind is checkpoint.KindManual or KindLoop.
	Kind string
	// Output, when set, is where the archive is also written (a link there
	// is replaced, not followed).
	Output string
	// Before, when set, is called before each backend call.
	Before func(c reconcile.Call)
}

// Checkpoint saves one declared sandbox, which must exist and be sbx's,
// as a checkpoint, and records it.
func (s *Session) Checkpoint(ctx context.Context, sp *spec.Spec, o CreateOptions) (*checkpoint.Checkpoint, error) {
	c := s.Checkpoints()
	b, err := c.backend()
	if err != nil {
		return nil, err
	}
	l := s.Live[sp.Name]
	if l == nil || !l.Exists {
		return nil, &NotCreatedError{Sandbox: sp.Name}
	}
	rec := s.Records[sp.Name]
	if rec == nil && !l.Managed {
		return nil, fmt.Errorf("sandbox %q exists but was not created by sbx; sbx checkpoint leaves it alone", sp.Name)
	}
	if err := s.Foreign(sp); err != nil {
		return nil, err
	}
	now := c.now().UTC()
	name := o.Name
	if name == "" {
		name = checkpoint.DefaultName(sp.Name, now)
	}
	if err := c.free(ctx, b, name); err != nil {
		return nil, err
	}
	kind := o.Kind
	if kind == "" {
		kind = checkpoint.KindManual
	}
	cp := checkpoint.Checkpoint{Name: name, Driver: s.Backend.Name(), Sandbox: sp.Name, ConfigDigest: checkpoint.ConfigDigest(recordOrNil(rec)),
		Created: now, Kind: kind, Origin: checkpoint.OriginCreated, Image: checkpoint.Ref(name)}
	var private string
	if o.Output != "" {
		dir, err := os.MkdirTemp("", "sbx-checkpoint-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(dir)
		private = filepath.Join(dir, "checkpoint.tar")
	}
	calls, err := b.CheckpointCalls(cp, l, private)
	if err != nil {
		return nil, fmt.Errorf("sandbox %q: %v", sp.Name, err)
	}
	for _, call := range calls {
		if o.Before != nil {
			o.Before(call)
		}
		if err := call.Run(ctx); err != nil {
			return nil, fmt.Errorf("checkpoint %q of sandbox %q: %w", name, sp.Name, err)
		}
	}
	images, err := b.Checkpoints(ctx)
	if err != nil {
		return nil, err
	}
	img, ok := images[name]
	if !ok {
		return nil, fmt.Errorf("the %s backend does not list %s after saving it", s.Backend.Name(), checkpoint.Ref(name))
	}
	cp.ID = img.ID
	if err := c.Catalog.Put(cp); err != nil {
		return nil, err
	}
	if private != "" {
		if err := moveFile(private, o.Output); err != nil {
			return &cp, fmt.Errorf("checkpoint %q saved, but writing %s: %v", name, o.Output, err)
		}
	}
	return &cp, nil
}

func recordOrNil(r *reconcile.Record) any {
	if r == nil {
		return nil
	}
	return r
}

// moveFile puts the private file src at dst: renamed when they share a
// file system, else copied through a new file renamed over dst. Either
// way whatever was at dst, a link included, is replaced, not followed.
func moveFile(src, dst string) error {
	if err := os.Rename(src, dst); err == nil {
		return nil
	}
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	return atomicfile.Replace(dst, 0o600, func(w io.Writer) error {
		_, err := io.Copy(w, in)
		return err
	})
}

// Prune removes the oldest loop checkpoints of a sandbox beyond keep and
// returns their names. A checkpoint the backend will not remove (a
// sandbox was made from it) is kept, and said so in the error.
func (c *Checkpoints) Prune(ctx context.Context, sandbox string, keep int) ([]string, error) {
	all, err := c.Catalog.List(c.Backend.Name())
	if err != nil {
		return nil, err
	}
	var removed []string
	var errs []error
	for _, cp := range checkpoint.Prune(all, sandbox, keep) {
		if err := c.Remove(ctx, cp.Name); err != nil {
			errs = append(errs, err)
			continue
		}
		removed = append(removed, cp.Name)
	}
	return removed, errors.Join(errs...)
}

// LoopCheckpoint is the checkpoint a loop run takes of its sandbox (when:
// the iteration it comes before, or "done"), followed by pruning the
// sandbox's loop checkpoints to keep.
func (s *Session) LoopCheckpoint(ctx context.Context, sp *spec.Spec, runID, when string, keep int) (*checkpoint.Checkpoint, []string, error) {
	if err := s.Observe(ctx); err != nil {
		return nil, nil, err
	}
	cp, err := s.Checkpoint(ctx, sp, CreateOptions{Name: checkpoint.LoopName(sp.Name, runID, when), Kind: checkpoint.KindLoop})
	if err != nil {
		return nil, nil, err
	}
	pruned, err := s.Checkpoints().Prune(ctx, sp.Name, keep)
	return cp, pruned, err
}

// checkRestores refuses a plan that creates a sandbox from a checkpoint
// sbx has no record of on this backend, and notes where each checkpoint
// it restores came from (sbx's record, not the image's labels).
func (s *Session) checkRestores(p *reconcile.Changes) {
	cat := checkpoint.Catalog{Dir: s.stateDir}
	for _, c := range p.Sandboxes {
		if c.FromCheckpoint == "" {
			continue
		}
		cp, err := cat.Get(s.Backend.Name(), c.FromCheckpoint)
		switch {
		case errors.Is(err, checkpoint.ErrNotFound):
			p.Errors = append(p.Errors, fmt.Sprintf("sandbox %q: template.checkpoint: sbx has no checkpoint %q on the %s backend ('sbx checkpoint ls' lists them; 'sbx checkpoint import' loads one)", c.Sandbox, c.FromCheckpoint, s.Backend.Name()))
		case err != nil:
			p.Errors = append(p.Errors, fmt.Sprintf("sandbox %q: template.checkpoint: %v", c.Sandbox, err))
		default:
			c.Notes = append(c.Notes, Provenance(cp))
		}
	}
}

// Provenance says where a checkpoint came from, from sbx's record.
func Provenance(cp *checkpoint.Checkpoint) string {
	when := cp.Created.UTC().Format("2006-01-02 15:04:05 UTC")
	if cp.Origin == checkpoint.OriginImported {
		return fmt.Sprintf("checkpoint %q was imported from %s on %s: its content is whoever made that file's", cp.Name, cp.Source, when)
	}
	s := fmt.Sprintf("checkpoint %q was saved from sandbox %q on %s", cp.Name, cp.Sandbox, when)
	if cp.ConfigDigest != "" {
		s += " (config " + short(cp.ConfigDigest) + ")"
	}
	return s
}

func short(digest string) string {
	if len(digest) > len("sha256:")+12 {
		return digest[:len("sha256:")+12]
	}
	return digest
}
