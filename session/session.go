// Package session is one sbx invocation's work on the sandboxes some files
// declare: load the files, pick and identify the driver, take the
// sandboxes' locks, observe them, plan (with the backend calls each step
// will make), approve, apply and check that it converged, report their
// status, and read their secrets for an exec; and a run of the agent
// loop's life around package loop (RunLoop): converging its sandboxes,
// ephemeral ones and warm-pool claims, approval when nobody is there to
// ask, checkpoints, the hand-over to a detached process. cmd/sbx parses
// flags and prints; what is decided, is decided here or below, and
// failures come back as typed errors, never as text to parse.
package session

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/sbxhq/sbx/driver"
	"github.com/sbxhq/sbx/reconcile"
	"github.com/sbxhq/sbx/schema"
	"github.com/sbxhq/sbx/spec"
	"github.com/sbxhq/sbx/state"
)

// DefaultFile is the sandbox file sbx reads when none is named: the
// nearest one in the current directory or above it, as git and Compose
// find theirs.
const DefaultFile = "sandbox.yaml"

// Options say what a session works on and how.
type Options struct {
	// Files are the sandbox files and layers (default: the nearest
	// sandbox.yaml).
	Files []string
	// Dir is where the search for the default file starts ("" is the
	// working directory).
	Dir string
	// Driver overrides the files' driver when set.
	Driver  string
	NoLocal bool
	// NoOrigins loads the files without where each value came from
	// (spec.Options.NoOrigins): for validate, not for a plan.
	NoOrigins bool
	// Offline loads the files without failing on unset required
	// variables (spec.Options.Offline); nothing is observed.
	Offline bool
	// Lock, when set, takes the sandboxes' locks, naming the holder
	// ("sbx apply"); LockTimeout bounds the wait and OnLockWait hears
	// whom it waits for.
	Lock        string
	LockTimeout time.Duration
	OnLockWait  func(e *state.LockedError)
	// Env is what the driver runs with; its runner's environment is the
	// only one backend commands and host secret commands see.
	Env driver.Env
	// StateDir is sbx's state directory (state.Default).
	StateDir state.Dir
	// HostValue hears every value the files read from the host
	// environment (spec.Options.HostValue).
	HostValue func(spec.HostValue)
	// User is the host user the session's sandboxes belong to
	// (reconcile.Owner); "" is HostUser().
	User string
}

// HostUser is the account running sbx, as the operating system names it
// (not $USER, which anything can set): the owner sbx records, beside the
// workspace, for every sandbox it applies. Where the system has no name
// for it, its numeric id.
func HostUser() string {
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username
	}
	return "uid " + strconv.Itoa(os.Getuid())
}

// Session is the declared sandboxes, observed on their backend.
type Session struct {
	Specs   []*spec.Spec
	Backend driver.Backend
	Entry   Driver
	Version string
	Store   *reconcile.Store
	Desired []reconcile.Desired
	Live    map[string]*reconcile.Live
	Records map[string]*reconcile.Record

	env      driver.Env
	stateDir state.Dir
	user     string
	// approvals are every approval on this machine (Store.ApprovedList).
	approvals []*reconcile.Record
	// proxyEnv is, by sandbox, the environment its execs get for the
	// secrets its proxy adds (placeholders, trust of its CA), once
	// Secrets handed them to the proxy.
	proxyEnv map[string]map[string]string
	// proxied is, by sandbox, the values Secrets handed its proxy instead
	// of its execs: not in the sandbox, but still redacted where sbx shows
	// what the sandbox printed (an upstream may echo one back).
	proxied map[string][]string
	locks   []*state.Lock
}

// NoFileError is a directory tree with no sandbox file.
type NoFileError struct{ Dir string }

func (e *NoFileError) Error() string {
	return fmt.Sprintf("no %s in %s or any directory above it; run 'sbx init' to create one, or name a file with -f", DefaultFile, e.Dir)
}

// NestedFileError is a sandbox.yaml found below another one: it lies in
// the workspace the outer file's sandbox shares with its agent (by
// default the outer file's directory), so the agent could have planted
// it, and sbx does not pick it up unless the user names it.
type NestedFileError struct{ Found, Outer string }

func (e *NestedFileError) Error() string {
	return fmt.Sprintf("%s lies below %s, where that file's sandbox could have written it; sbx does not pick it up: name it with -f to use it, or run sbx in %s",
		e.Found, e.Outer, filepath.Dir(e.Outer))
}

