package reconcile

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/sbxhq/sbx/internal/par"
	"github.com/sbxhq/sbx/spec"
	"github.com/sbxhq/sbx/state"
)

// ManagedBy is sbx's identity marker, stored in every record (and, by the
// docker driver, in a label) so sbx can tell the sandboxes it created from
// others.
const ManagedBy = "github.com/sbxhq/sbx"

// RecordVersion is the format version of records this sbx writes.
const RecordVersion = "1"

// fingerprintPrefix starts every keyed fingerprint.
const fingerprintPrefix = "hmac-sha256:"

// Record is what sbx remembers about a sandbox it applied: a redacted copy of
// the applied config and keyed fingerprints of every env value, every secret
// value and every sensitive field. It never holds a secret or a sensitive
// value.
type Record struct {
	ManagedBy     string `json:"managedBy"`
	FormatVersion string `json:"formatVersion"`
	Driver        string `json:"driver"`
	Name          string `json:"name"`
	// Config is the applied spec with each sensitive value replaced by its
	// fingerprint (numbers and booleans by their zero value).
	Config spec.Spec `json:"config"`
	// Sensitive lists the field paths that were redacted, sorted.
	Sensitive []string `json:"sensitive,omitempty"`
	// Fingerprints maps "env.NAME", "secrets.NAME" and each sensitive path to
	// "hmac-sha256:<hex>".
	Fingerprints map[string]string `json:"fingerprints,omitempty"`
	// BuildHash is the content hash of the template's build context.
	BuildHash string `json:"buildHash,omitempty"`
	// Owner is the workspace and host user the sandbox was applied from
	// (OwnerOf); zero in records written before sbx recorded it.
	Owner Owner `json:"owner,omitzero"`
	// AdoptedFrom is the owner whose sandbox this record's owner took
	// over with --adopt, when the backend still labels it as that
	// owner's.
	AdoptedFrom *Owner `json:"adoptedFrom,omitempty"`
}

// Key is the per-machine secret that keys fingerprints, so a stored
// fingerprint of a low-entropy secret cannot be brute-forced offline.
type Key []byte

// KeySize is the length of a Key in bytes.
const KeySize = state.KeySize

// Fingerprint returns HMAC-SHA256(key, path NUL value) as "hmac-sha256:<hex>".
// The path is mixed in so one value in two fields does not link them.
func (k Key) Fingerprint(path, value string) string {
	m := hmac.New(sha256.New, k)
	m.Write([]byte(path))
	m.Write([]byte{0})
	m.Write([]byte(value))
	return fingerprintPrefix + hex.EncodeToString(m.Sum(nil))
}

// Placeholder is what a sandbox holds in place of the value of a secret
// that only its hosts get (spec.Secret.Hosts): the same on every exec of
// the sandbox on this machine, so an agent that stored it keeps working,
// and telling nothing of the value. prefix shapes it like the real key
// (spec.Agent.KeyPrefix), so the agent's client takes it.
func (k Key) Placeholder(sandbox, secret, prefix string) string {
	fp := strings.TrimPrefix(k.Fingerprint("placeholder\x00"+sandbox+"\x00"+secret, ""), fingerprintPrefix)
	return prefix + "sbx-" + fp[:32]
}

// Desired is one sandbox as sandbox.yaml wants it, with the fingerprints the
// planner compares non-readable values by. Secret values never enter it.
type Desired struct {
	Spec *spec.Spec
	// Fingerprints maps "env.NAME" and each sensitive path to its keyed
	// fingerprint.
	Fingerprints map[string]string
	// BuildHash is the content hash of the template's build context, ""
	// without a build.
	BuildHash string
	// Approved is what the user last approved for this sandbox's files (the
	// last record applied on this machine from the same base file, kept
	// when the sandbox is destroyed; see Store.ApprovedFor); nil when
	// nothing was. Widenings are measured from it.
	Approved *Record
	// Neighbours are the sandboxes known on this machine: who could have
	// written a declaration file. With no approval, a declaration one of
	// them could have written is measured from the defaults.
	Neighbours []Neighbour
	// Owner is whom the sandbox belongs to when applied from here: the
	// base file's directory and the host user running sbx. A sandbox of
	// that name owned by another is refused without --adopt; zero skips
	// the check (a caller that knows no owner).
	Owner Owner

	// config is Spec as its record keeps it (sensitive values redacted),
	// made by NewDesired: a plan over hundreds of sandboxes then does not
	// make it after the backend answers.
	config *spec.Spec
}

