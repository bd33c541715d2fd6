// Package checkpoint is what sbx knows about sandbox checkpoints, whatever
// the backend: a checkpoint is a sandbox's filesystem (not its workspace,
// which lives on the host; not its secrets, which only ever reach an exec)
// saved under a name, from which a sandbox whose template.checkpoint names
// it is created.
//
// The backends hold the images (driver.Checkpointer); sbx's record of each
// checkpoint is its catalog entry under the state directory, written by
// sbx when it creates or imports one. What an image's own labels or
// configuration say is never taken as that record: an imported archive is
// whatever its author wrote (Sanitize), and a checkpoint is content the
// agent wrote.
package checkpoint

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/sbxhq/sbx/spec"
	"github.com/sbxhq/sbx/state"
)

// FormatVersion is the version of catalog entries and of the documents of
// `sbx checkpoint ls --json` (docs/checkpoint-json.md).
const FormatVersion = "1"

// Repository is the image repository every backend stores checkpoints
// under: checkpoint NAME is the image sbx-checkpoint:NAME.
const Repository = "sbx-checkpoint"

// Ref is the image reference of checkpoint name.
func Ref(name string) string { return Repository + ":" + name }

// Kinds of checkpoints: made by `sbx checkpoint create`, or by a loop run
// (loop.checkpoint), which prunes its own.
const (
	KindManual = "manual"
	KindLoop   = "loop"
)

// Origins of checkpoints.
const (
	OriginCreated  = "created"
	OriginImported = "imported"
)

// Checkpoint is sbx's record of one checkpoint.
type Checkpoint struct {
	FormatVersion string `json:"format_version"`
	Name          string `json:"name"`
	Driver        string `json:"driver"`
	// Sandbox is the sandbox it was saved from ("" for an imported one:
	// what an archive says about itself is not evidence).
	Sandbox string `json:"sandbox,omitempty"`
	// ConfigDigest is the SHA-256 of the sandbox's last-applied record
	// (its redacted configuration) when it was saved.
	ConfigDigest string    `json:"config_digest,omitempty"`
	Created      time.Time `json:"created"`
	Kind         string    `json:"kind"`
	Origin       string    `json:"origin"`
	// Source is the archive an imported checkpoint was read from.
	Source string `json:"source,omitempty"`
	// Image is the backend's reference (Ref), ID its image ID as the
	// backend reported it after saving or loading.
	Image string `json:"image"`
	ID    string `json:"id,omitempty"`
}

// ValidName checks a checkpoint name: the rule of template.checkpoint,
// which is an image tag's, so the name is also a safe file name.
func ValidName(name string) error {
	if !spec.ValidCheckpointName(name) {
		return fmt.Errorf("invalid checkpoint name %q: 1 to 128 letters, digits, underscores, periods and hyphens, starting with a letter or digit", name)
	}
	return nil
}

// DefaultName is the name of a checkpoint taken now of a sandbox when the
// user gives none: SANDBOX-YYYYMMDDTHHMMSSZ.
func DefaultName(sandbox string, now time.Time) string {
	return sandbox + "-" + now.UTC().Format("20060102T150405Z")
}

// LoopName is the name of a checkpoint a loop run takes: the run's id and
// when ("3" before iteration 3, "done" when it completed).
func LoopName(sandbox, runID, when string) string {
	return sandbox + "-loop-" + runID + "-" + when
}

// ConfigDigest is the digest recorded for a sandbox's last-applied record
// (any JSON value; nil gives "").
func ConfigDigest(record any) string {
	if record == nil {
		return ""
	}
	b, err := json.Marshal(record)
	if err != nil {
		return ""
	}
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// Catalog keeps sbx's records of checkpoints in a state directory, one
// Checkpoint a file (state.Dir.Checkpoint).
type Catalog struct {
	Dir state.Dir
}

func (c Catalog) path(driver, name string) (string, error) {
	if err := ValidName(name); err != nil {
		return "", err
	}
	if driver == "" || strings.ContainsAny(driver, `/\.`) {
		return "", fmt.Errorf("invalid driver name %q", driver)
	}
	return c.Dir.Checkpoint(driver, name), nil
}

// ErrNotFound is the cause of a lookup of a checkpoint sbx has no record
// of.
var ErrNotFound = errors.New("no such checkpoint")

// Get returns the record of a checkpoint; an error wrapping ErrNotFound
// when there is none.
func (c Catalog) Get(driver, name string) (*Checkpoint, error) {
	p, err := c.path(driver, name)
	if err != nil {
		return nil, err
	}
	b, err := os.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("checkpoint %q on the %s backend: %w", name, driver, ErrNotFound)
	}
	if err != nil {
		return nil, err
	}
	var cp Checkpoint
	if err := json.Unmarshal(b, &cp); err != nil {
		return nil, fmt.Errorf("checkpoint record %s: %v", p, err)
	}
	if cp.FormatVersion != FormatVersion || cp.Name != name || cp.Driver != driver {
		return nil, fmt.Errorf("checkpoint record %s is not one this sbx wrote", p)
	}
	return &cp, nil
}

// List returns the records of a driver's checkpoints, oldest first.
func (c Catalog) List(driver string) ([]Checkpoint, error) {
	dir := c.Dir.Checkpoints(driver)
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []Checkpoint
	for _, e := range entries {
		name, ok := strings.CutSuffix(e.Name(), ".json")
		if !ok || !e.Type().IsRegular() || ValidName(name) != nil {
			continue
		}
		cp, err := c.Get(driver, name)
		if err != nil {
			return nil, err
		}
		out = append(out, *cp)
	}
	sort.SliceStable(out, func(i, j int) bool {
		if !out[i].Created.Equal(out[j].Created) {
			return out[i].Created.Before(out[j].Created)
		}
		return out[i].Name < out[j].Name
	})
	return out, nil
}

// Put writes a record (state.Write).
func (c Catalog) Put(cp Checkpoint) error {
	p, err := c.path(cp.Driver, cp.Name)
	if err != nil {
		return err
	}
	cp.FormatVersion = FormatVersion
	if err := state.WriteJSON(p, cp); err != nil {
		return fmt.Errorf("write checkpoint record: %w", err)
	}
	return nil
}

// Delete removes a record; a missing one is not an error.
func (c Catalog) Delete(driver, name string) error {
	p, err := c.path(driver, name)
	if err != nil {
		return err
	}
	if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// Prune picks the loop checkpoints of a sandbox to remove so that the
// newest keep remain, oldest first. It is pure.
func Prune(all []Checkpoint, sandbox string, keep int) []Checkpoint {
	var loops []Checkpoint
	for _, cp := range all {
		if cp.Kind == KindLoop && cp.Sandbox == sandbox {
			loops = append(loops, cp)
		}
	}
	sort.SliceStable(loops, func(i, j int) bool { return loops[i].Created.Before(loops[j].Created) })
	if len(loops) <= keep {
		return nil
	}
	return loops[:len(loops)-keep]
}

// Image is a checkpoint as a backend holds it.
type Image struct {
	ID      string
	Size    int64
	Created time.Time
}