// Find returns the nearest sandbox.yaml in dir or a directory above it.
// One that has another sandbox.yaml in a directory above it is refused
// (NestedFileError): a sandbox whose workspace holds it could have
// written it.
func Find(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	for d := abs; ; {
		p := filepath.Join(d, DefaultFile)
		if isFile(p) {
			if outer := above(filepath.Dir(d)); outer != "" && filepath.Dir(d) != d {
				return "", &NestedFileError{Found: p, Outer: outer}
			}
			return p, nil
		}
		parent := filepath.Dir(d)
		if parent == d {
			return "", &NoFileError{Dir: abs}
		}
		d = parent
	}
}

// above returns the nearest sandbox.yaml in dir or a directory above it,
// "" when there is none.
func above(dir string) string {
	for d := dir; ; {
		if p := filepath.Join(d, DefaultFile); isFile(p) {
			return p
		}
		parent := filepath.Dir(d)
		if parent == d {
			return ""
		}
		d = parent
	}
}

// relative is p as the user would name it from the working directory:
// sandbox.yaml, ../sandbox.yaml.
func relative(p string) string {
	if wd, err := os.Getwd(); err == nil {
		if rel, err := filepath.Rel(wd, p); err == nil {
			return rel
		}
	}
	return p
}

// isFile reports whether p names something other than a directory.
func isFile(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && !fi.IsDir()
}

// Load reads the sandbox files (the nearest sandbox.yaml when none is
// named); lookupEnv is the environment they interpolate.
func Load(opts Options, lookupEnv func(string) (string, bool)) (*spec.Result, error) {
	files := opts.Files
	if len(files) == 0 {
		dir := opts.Dir
		if dir == "" {
			dir = "."
		}
		f, err := Find(dir)
		var nested *NestedFileError
		if errors.As(err, &nested) && opts.Dir == "" {
			nested.Found, nested.Outer = relative(nested.Found), relative(nested.Outer)
		}
		if err != nil {
			return &spec.Result{}, err
		}
		if opts.Dir == "" {
			f = relative(f)
		}
		files = []string{f}
	}
	sch, err := schema.Compile()
	if err != nil {
		return &spec.Result{}, err
	}
	return spec.Load(files, spec.Options{Schema: sch, LookupEnv: lookupEnv, NoLocal: opts.NoLocal, NoOrigins: opts.NoOrigins, Offline: opts.Offline, HostValue: opts.HostValue})
}

// CheckError is what the chosen backend cannot do for the sandboxes
// (reconcile.Check), found before anything runs.
type CheckError struct{ Problems []string }

func (e *CheckError) Error() string { return strings.Join(e.Problems, "\n") }

// Open loads the files, picks the backend and, with opts.Lock, takes the
// sandboxes' locks, then observes them and fingerprints what the files
// want. It reads no secret and runs no host command: no plan needs them.
func Open(ctx context.Context, opts Options) (*Session, error) {
	res, err := Load(opts, opts.Env.Runner.LookupEnv)
	if err != nil {
		return nil, err
	}
	seen := map[string]string{}
	drivers := map[string]bool{}
	for _, sp := range res.Specs {
		if opts.Driver != "" {
			sp.Driver = opts.Driver
		}
		drivers[sp.Driver] = true
		if prev, dup := seen[sp.Name]; dup {
			return nil, fmt.Errorf("sandbox %q is declared by both %s and %s", sp.Name, prev, sp.Files[0])
		}
		seen[sp.Name] = sp.Files[0]
	}
	if len(drivers) != 1 {
		var list []string
		for n := range drivers {
			list = append(list, n)
		}
		sort.Strings(list)
		return nil, fmt.Errorf("the sandboxes name different drivers (%s); run sbx once per driver", strings.Join(list, ", "))
	}
	var name string
	for n := range drivers {
		name = n
	}
	chosen, err := Choose(ctx, opts.Env, opts.StateDir, name)
	if err != nil {
		return nil, err
	}
	if c, ok := chosen.Backend.(driver.Configurer); ok {
		if err := c.Configure(res.Specs); err != nil {
			return nil, err
		}
	}
	// What the backend cannot do is refused before anything else runs.
	var problems []string
	for _, sp := range res.Specs {
		for _, p := range reconcile.Check(sp, chosen.Backend.Caps()) {
			problems = append(problems, fmt.Sprintf("sandbox %q: %s: %s", sp.Name, p.Path, p.Message))
		}
	}
	if len(problems) > 0 {
		return nil, &CheckError{Problems: problems}
	}
	s := &Session{Specs: res.Specs, Backend: chosen.Backend, Entry: chosen.Entry, Version: chosen.Identity.Version, env: opts.Env, stateDir: opts.StateDir, user: opts.User}
	if s.user == "" {
		s.user = HostUser()
	}
	if s.Store, err = reconcile.OpenStore(opts.StateDir); err != nil {
		return nil, err
	}
	if opts.Lock != "" {
		if err := s.lock(ctx, opts); err != nil {
			return nil, err
		}
	}
	// Fingerprinting the files needs nothing the backend says: it runs
	// while the backend is asked (kubectl's listing of 500 sandboxes takes
	// seconds).
	observed := make(chan error, 1)
	go func() { observed <- s.Observe(ctx) }()
	desired, desireErr := s.desire()
	if err := <-observed; err != nil {
		s.Release()
		return nil, err
	}
	if desireErr != nil {
		s.Release()
		return nil, desireErr
	}
	s.approve(desired)
	return s, nil
}