// NewDesired fingerprints sb's env values and its sensitive fields with
// key. Secrets are not read: no backend stores them, so no plan needs
// their values.
func NewDesired(sb *spec.Spec, key Key, buildHash string) (Desired, error) {
	fp := map[string]string{}
	for k, v := range sb.Env {
		fp["env."+k] = key.Fingerprint("env."+k, v)
	}
	var tree map[string]any
	for path := range sb.Sensitive {
		if strings.HasPrefix(path, "env.") {
			continue
		}
		if tree == nil {
			var err error
			if tree, err = toTree(sb); err != nil {
				return Desired{}, err
			}
		}
		if v, ok := lookupPath(tree, path); ok {
			b, _ := json.Marshal(v)
			fp[path] = key.Fingerprint(path, string(b))
		}
	}
	d := Desired{Spec: sb, Fingerprints: fp, BuildHash: buildHash}
	config, err := recordConfig(d)
	if err != nil {
		return Desired{}, fmt.Errorf("redact sandbox %q: %w", sb.Name, err)
	}
	d.config = config
	return d, nil
}

// newRecord builds the record apply writes for d: pure, no key needed, since
// d carries the fingerprints. Limits the file leaves unset are recorded as
// the driver's defaults (what the sandbox gets), so a record made before a
// driver had defaults still reads as what was applied then.
func newRecord(driver string, defaults spec.Resources, d Desired) (*Record, error) {
	config := d.config
	if config == nil { // a Desired not made by NewDesired
		var err error
		if config, err = recordConfig(d); err != nil {
			return nil, fmt.Errorf("redact sandbox %q: %w", d.Spec.Name, err)
		}
	}
	r := &Record{
		ManagedBy: ManagedBy, FormatVersion: RecordVersion, Driver: driver, Name: d.Spec.Name,
		Config: *config, Sensitive: sensitivePaths(d.Spec), BuildHash: d.BuildHash, Fingerprints: map[string]string{},
		Owner: d.Owner,
	}
	r.Config.Resources = effectiveResources(r.Config.Resources, defaults)
	for k, v := range d.Fingerprints {
		r.Fingerprints[k] = v
	}
	return r, nil
}

// sensitivePaths are sb's sensitive field paths, sorted.
func sensitivePaths(sb *spec.Spec) []string {
	var sens []string
	for path := range sb.Sensitive {
		sens = append(sens, path)
	}
	sort.Strings(sens)
	return sens
}

// recordConfig is d's spec as a record keeps it: the spec's JSON read
// back; with sensitive fields, the JSON of its generic tree with each
// replaced by its fingerprint.
func recordConfig(d Desired) (*spec.Spec, error) {
	sens := sensitivePaths(d.Spec)
	var b []byte
	var err error
	if len(sens) == 0 {
		b, err = json.Marshal(d.Spec)
	} else {
		var tree map[string]any
		if tree, err = toTree(d.Spec); err != nil {
			return nil, err
		}
		for _, path := range sens {
			redactPath(tree, path, d.Fingerprints[path])
		}
		b, err = json.Marshal(tree)
	}
	if err != nil {
		return nil, err
	}
	var config spec.Spec
	if err := json.Unmarshal(b, &config); err != nil {
		return nil, err
	}
	return &config, nil
}

func (r *Record) sensitive(path string) bool {
	for _, p := range r.Sensitive {
		if coversPath(p, path) {
			return true
		}
	}
	return false
}

// toTree turns a spec into its generic JSON tree.
func toTree(sb *spec.Spec) (map[string]any, error) {
	b, err := json.Marshal(sb)
	if err != nil {
		return nil, err
	}
	var tree map[string]any
	if err := json.Unmarshal(b, &tree); err != nil {
		return nil, err
	}
	return tree, nil
}