// lock takes every sandbox's lock, in name order so two sessions never
// wait for each other: once without waiting, then, if another sbx holds
// it, saying so and waiting up to the timeout.
func (s *Session) lock(ctx context.Context, opts Options) error {
	names := s.Names()
	sort.Strings(names)
	for _, n := range names {
		l, err := state.AcquireLock(ctx, opts.StateDir, n, state.LockOptions{Command: opts.Lock})
		var le *state.LockedError
		if errors.As(err, &le) {
			if opts.OnLockWait != nil {
				opts.OnLockWait(le)
			}
			l, err = state.AcquireLock(ctx, opts.StateDir, n, state.LockOptions{Timeout: opts.LockTimeout, Command: opts.Lock})
		}
		if err != nil {
			s.Release()
			return err
		}
		s.locks = append(s.locks, l)
	}
	return nil
}

// Names are the declared sandboxes' names, in the files' order.
func (s *Session) Names() []string {
	var names []string
	for _, sp := range s.Specs {
		names = append(names, sp.Name)
	}
	return names
}

// Release gives the locks back.
func (s *Session) Release() {
	for _, l := range s.locks {
		l.Release()
	}
	s.locks = nil
}

// Observe reads the live sandboxes and their last-applied records. The
// store is the record of truth; a record the backend keeps with the
// sandbox (docker labels) stands in when this machine has none.
func (s *Session) Observe(ctx context.Context) error {
	names := s.Names()
	type stored struct {
		records map[string]*reconcile.Record
		err     error
	}
	// This machine's records are read while the backend is asked.
	read := make(chan stored, 1)
	go func() {
		records, err := s.Store.Records(s.Backend.Name(), names)
		read <- stored{records, err}
	}()
	live, err := s.Backend.Observe(ctx, names)
	st := <-read
	if err != nil {
		return err
	}
	if st.err != nil {
		return st.err
	}
	records := st.records
	for n, l := range live {
		if r := reconcile.RecordOf(records[n], l); r != nil {
			records[n] = r
		}
	}
	s.Live, s.Records = live, records
	return nil
}

// desire fingerprints what the files want with this machine's key, and
// attaches what the user last approved of each on this machine. Where
// that is nothing, approve attaches the record the backend keeps, once
// the sandboxes are observed.
func (s *Session) desire() ([]reconcile.Desired, error) {
	key, err := s.Store.Key()
	if err != nil {
		return nil, err
	}
	approvals, err := s.Store.ApprovedList()
	if err != nil {
		return nil, err
	}
	s.approvals = approvals
	var desired []reconcile.Desired
	for _, sp := range s.Specs {
		hash, err := s.Backend.BuildHash(sp)
		if err != nil {
			return nil, err
		}
		d, err := reconcile.NewDesired(sp, key, hash)
		if err != nil {
			return nil, err
		}
		d.Approved = reconcile.ApprovalFor(sp, approvals, s.Names())
		d.Owner = s.Owner(sp)
		desired = append(desired, d)
	}
	return desired, nil
}

// approve makes desired the session's, once the sandboxes are observed:
// what the user last approved of a sandbox's files is the last record
// applied from them on this machine, else the record kept with the
// sandbox when it was applied from the same base file. Every sandbox
// known here is a neighbour of each.
func (s *Session) approve(desired []reconcile.Desired) {
	for i, d := range desired {
		if r := s.Records[d.Spec.Name]; d.Approved == nil && reconcile.SameFiles(r, d.Spec) {
			desired[i].Approved = r
		}
	}
	neighbours := s.neighbours(desired)
	for i := range desired {
		desired[i].Neighbours = neighbours
	}
	s.Desired = desired
}