// splitPath splits "mounts[0].source" into "mounts", "0", "source". A map
// key (env.NAME) is everything after the first dot of its parent.
func splitPath(path string) []string {
	var out []string
	for _, part := range strings.Split(path, ".") {
		for {
			i := strings.IndexByte(part, '[')
			if i < 0 {
				break
			}
			j := strings.IndexByte(part[i:], ']')
			if j < 0 {
				break
			}
			if i > 0 {
				out = append(out, part[:i])
			}
			out = append(out, part[i+1:i+j])
			part = part[i+j+1:]
		}
		if part != "" {
			out = append(out, part)
		}
	}
	return out
}

func lookupPath(tree any, path string) (any, bool) {
	cur := tree
	for _, seg := range splitPath(path) {
		switch c := cur.(type) {
		case map[string]any:
			v, ok := c[seg]
			if !ok {
				return nil, false
			}
			cur = v
		case []any:
			i, err := strconv.Atoi(seg)
			if err != nil || i < 0 || i >= len(c) {
				return nil, false
			}
			cur = c[i]
		default:
			return nil, false
		}
	}
	return cur, true
}

// redactPath replaces the value at path: strings by fp, numbers and
// booleans by their zero value, containers recursively.
func redactPath(tree map[string]any, path, fp string) {
	segs := splitPath(path)
	if len(segs) == 0 {
		return
	}
	var parent any = tree
	for _, seg := range segs[:len(segs)-1] {
		v, ok := lookupPath(parent, seg)
		if !ok {
			return
		}
		parent = v
	}
	last := segs[len(segs)-1]
	switch p := parent.(type) {
	case map[string]any:
		if v, ok := p[last]; ok {
			if nv, keep := redactValue(v, fp); keep {
				p[last] = nv
			} else {
				delete(p, last)
			}
		}
	case []any:
		if i, err := strconv.Atoi(last); err == nil && i >= 0 && i < len(p) {
			nv, _ := redactValue(p[i], fp)
			p[i] = nv
		}
	}
}

func redactValue(v any, fp string) (any, bool) {
	switch x := v.(type) {
	case string:
		return fp, true
	case map[string]any:
		for k, e := range x {
			if nv, keep := redactValue(e, fp); keep {
				x[k] = nv
			} else {
				delete(x, k)
			}
		}
		return x, true
	case []any:
		for i, e := range x {
			x[i], _ = redactValue(e, fp)
		}
		return x, true
	}
	return nil, false
}

// coversPath reports whether a sensitive path p covers path: the same
// field, a part of it, or a field containing it.
func coversPath(p, path string) bool {
	if p == path {
		return true
	}
	within := func(a, b string) bool { // a inside b
		return strings.HasPrefix(a, b+".") || strings.HasPrefix(a, b+"[")
	}
	return within(path, p) || within(p, path)
}

// Store reads and writes the records, approvals and fingerprint key kept
// in a state directory (package state has the layout).
type Store struct {
	Dir state.Dir
}

// RecordOf is which record of a sandbox counts: this machine's (stored),
// else the one the backend keeps in its labels (live's), for a sandbox
// another machine or an earlier state directory applied; nil when there
// is neither. It is decided here, once.
func RecordOf(stored *Record, live *Live) *Record {
	if stored == nil && live != nil {
		return live.Record
	}
	return stored
}

// OpenStore creates dir (0700) when needed and returns its Store.
func OpenStore(dir state.Dir) (*Store, error) {
	if err := dir.Create(); err != nil {
		return nil, err
	}
	return &Store{Dir: dir}, nil
}

// Key returns the machine's fingerprint key, creating it on first use
// (state.Dir.ReadKey).
func (s *Store) Key() (Key, error) {
	k, err := s.Dir.ReadKey()
	return Key(k), err
}

// Get returns the record of a sandbox, nil when there is none.
func (s *Store) Get(driver, name string) (*Record, error) {
	return s.read(s.Dir.Record(driver, name))
}