// neighbours are the sandboxes known on this machine, as they were
// approved or recorded: every approval in the state directory, the
// records of the declared sandboxes (this machine's or the backend's), and
// each declared sandbox that exists, as its files now want it. A driver
// protects a sandbox's own declaration only when it is the session's
// driver and says it does.
func (s *Session) neighbours(desired []reconcile.Desired) []reconcile.Neighbour {
	caps := s.Backend.Caps()
	protects := func(driver string) bool { return caps.Protects && driver == s.Backend.Name() }
	var out []reconcile.Neighbour
	for _, r := range s.approvals {
		out = append(out, reconcile.Neighbour{Name: r.Name, Spec: &r.Config, Protected: protects(r.Driver)})
	}
	for _, n := range sortedNames(s.Records) {
		r := s.Records[n]
		out = append(out, reconcile.Neighbour{Name: r.Name, Spec: &r.Config, Protected: protects(r.Driver)})
	}
	for _, d := range desired {
		if l := s.Live[d.Spec.Name]; l != nil && l.Exists {
			out = append(out, reconcile.Neighbour{Name: d.Spec.Name, Spec: d.Spec, Protected: caps.Protects})
		}
	}
	return out
}

// Owner is whom sp's sandbox belongs to when applied from here: the
// directory of its base file and the host user (reconcile.Owner).
func (s *Session) Owner(sp *spec.Spec) reconcile.Owner {
	return reconcile.Owner{Workspace: filepath.Clean(sp.Dir), User: s.user}
}

// owners are Owner of every declared sandbox, by name.
func (s *Session) owners() map[string]reconcile.Owner {
	out := map[string]reconcile.Owner{}
	for _, sp := range s.Specs {
		out[sp.Name] = s.Owner(sp)
	}
	return out
}

// ForeignError is a verb run on a sandbox that belongs to another
// workspace or user (reconcile.OwnerOf).
type ForeignError struct {
	Sandbox string
	Owner   reconcile.Owner
	Here    reconcile.Owner
}

func (e *ForeignError) Error() string {
	return fmt.Sprintf("sandbox %q belongs to %s, not to this workspace (%s): give this workspace's sandbox another name (name: in sandbox.local.yaml), or work on it there",
		e.Sandbox, e.Owner, e.Here.Workspace)
}

// Foreign is a *ForeignError when sp's sandbox belongs to another
// workspace or user than here; verbs that work in a sandbox (shell,
// stop, start, netlog, checkpoint) refuse it, as plan does without
// --adopt.
func (s *Session) Foreign(sp *spec.Spec) error {
	own := reconcile.OwnerOf(s.Records[sp.Name], s.Live[sp.Name])
	if here := s.Owner(sp); own.Known() && own != here {
		return &ForeignError{Sandbox: sp.Name, Owner: own, Here: here}
	}
	return nil
}

// CheckOwned refuses, with a *ForeignError, files that declare a sandbox
// this machine last applied from another workspace or as another user (its
// approval in the state directory, Store.Approved): the loop's verbs that
// work on its runs in the state directory without asking the backend
// (loop status, logs, wait, stop, hint, and a run before it converges)
// would otherwise read or change another workspace's loop, which shares
// the name. user "" is HostUser().
func CheckOwned(dir state.Dir, specs []*spec.Spec, user string) error {
	if user == "" {
		user = HostUser()
	}
	store := &reconcile.Store{Dir: dir}
	for _, sp := range specs {
		r, err := store.Approved(sp.Name)
		if err != nil {
			return err
		}
		here := reconcile.Owner{Workspace: filepath.Clean(sp.Dir), User: user}
		if r != nil && r.Owner.Known() && r.Owner != here {
			return &ForeignError{Sandbox: sp.Name, Owner: r.Owner, Here: here}
		}
	}
	return nil
}

// Plan decides what apply would do, with the backend calls of each step.
func (s *Session) Plan(adopt bool) (*reconcile.Changes, error) {
	p := reconcile.Plan(s.Desired, s.Live, s.Records, s.Backend.Caps(), reconcile.Options{Adopt: adopt, DriverVersion: s.Version})
	s.checkRestores(p)
	return p, s.prepare(p)
}

// PlanDestroy decides what destroy would do.
func (s *Session) PlanDestroy(adopt bool) (*reconcile.Changes, error) {
	p := reconcile.PlanDestroy(s.Names(), s.Live, s.Records, s.Backend.Caps(), reconcile.Options{Adopt: adopt, DriverVersion: s.Version, Owners: s.owners()})
	return p, s.prepare(p)
}

// prepare asks the driver for a plan's calls and notes a legacy driver;
// a plan with errors is returned as it is (it cannot be applied).
func (s *Session) prepare(p *reconcile.Changes) error {
	if s.Entry.Legacy != "" {
		for _, c := range p.Sandboxes {
			if c.Action != reconcile.ActionNoOp {
				c.Notes = append(c.Notes, "legacy driver: "+s.Entry.Legacy)
			}
		}
	}
	if p.Err() != nil {
		return nil
	}
	return p.Prepare(s.Backend, s.Live)
}

// SavedPlan loads a plan saved by 'sbx plan --out' and checks that it is
// exactly what sbx would plan now: made from the same files and the same
// live state, and not edited since (the file may sit where the sandbox can
// write it).
func (s *Session) SavedPlan(path string) (*reconcile.Changes, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	p, err := reconcile.LoadPlan(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	if err := p.Rebind(s.Desired, s.Live, s.Records); err != nil {
		return nil, err
	}
	fresh, err := s.Plan(p.Adopts())
	if err != nil {
		return nil, err
	}
	if err := p.Matches(fresh); err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	return p, s.prepare(p)
}

// Approval is how a plan is approved: by the user on a terminal, by -y,
// and by --approve-widening for a plan that widens a sandbox; a saved
// plan was reviewed when it was made.
type Approval struct {
	Yes, Widening, Reviewed bool
}

// ApprovalError says why a plan may not run without the user.
type ApprovalError struct {
	// Widens is set when -y was given but the plan widens a sandbox.
	Widens bool
}

func (e *ApprovalError) Error() string {
	if e.Widens {
		return `the plan widens what the sandbox may do (listed under "This plan widens"); review it and apply on a terminal, or pass --approve-widening with -y`
	}
	return "the plan needs approval: run on a terminal to answer, or pass -y (--auto-approve)"
}

// Approve decides whether a plan may run with what the user gave: nil
// when it may run, *ApprovalError when the user must be asked (a terminal
// may ask; elsewhere it is refused). The agent inside may have written the
// file a widening came from, so -y alone does not apply a widening.
func Approve(p *reconcile.Changes, a Approval) error {
	switch {
	case a.Reviewed:
		return nil
	case a.Yes && p.Widens() && !a.Widening:
		return &ApprovalError{Widens: true}
	case a.Yes:
		return nil
	}
	return &ApprovalError{}
}

// NotConvergedError is an apply after which the plan is not empty.
type NotConvergedError struct{ Err error }

func (e *NotConvergedError) Error() string { return e.Err.Error() }
func (e *NotConvergedError) Unwrap() error { return e.Err }

// Apply runs a prepared plan, then observes again and checks that nothing
// is left: a *reconcile.StepError when a step failed or was interrupted,
// a *NotConvergedError when the backend did not end up as planned. What
// was applied becomes what the user approved.
func (s *Session) Apply(ctx context.Context, p *reconcile.Changes, adopt bool, opts reconcile.ApplyOptions) error {
	opts.Records = s.Store
	if err := reconcile.Apply(ctx, s.Backend, p, opts); err != nil {
		return err
	}
	if err := s.Observe(ctx); err != nil {
		return fmt.Errorf("after apply: %w", err)
	}
	var after *reconcile.Changes
	if p.Kind == "destroy" {
		after = reconcile.PlanDestroy(s.Names(), s.Live, s.Records, s.Backend.Caps(), reconcile.Options{Adopt: adopt, Owners: s.owners()})
	} else {
		desired, err := s.desire()
		if err != nil {
			return err
		}
		s.approve(desired)
		after = reconcile.Plan(s.Desired, s.Live, s.Records, s.Backend.Caps(), reconcile.Options{Adopt: adopt})
	}
	if err := reconcile.Converged(after); err != nil {
		return &NotConvergedError{Err: err}
	}
	return nil
}

// NotCreatedError is a verb for one sandbox run on one that does not
// exist.
type NotCreatedError struct{ Sandbox string }

func (e *NotCreatedError) Error() string {
	return fmt.Sprintf("sandbox %q does not exist; create it with 'sbx apply'", e.Sandbox)
}

// One is the session's only sandbox, which must exist and belong here
// (Foreign).
func (s *Session) One() (*spec.Spec, error) {
	if len(s.Specs) != 1 {
		return nil, fmt.Errorf("the files declare %d sandboxes; name one with -f", len(s.Specs))
	}
	sp := s.Specs[0]
	if l := s.Live[sp.Name]; l == nil || !l.Exists {
		return nil, &NotCreatedError{Sandbox: sp.Name}
	}
	if err := s.Foreign(sp); err != nil {
		return nil, err
	}
	return sp, nil
}

// DesiredOf is the desired state of one of the session's sandboxes.
func (s *Session) DesiredOf(name string) reconcile.Desired {
	for _, d := range s.Desired {
		if d.Spec.Name == name {
			return d
		}
	}
	return reconcile.Desired{}
}