// Approved returns the record the user last approved for a sandbox (the
// last one applied on this machine, whatever the driver, even if the
// sandbox was destroyed since); nil when there is none.
func (s *Store) Approved(name string) (*Record, error) {
	return s.read(s.Dir.Approved(name))
}

func (s *Store) read(path string) (*Record, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var r Record
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("record %s: %w", path, err)
	}
	if r.ManagedBy != ManagedBy {
		return nil, fmt.Errorf("record %s: not written by sbx", path)
	}
	return &r, nil
}

// Names lists the sandboxes of a driver that have a record, sorted.
func (s *Store) Names(driver string) ([]string, error) {
	entries, err := os.ReadDir(s.Dir.Records(driver))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range entries {
		if n, ok := strings.CutSuffix(e.Name(), ".json"); ok && e.Type().IsRegular() && !strings.HasPrefix(n, ".") {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	return names, nil
}

// Records returns the records of the named sandboxes that have one.
func (s *Store) Records(driver string, names []string) (map[string]*Record, error) {
	recs, err := readAll(names, func(n string) (*Record, error) { return s.Get(driver, n) })
	if err != nil {
		return nil, err
	}
	out := map[string]*Record{}
	for i, n := range names {
		if recs[i] != nil {
			out[n] = recs[i]
		}
	}
	return out, nil
}

// ApprovedList returns every approval on this machine, sorted by name:
// what ApprovalFor picks from and who Neighbours are.
func (s *Store) ApprovedList() ([]*Record, error) {
	entries, err := os.ReadDir(s.Dir.Approvals())
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range entries {
		if n, ok := strings.CutSuffix(e.Name(), ".json"); ok && e.Type().IsRegular() && !strings.HasPrefix(n, ".") {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	return readAll(names, s.Approved)
}

// SameFiles reports whether r was applied from the base file sp is read
// from (its resolved path, as sbx was invoked): the identity the user
// chose, where a sandbox's name is whatever its file says.
func SameFiles(r *Record, sp *spec.Spec) bool {
	return r != nil && len(r.Config.Declarations) > 0 && len(sp.Declarations) > 0 &&
		r.Config.Declarations[0].Path == sp.Declarations[0].Path
}

// ApprovalFor picks what the user approved for sp's files from
// approvals: the approval of sp's name when it was applied from the same
// base file; else the only approval of that base file for a sandbox the
// files no longer declare (declared: the names they do), so a renamed
// sandbox is measured from what was approved for its file; else nil (more
// than one such approval: which one the file meant is its own choice).
// An approval of the same name from another file is not sp's: a name is
// whatever a file that a sandbox may have written says.
func ApprovalFor(sp *spec.Spec, approvals []*Record, declared []string) *Record {
	var renamed []*Record
	for _, r := range approvals {
		if !SameFiles(r, sp) {
			continue
		}
		if r.Name == sp.Name {
			return r
		}
		if !slices.Contains(declared, r.Name) {
			renamed = append(renamed, r)
		}
	}
	if len(renamed) == 1 {
		return renamed[0]
	}
	return nil
}

// readAll reads each name's record on every CPU; the error is the first
// in names' order.
func readAll(names []string, read func(string) (*Record, error)) ([]*Record, error) {
	recs := make([]*Record, len(names))
	errs := make([]error, len(names))
	par.Each(len(names), func(i int) { recs[i], errs[i] = read(names[i]) })
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return recs, nil
}

// Put writes r (state.Write: an interrupted apply leaves the old record
// or the new one, never half of one). The record also becomes what the
// user approved.
func (s *Store) Put(r *Record) error {
	for _, path := range []string{s.Dir.Record(r.Driver, r.Name), s.Dir.Approved(r.Name)} {
		if err := state.WriteJSON(path, r); err != nil {
			return fmt.Errorf("write record: %w", err)
		}
	}
	return nil
}

// Delete removes a sandbox's record; a missing record is not an error.
// What the user approved stays: a sandbox created again is measured
// against it.
func (s *Store) Delete(driver, name string) error {
	err := os.Remove(s.Dir.Record(driver, name))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}
