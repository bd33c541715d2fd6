package reconcile

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/sbxhq/sbx/internal/par"
	"github.com/sbxhq/sbx/spec"
)

// FormatVersion is the version of the plan document (--json, --out).
const FormatVersion = "1"

// Action is what a plan does to one sandbox.
type Action string

// The actions.
const (
	ActionNoOp    Action = "no-op"
	ActionCreate  Action = "create"
	ActionUpdate  Action = "update"
	ActionReplace Action = "replace"
	ActionDestroy Action = "destroy"
)

// Op is the kind of one field change.
type Op string

// The field operations.
const (
	Add    Op = "add"
	Change Op = "change"
	Remove Op = "remove"
)

// Symbol is the margin mark of the operation: +, ~ or -.
func (o Op) Symbol() string {
	switch o {
	case Add:
		return "+"
	case Remove:
		return "-"
	}
	return "~"
}

// Diff is one field that differs. Before and After are empty when the value
// is sensitive: sensitive values never enter a plan.
type Diff struct {
	Op     Op     `json:"op"`
	Field  Field  `json:"field"`
	Path   string `json:"path"`
	Before string `json:"before,omitempty"`
	After  string `json:"after,omitempty"`
	// Source says where a network rule came from ("preset npm").
	Source            string `json:"source,omitempty"`
	Sensitive         bool   `json:"sensitive,omitempty"`
	ForcesReplacement bool   `json:"forces_replacement,omitempty"`
	WidensEgress      bool   `json:"widens_egress,omitempty"`
	// Restores marks a change that undoes a change made outside sbx.
	Restores bool `json:"restores,omitempty"`
	// Exception, on an added network.allow IP literal, is the blocked
	// range it is an exception to: the proxy dials that private address
	// although the range stays blocked.
	Exception string `json:"exception,omitempty"`
}

// String renders the diff without annotations:
// `~ env.NODE_ENV: "development" → "production"`.
func (d Diff) String() string {
	var v string
	switch {
	case d.Sensitive:
		v = "(sensitive)"
	case d.Op == Add:
		v = strconv.Quote(d.After)
	case d.Op == Remove:
		v = strconv.Quote(d.Before)
	default:
		v = strconv.Quote(d.Before) + " → " + strconv.Quote(d.After)
	}
	return d.Op.Symbol() + " " + d.Path + ": " + v
}

// annotations are the comments the renderer puts after a diff.
func (d Diff) annotations() []string {
	var a []string
	if d.Source != "" && d.Source != "network.allow" {
		a = append(a, d.Source)
	}
	if d.ForcesReplacement {
		a = append(a, "forces replacement")
	}
	if d.Restores {
		a = append(a, "restores sandbox.yaml")
	}
	if d.Exception != "" {
		a = append(a, "private address: an exception to blocked range "+d.Exception)
	}
	if d.WidensEgress {
		a = append(a, "widens egress")
	}
	return a
}

// SandboxChange is the plan of one sandbox: its action, the field changes
// that cause it, drift found, and the ordered steps.
type SandboxChange struct {
	Sandbox string `json:"sandbox"`
	Action  Action `json:"action"`
	// Adopt is set when sbx takes over a sandbox it did not create.
	Adopt bool `json:"adopt,omitempty"`
	// Reasons say why the action is needed beyond the diffs themselves:
	// the backend reasons that force a replacement.
	Reasons []string `json:"reasons"`
	Changes []Diff   `json:"changes"`
	// Drift lists what changed outside sbx since the last apply (before:
	// as applied, after: as found).
	Drift []Diff `json:"drift"`
	// Notes are caveats the user should read (what adopting assumes).
	Notes []string `json:"notes,omitempty"`
	// Deleted is set when a sandbox sbx applied no longer exists.
	Deleted bool `json:"deleted_outside_sbx,omitempty"`
	// Widenings are what the change gives the sandbox beyond what was
	// last approved; apply -y refuses them without --approve-widening.
	Widenings []Widening `json:"widenings,omitempty"`
	// FromCheckpoint names the checkpoint a create or replace makes the
	// sandbox from (template.checkpoint).
	FromCheckpoint string `json:"from_checkpoint,omitempty"`
	Steps          []Step `json:"steps"`
}

// WidensEgress reports whether the change lets the sandbox reach more.
func (c *SandboxChange) WidensEgress() bool {
	for _, d := range c.Changes {
		if d.WidensEgress {
			return true
		}
	}
	return false
}

// Widens reports whether any sandbox of the plan would get more than was
// last approved.
func (p *Changes) Widens() bool {
	for _, c := range p.Sandboxes {
		if c.Action != ActionNoOp && c.Action != ActionDestroy && len(c.Widenings) > 0 {
			return true
		}
	}
	return false
}

// Changes is a plan: data that says, per sandbox, what apply will do and
// why. It is made by Plan or PlanDestroy, rendered by Render and WriteJSON,
// saved by Save and run by Apply.
type Changes struct {
	FormatVersion string `json:"format_version"`
	// Kind is "apply", "destroy" or "change" (KindChange).
	Kind string `json:"kind"`
	// Base and Head name the revisions a change plan compares (PlanChange).
	Base          string           `json:"base,omitempty"`
	Head          string           `json:"head,omitempty"`
	Driver        string           `json:"driver"`
	DriverVersion string           `json:"driver_version,omitempty"`
	Sandboxes     []*SandboxChange `json:"sandboxes"`
	Errors        []string         `json:"errors"`
	// Observed is a digest of the live state and records the plan was made
	// from; Desired a digest of the (redacted) desired configs.
	Observed string `json:"observed"`
	Desired  string `json:"desired"`

	// digests makes Observed and Desired the first time a plan is
	// written as JSON (WriteJSON, Save, Matches): a plan that is only
	// shown never needs them, and for hundreds of sandboxes they are
	// JSON of every record twice over. Plan's inputs are not changed
	// after it (live states and records are replaced, never edited).
	digests func()

	specs map[string]*spec.Spec
	calls map[*Step][]Call // by Prepare
}

// Options tune planning.
type Options struct {
	// Adopt lets sbx manage a same-named sandbox it did not create, or
	// one that belongs to another workspace (Owner).
	Adopt bool
	// Owners are, for PlanDestroy, whom each named sandbox belongs to
	// when applied from here (Plan reads Desired.Owner): one that
	// belongs to another is refused without Adopt.
	Owners map[string]Owner
	// DriverVersion is shown next to the driver name.
	DriverVersion string
}

// digest makes the plan's digests if they are still to be made.
func (p *Changes) digest() {
	if p.digests != nil {
		p.digests()
		p.digests = nil
	}
}

// Err joins the plan's errors; nil when it can be applied.
func (p *Changes) Err() error {
	if len(p.Errors) == 0 {
		return nil
	}
	return errors.New(strings.Join(p.Errors, "\n"))
}

// Empty reports whether applying the plan would change nothing.
func (p *Changes) Empty() bool {
	for _, c := range p.Sandboxes {
		if c.Action != ActionNoOp {
			return false
		}
	}
	return len(p.Errors) == 0
}

// Count returns how many sandboxes the plan creates, updates, replaces and
// destroys.
func (p *Changes) Count() (create, update, replace, destroy int) {
	for _, c := range p.Sandboxes {
		switch c.Action {
		case ActionCreate:
			create++
		case ActionUpdate:
			update++
		case ActionReplace:
			replace++
		case ActionDestroy:
			destroy++
		}
	}
	return
}

// Plan compares each desired sandbox with what the backend reported (live)
// and what sbx last applied (records) under the driver's capabilities, and
// returns the ordered actions. It is pure: same input, same plan.
func Plan(desired []Desired, live map[string]*Live, records map[string]*Record, caps Caps, opts Options) *Changes {
	p := &Changes{
		FormatVersion: FormatVersion, Kind: "apply", Driver: caps.Driver, DriverVersion: opts.DriverVersion,
		Errors: []string{}, specs: map[string]*spec.Spec{},
	}
	ds := append([]Desired(nil), desired...)
	sort.Slice(ds, func(i, j int) bool { return ds[i].Spec.Name < ds[j].Spec.Name })
	var names []string
	for _, d := range ds {
		names = append(names, d.Spec.Name)
	}
	// Each sandbox is planned on its own (on every CPU), and the results
	// are put together in name order.
	type planned struct {
		base   *Record // the record without the driver's defaults
		change *SandboxChange
		errs   []string
	}
	res := make([]planned, len(ds))
	par.Each(len(ds), func(i int) {
		d, r := ds[i], &res[i]
		name := d.Spec.Name
		// The desired digest is of the records without the driver's
		// defaults, and each create step's record is one with them.
		base, baseErr := newRecord(caps.Driver, spec.Resources{}, d)
		if baseErr == nil {
			r.base = base
		}
		l := existing(live[name])
		rec := RecordOf(records[name], l)
		if l != nil && rec == nil && !l.Managed && !opts.Adopt {
			r.errs = []string{fmt.Sprintf("sandbox %q exists but was not created by sbx; use --adopt to manage it", name)}
			return
		}
		own := ownership{owner: OwnerOf(records[name], live[name])}
		if l != nil && l.Record != nil {
			own.labelled = l.Record.Owner
		}
		if msg := foreign(name, own.owner, d.Owner); msg != "" {
			if !opts.Adopt {
				r.errs = []string{msg}
				return
			}
			own.adopt = true
		}
		problems := Check(d.Spec, caps)
		if raw := live[name]; raw != nil {
			problems = append(problems, raw.Problems...)
		}
		for _, pr := range problems {
			r.errs = append(r.errs, fmt.Sprintf("sandbox %q: %s: %s", name, pr.Path, pr.Message))
		}
		if len(r.errs) > 0 {
			return
		}
		r.change, r.errs = planOne(d, l, rec, own, caps, base, baseErr, false)
		if raw := live[name]; raw != nil {
			r.change.Notes = append(r.change.Notes, raw.Notes...)
		}
	})
	bases := map[string]*Record{}
	for i, d := range ds {
		p.specs[d.Spec.Name] = d.Spec
		if res[i].base != nil {
			bases[d.Spec.Name] = res[i].base
		}
		if res[i].change != nil {
			p.Sandboxes = append(p.Sandboxes, res[i].change)
		}
		p.Errors = append(p.Errors, res[i].errs...)
	}
	p.digests = func() {
		p.Observed = observedDigest(names, live, records)
		p.Desired = digest(bases)
	}
	return p
}

func existing(l *Live) *Live {
	if l == nil || !l.Exists {
		return nil
	}
	return l
}

// PlanDestroy plans removing the named sandboxes and forgetting their
// records. A sandbox sbx did not create is refused without opts.Adopt.
func PlanDestroy(names []string, live map[string]*Live, records map[string]*Record, caps Caps, opts Options) *Changes {
	p := &Changes{
		FormatVersion: FormatVersion, Kind: "destroy", Driver: caps.Driver, DriverVersion: opts.DriverVersion,
		Errors: []string{},
	}
	names = append([]string(nil), names...)
	sort.Strings(names)
	for _, name := range names {
		l := existing(live[name])
		rec := RecordOf(records[name], l)
		c := &SandboxChange{Sandbox: name, Action: ActionNoOp, Reasons: []string{}, Changes: []Diff{}, Drift: []Diff{}, Steps: []Step{}}
		step := func(k StepKind, reason string) {
			c.Steps = append(c.Steps, Step{Kind: k, Sandbox: name, Reason: reason})
		}
		if msg := foreign(name, OwnerOf(records[name], live[name]), opts.Owners[name]); msg != "" && !opts.Adopt {
			p.Errors = append(p.Errors, msg)
			continue
		}
		switch {
		case l != nil && rec == nil && !l.Managed && !opts.Adopt:
			p.Errors = append(p.Errors, fmt.Sprintf("sandbox %q exists but was not created by sbx; use --adopt to manage it", name))
			continue
		case l != nil:
			c.Action = ActionDestroy
			c.Adopt = rec == nil && !l.Managed
			step(StepStop, "sbx destroy")
			step(StepRemove, "sbx destroy")
			if rec != nil {
				step(StepForget, "sbx destroy")
			}
		case rec != nil:
			c.Action, c.Deleted = ActionDestroy, true
			step(StepForget, "the sandbox was deleted outside sbx")
		}
		p.Sandboxes = append(p.Sandboxes, c)
	}
	p.digests = func() {
		p.Observed = observedDigest(names, live, records)
		p.Desired = desiredDigest(caps.Driver, nil)
	}
	return p
}

// planner decides one sandbox.
type planner struct {
	caps Caps
	d    Desired
	sb   *spec.Spec
	live *Live   // nil: does not exist
	rec  *Record // nil: never applied (or adopted)
	// declared is set when rec is not what was applied but another
	// revision's declaration (PlanChange): there is no live sandbox, and
	// one exists exactly when rec is set.
	declared bool
	diffs    []Diff
	drift    []Diff
	errs     []string
	notes    []string
	// knownPorts are the live and recorded ports, to unpublish by value.
	knownPorts []spec.Port
}

// ownership is what Plan found of whom a sandbox belongs to.
type ownership struct {
	owner    Owner // OwnerOf
	labelled Owner // what the backend's labels say, zero without
	adopt    bool  // it belongs to another and --adopt takes it over
}

// planOne plans one sandbox; base is newRecord of d without the driver's
// defaults (or the error making it). With declared, rec is another
// revision's declaration of the sandbox and live is nil (PlanChange).
func planOne(d Desired, live *Live, rec *Record, own ownership, caps Caps, base *Record, baseErr error, declared bool) (*SandboxChange, []string) {
	deleted := live == nil && rec != nil && !declared
	if live == nil && !declared {
		rec = nil // a new sandbox gets everything, whatever was applied before
	}
	pl := &planner{caps: caps, d: d, sb: d.Spec, live: live, rec: rec, declared: declared}
	sb := d.Spec
	var rc spec.Spec
	if rec != nil {
		rc = rec.Config
	}
	var l Live
	if live != nil {
		l = *live
	}
	livePorts := normalisePorts(append(append([]spec.Port(nil), sb.Ports...), rc.Ports...), l.Ports)
	pl.knownPorts = append(append([]spec.Port(nil), livePorts...), rc.Ports...)

	pl.scalar(FieldAgent, "agent", sb.Agent, l.Agent, rc.Agent)
	pl.scalar(FieldTemplate, "template.image", sb.Template.Image, l.Template, rc.Template.Image)
	pl.scalar(FieldUser, "user", sb.User, l.User, rc.User)
	pl.scalar(FieldTemplate, "template.checkpoint", sb.Template.Checkpoint, l.Checkpoint, rc.Template.Checkpoint)
	buildChanged := false
	if pl.exists() && rec != nil && d.BuildHash != rec.BuildHash {
		buildChanged = true
		pl.add(Diff{Op: Change, Field: FieldTemplateBuild, Path: "template.build", Before: rec.BuildHash, After: d.BuildHash})
	}
	if sb.Template.Build != nil || (rc.Template.Build != nil && rec != nil) {
		var dn, rn bool
		if sb.Template.Build != nil {
			dn = sb.Template.Build.Network
		}
		if rc.Template.Build != nil {
			rn = rc.Template.Build.Network
		}
		pl.scalar(FieldTemplateBuild, "template.build.network", boolString(dn), "", boolString(rn))
	}
	pl.scalar(FieldWorkspace, "workspace", workspaceString(sb.Workspace), workspaceString(l.Workspace), workspaceString(rc.Workspace))
	pl.set(FieldMounts, FieldMounts, "mounts", mountItems(sb), mountStrings(l.Mounts), mountStrings(rc.Mounts), true, false, false)
	pl.env()
	pl.secrets()
	pl.services()
	want := effectiveResources(sb.Resources, caps.Defaults)
	recRes := rc.Resources
	cpusField := FieldResources
	if want.CPUs == 0 && (l.Resources.CPUs != 0 || (rec != nil && recRes.CPUs != 0)) {
		cpusField = FieldResourcesUnset
	}
	pl.scalar(cpusField, "resources.cpus", cpusString(want.CPUs), cpusString(l.Resources.CPUs), cpusString(recRes.CPUs))
	pl.scalar(FieldResources, "resources.memory", memoryString(want.Memory), memoryString(l.Resources.Memory), memoryString(recRes.Memory))
	pl.scalar(FieldPids, "resources.pids", pidsString(want.Pids), pidsString(l.Resources.Pids), pidsString(recRes.Pids))
	pl.set(FieldPorts, FieldPorts, "ports", portItems(sb), portStrings(livePorts), portStrings(rc.Ports), true, false, false)
	pl.scalar(FieldRuntime, "docker.runtime", sb.Docker.Runtime, liveRuntime(sb.Docker.Runtime, l), rc.Docker.Runtime)
	pl.set(FieldDockerNetworks, FieldDockerNetworks, "docker.networks", plainItems(sb.Docker.Networks), l.DockerNetworks, rc.Docker.Networks, true, true, false)
	pl.scalar(FieldNoNewPrivileges, "docker.noNewPrivileges", boolString(sb.Docker.NoNewPrivileges), boolString(l.NoNewPrivileges), boolString(rc.Docker.NoNewPrivileges))
	pl.scalar(FieldProtect, "workspace.protect", boolString(sb.Protect), boolString(l.Protect), boolString(rc.Protect))
	k, lk, rk := sb.K8s(), l.Kubernetes, rc.K8s()
	pl.scalar(FieldKubernetes, "kubernetes.runtimeClassName", k.RuntimeClassName, lk.RuntimeClassName, rk.RuntimeClassName)
	pl.scalar(FieldKubernetes, "kubernetes.workspaceSize", k.WorkspaceSize, lk.WorkspaceSize, rk.WorkspaceSize)
	pl.scalar(FieldKubernetes, "kubernetes.storageClass", k.StorageClass, lk.StorageClass, rk.StorageClass)
	pl.scalar(FieldEgressMode, "kubernetes.egress", k.Egress, lk.Egress, rk.Egress)
	pl.scalar(FieldWarmPool, "kubernetes.warmPool", poolString(k.WarmPool), poolString(lk.WarmPool), poolString(rk.WarmPool))
	if caps.Hardening != "" && live != nil && pl.readable(FieldHardening) && l.Hardening != caps.Hardening {
		before := l.Hardening
		if before == "" {
			before = "none"
		}
		pl.add(Diff{Op: Change, Field: FieldHardening, Path: "hardening", Before: before, After: caps.Hardening})
	}
	pl.scalar(FieldNetworkAdd, "network.policy", sb.Network.Policy, l.Network.Policy, rc.Network.Policy)
	var recAllow []string
	if rec != nil {
		for _, r := range rc.Network.AllowRules(rc.Agent) {
			recAllow = append(recAllow, r.Host)
		}
	}
	var allow []item
	for _, r := range sb.Network.AllowRules(sb.Agent) {
		it := item{value: r.Host, source: r.Source}
		if _, b, ok := BlockedLiteral(r.Host, sb.Network.BlockCIDRs); ok {
			it.exception = b.String()
		}
		allow = append(allow, it)
	}
	pl.set(FieldNetworkAdd, FieldNetworkRemove, "network.allow", allow, l.Network.Allow, recAllow, true, true, false)
	pl.set(FieldNetworkAdd, FieldNetworkRemove, "network.deny", plainItems(sb.Network.Deny), l.Network.Deny, rc.Network.Deny, true, false, true)
	pl.set(FieldHostPorts, FieldHostPorts, "network.hostPorts", plainItems(HostPortStrings(sb.Network.HostPorts)), l.Network.HostPorts, HostPortStrings(rc.Network.HostPorts), true, true, false)
	if !pl.exists() && defaultRanges(sb.Network.BlockCIDRs) {
		// A new sandbox with the default ranges: one line, not dozens.
		pl.add(Diff{Op: Add, Field: FieldNetworkAdd, Path: "network.blockCIDRs", After: fmt.Sprintf("the %d default ranges (every special-purpose range: private, loopback, link-local, …)", len(spec.DefaultBlockCIDRs))})
	} else {
		pl.set(FieldNetworkAdd, FieldNetworkRemove, "network.blockCIDRs", plainItems(prefixStrings(sb.Network.BlockCIDRs)), nil, prefixStrings(rc.Network.BlockCIDRs), false, false, true)
	}

	if l.Stopped {
		pl.add(Diff{Op: Change, Field: FieldStatus, Path: "status", Before: l.Status, After: "running"})
	}

	pl.declarationNotes()
	// A sandbox applied before sbx recorded owners becomes the first
	// workspace's that applies it: its record must be written again.
	legacy := live != nil && rec != nil && !own.owner.Known() && d.Owner.Known()
	switch {
	case own.adopt:
		pl.notes = append(pl.notes, fmt.Sprintf("adopting takes the sandbox over from %s: from now on it belongs to this workspace, and sbx refuses it there", own.owner))
	case legacy:
		pl.notes = append(pl.notes, fmt.Sprintf("sbx has no record of the workspace this sandbox belongs to (it was applied by an earlier sbx); applying makes it this workspace's: %s", d.Owner))
	}
	c := &SandboxChange{Sandbox: sb.Name, Reasons: []string{}, Changes: pl.diffs, Drift: pl.drift, Notes: pl.notes, Steps: []Step{},
		Widenings: widenings(d, caps, declared)}
	if c.Changes == nil {
		c.Changes = []Diff{}
	}
	if c.Drift == nil {
		c.Drift = []Diff{}
	}
	var record *Record
	if baseErr != nil {
		pl.errs = append(pl.errs, baseErr.Error())
	} else {
		r := *base
		r.Config.Resources = effectiveResources(r.Config.Resources, pl.caps.Defaults)
		record = &r
	}
	step := func(k StepKind, reason string) *Step {
		c.Steps = append(c.Steps, Step{Kind: k, Sandbox: sb.Name, Reason: reason})
		return &c.Steps[len(c.Steps)-1]
	}
	full := func(reason string) {
		step(StepCreate, reason).Record = record
		if !pl.caps.NetworkAtCreate {
			step(StepSetNetwork, "set the network rules of sandbox.yaml").Network = fullNetwork(sb)
		}
		if len(sb.Secrets) > 0 && pl.capOf(FieldSecrets).Mode != PerExec {
			step(StepSetSecrets, "set the secrets of sandbox.yaml").Secrets = &NameDelta{Set: sortedKeys(sb.Secrets)}
		}
		if sb.K8s().WarmPool > 0 && pl.capOf(FieldWarmPool).Mode == InPlace {
			step(StepSetWarmPool, "keep the warm pool of sandbox.yaml")
		}
	}
	var forcing []string
	for _, df := range pl.diffs {
		if df.ForcesReplacement {
			forcing = append(forcing, df.Path)
			if r := pl.capOf(df.Field).Reason; !contains(c.Reasons, r) {
				c.Reasons = append(c.Reasons, r)
			}
		}
	}
	if !pl.exists() || len(forcing) > 0 {
		c.FromCheckpoint = sb.Template.Checkpoint
	}
	switch {
	case !pl.exists():
		c.Action = ActionCreate
		c.Deleted = deleted
		reason := fmt.Sprintf("sandbox %q does not exist", sb.Name)
		if c.Deleted {
			reason = fmt.Sprintf("sandbox %q was deleted outside sbx", sb.Name)
		}
		if sb.Template.Build != nil {
			step(StepBuild, "the template is built from template.build")
		}
		full(reason)
	case len(forcing) > 0:
		c.Action = ActionReplace
		c.Adopt = rec == nil
		reason := strings.Join(dedupe(forcing), ", ") + " changed; " + strings.Join(c.Reasons, "; ")
		if sb.Template.Build != nil && (buildChanged || rec == nil) {
			step(StepBuild, "the template build context changed")
		}
		step(StepStop, reason)
		step(StepRemove, reason)
		full(reason)
		if pl.caps.ReplaceLoses != "" {
			c.Notes = append(c.Notes, "replacing also discards "+pl.caps.ReplaceLoses)
		}
	case len(pl.diffs) > 0 || rec == nil || len(l.Missing) > 0 || own.adopt || legacy:
		c.Action = ActionUpdate
		c.Adopt = rec == nil || own.adopt
		if record != nil && own.labelled.Known() && own.labelled != d.Owner {
			// The sandbox stays as it was made: its labels still name
			// the owner it was taken over from.
			r := *record
			from := own.labelled
			r.AdoptedFrom = &from
			record = &r
		}
		if len(l.Missing) > 0 {
			parts := sortedCopy(l.Missing)
			c.Notes = append(c.Notes, fmt.Sprintf("the sandbox's %s is gone; apply recreates it", strings.Join(parts, ", ")))
			step(StepRepair, strings.Join(parts, ", ")+" missing").Parts = parts
		}
		pl.updateSteps(step, len(l.Missing) > 0)
	default:
		c.Action, c.Widenings = ActionNoOp, nil
		return c, pl.errs
	}
	step(StepVerify, "check the sandbox runs")
	step(StepRecord, "remember what was applied").Record = record
	return c, pl.errs
}

// updateSteps adds the in-place steps, in their fixed order. After a
// repair on a driver whose parts carry the network rules they are made
// with, no network step is needed.
func (pl *planner) updateSteps(step func(StepKind, string) *Step, repaired bool) {
	of := func(match func(Diff) bool) (ds []Diff, reason string) {
		var rs []string
		for _, d := range pl.diffs {
			if match(d) {
				ds = append(ds, d)
				rs = append(rs, d.String())
			}
		}
		return ds, strings.Join(rs, "; ")
	}
	names := func(ds []Diff, prefix string) *NameDelta {
		nd := &NameDelta{}
		for _, d := range ds {
			n := strings.TrimPrefix(d.Path, prefix)
			if d.Op == Remove {
				nd.Unset = append(nd.Unset, n)
			} else {
				nd.Set = append(nd.Set, n)
			}
		}
		return nd
	}
	if ds, r := of(func(d Diff) bool { return d.Field == FieldEnv }); len(ds) > 0 && pl.capOf(FieldEnv).Mode != PerExec {
		step(StepSetEnv, r).Env = names(ds, "env.")
	}
	if ds, r := of(func(d Diff) bool { return d.Field == FieldResources || d.Field == FieldPids }); len(ds) > 0 {
		step(StepUpdateResources, r)
	}
	if ds, r := of(func(d Diff) bool { return d.Field == FieldPorts }); len(ds) > 0 {
		pd := &PortDelta{}
		for _, d := range ds {
			if d.Op == Add {
				pd.Publish = append(pd.Publish, findPort(pl.sb.Ports, d.After))
			} else {
				pd.Unpublish = append(pd.Unpublish, findPort(pl.knownPorts, d.Before))
			}
		}
		step(StepSetPorts, r).Ports = pd
	}
	// The proxy is put on its networks before it gets the policy whose
	// exceptions name them; a repair made it on them already.
	if ds, r := of(func(d Diff) bool { return d.Field == FieldDockerNetworks }); len(ds) > 0 && !repaired {
		step(StepJoinNetworks, r)
	}
	if ds, r := of(func(d Diff) bool {
		return d.Field == FieldNetworkAdd || d.Field == FieldNetworkRemove || d.Field == FieldHostPorts
	}); len(ds) > 0 && !(repaired && pl.caps.NetworkAtCreate) {
		nd := &NetworkDelta{}
		for _, d := range ds {
			add := d.Op == Add
			switch d.Path {
			case "network.policy":
				nd.Policy = d.After
			case "network.allow":
				appendTo(add, &nd.AllowAdd, &nd.AllowRemove, d)
			case "network.deny":
				appendTo(add, &nd.DenyAdd, &nd.DenyRemove, d)
			case "network.blockCIDRs":
				appendTo(add, &nd.BlockCIDRsAdd, &nd.BlockCIDRsRemove, d)
			case "network.hostPorts":
				appendTo(add, &nd.HostPortsAdd, &nd.HostPortsRemove, d)
			}
		}
		step(StepSetNetwork, r).Network = nd
	}
	if ds, r := of(func(d Diff) bool { return d.Field == FieldSecrets }); len(ds) > 0 && pl.capOf(FieldSecrets).Mode != PerExec {
		step(StepSetSecrets, r).Secrets = names(ds, "secrets.")
	}
	if ds, r := of(func(d Diff) bool { return d.Field == FieldWarmPool }); len(ds) > 0 {
		step(StepSetWarmPool, r)
	}
	// Last: a stopped sandbox's changes are made while it is stopped (a
	// stopped proxy loads the policy written for it when it starts).
	if ds, r := of(func(d Diff) bool { return d.Field == FieldStatus }); len(ds) > 0 {
		step(StepStart, r)
	}
}

func appendTo(add bool, adds, removes *[]string, d Diff) {
	if add {
		*adds = append(*adds, d.After)
	} else {
		*removes = append(*removes, d.Before)
	}
}

func fullNetwork(sb *spec.Spec) *NetworkDelta {
	nd := &NetworkDelta{Policy: sb.Network.Policy}
	for _, r := range sb.Network.AllowRules(sb.Agent) {
		nd.AllowAdd = append(nd.AllowAdd, r.Host)
	}
	nd.DenyAdd = sortedCopy(sb.Network.Deny)
	nd.BlockCIDRsAdd = sortedCopy(prefixStrings(sb.Network.BlockCIDRs))
	return nd
}

// add records a diff, applying the driver's mode for its field: an
// unsupported change is an error, a replacing change is marked.
func (pl *planner) add(d Diff) {
	cp := pl.capOf(d.Field)
	switch cp.Mode {
	case Ignored:
		return
	case Unsupported:
		top := d.Path
		if i := strings.IndexAny(top, ".["); i > 0 && d.Field != FieldRuntime {
			top = top[:i]
		}
		msg := fmt.Sprintf("sandbox %q: %s: %s", pl.sb.Name, top, cp.Reason)
		if !contains(pl.errs, msg) {
			pl.errs = append(pl.errs, msg)
		}
		return
	case Replace:
		if pl.live != nil && pl.rec == nil && !pl.readable(d.Field) {
			// Adopting: the backend cannot show this field and there is
			// no record, so replacing would be a guess that destroys what
			// the user asked sbx to keep. Assume it matches and say so.
			note := fmt.Sprintf("%s cannot be read back from the %s backend; adopting assumes the sandbox already has the values in sandbox.yaml", d.Field, pl.caps.Driver)
			if !contains(pl.notes, note) {
				pl.notes = append(pl.notes, note)
			}
			return
		}
		d.ForcesReplacement = pl.exists()
	}
	if d.Sensitive {
		d.Before, d.After = "", ""
	}
	pl.diffs = append(pl.diffs, d)
}

// exists reports whether the sandbox exists before the change: live, or
// declared by the other revision.
func (pl *planner) exists() bool {
	return pl.live != nil || (pl.declared && pl.rec != nil)
}

// liveRuntime is the sandbox's runtime as the file would name it: the
// backend's default reads as the file's name for it when the file names
// it, and as "" (the file names none) otherwise, so both spellings of the
// default converge.
func liveRuntime(desired string, l Live) string {
	if l.Runtime == "" && desired != "" && desired == l.DefaultRuntime {
		return desired
	}
	return l.Runtime
}

// capOf is the driver's row for f, under the sandbox's runtime when the
// driver's table has a row for it (Caps.ByRuntime).
func (pl *planner) capOf(f Field) Cap {
	if rows, ok := pl.caps.ByRuntime[pl.sb.Docker.Runtime]; ok {
		if c, ok := rows[f]; ok {
			return c
		}
	}
	return pl.caps.Of(f)
}

// readable reports whether f is compared with the live sandbox: the
// backend can read it back, and did in this observation.
func (pl *planner) readable(f Field) bool {
	return pl.capOf(f).Readable && pl.live != nil && !slices.Contains(pl.live.Unreported, f)
}

func (pl *planner) sensitive(path string) bool {
	for p := range pl.sb.Sensitive {
		if coversPath(p, path) {
			return true
		}
	}
	return pl.rec != nil && pl.rec.sensitive(path)
}

func opOf(before, after string) Op {
	switch {
	case before == "":
		return Add
	case after == "":
		return Remove
	}
	return Change
}

// scalar decides a single-valued field: live when readable, else against
// the record. A live value the record does not explain is drift.
func (pl *planner) scalar(f Field, path, dv, lv, rv string) {
	cp := pl.capOf(f)
	if cp.Mode == Ignored {
		return
	}
	sens := pl.sensitive(path)
	recRedacted := pl.rec != nil && pl.rec.sensitive(path)
	recIsDesired := pl.rec != nil && rv == dv
	if recRedacted {
		recIsDesired = pl.rec.Fingerprints[path] != "" && pl.rec.Fingerprints[path] == pl.d.Fingerprints[path]
	}
	// The values that let the sandbox reach more than before.
	widens := map[string]string{"network.policy": "allow", "kubernetes.egress": spec.EgressAdvisory}[path]
	if pl.readable(f) {
		if dv == lv {
			return
		}
		drift := false
		if pl.rec != nil {
			drift = rv != lv
			if recRedacted {
				drift = recIsDesired
			}
		}
		if drift {
			pl.drift = append(pl.drift, redacted(Diff{Op: opOf(rv, lv), Field: f, Path: path, Before: rv, After: lv, Sensitive: sens}))
		}
		pl.add(Diff{Op: opOf(lv, dv), Field: f, Path: path, Before: lv, After: dv, Sensitive: sens, Restores: drift,
			WidensEgress: widens != "" && dv == widens})
		return
	}
	if pl.rec == nil {
		if dv != "" {
			pl.add(Diff{Op: Add, Field: f, Path: path, After: dv, Sensitive: sens,
				WidensEgress: widens != "" && dv == widens && pl.exists()})
		}
		return
	}
	if recIsDesired {
		return
	}
	pl.add(Diff{Op: opOf(rv, dv), Field: f, Path: path, Before: rv, After: dv, Sensitive: sens,
		WidensEgress: widens != "" && dv == widens})
}

func redacted(d Diff) Diff {
	if d.Sensitive {
		d.Before, d.After = "", ""
	}
	return d
}

// item is one element of a set-valued field.
type item struct {
	value, source string
	sensitive     bool
	// exception is the blocked range an allowed IP literal is an
	// exception to (Diff.Exception).
	exception string
}

func plainItems(vs []string) []item {
	out := make([]item, len(vs))
	for i, v := range vs {
		out[i] = item{value: v}
	}
	return out
}

// set decides a set-valued field. Additions use fAdd's mode, removals
// fRemove's; widenAdd/widenRemove say which direction opens egress.
func (pl *planner) set(fAdd, fRemove Field, path string, desired []item, lv, rv []string, liveReadable, widenAdd, widenRemove bool) {
	cp := pl.capOf(fAdd)
	if cp.Mode == Ignored {
		return
	}
	readable := liveReadable && pl.readable(fAdd)
	var base []string
	switch {
	case readable:
		base = lv
	case pl.rec != nil:
		base = rv
	}
	recKnown := pl.rec != nil
	for _, v := range rv {
		if strings.HasPrefix(v, fingerprintPrefix) {
			recKnown = false
		}
	}
	inBase, inRec, inDesired := toSet(base), toSet(rv), map[string]bool{}
	var diffs []Diff
	for _, it := range desired {
		inDesired[it.value] = true
		if inBase[it.value] {
			continue
		}
		drift := readable && recKnown && inRec[it.value]
		if drift {
			pl.drift = append(pl.drift, redacted(Diff{Op: Remove, Field: fRemove, Path: path, Before: it.value, Sensitive: it.sensitive}))
		}
		diffs = append(diffs, Diff{Op: Add, Field: fAdd, Path: path, After: it.value, Source: it.source,
			Sensitive: it.sensitive, Restores: drift, WidensEgress: widenAdd && pl.exists(), Exception: it.exception})
	}
	for _, v := range sortedCopy(base) {
		if inDesired[v] {
			continue
		}
		sens := strings.HasPrefix(v, fingerprintPrefix)
		drift := readable && recKnown && !inRec[v]
		if drift {
			pl.drift = append(pl.drift, redacted(Diff{Op: Add, Field: fAdd, Path: path, After: v, Sensitive: sens}))
		}
		diffs = append(diffs, Diff{Op: Remove, Field: fRemove, Path: path, Before: v, Sensitive: sens,
			Restores: drift, WidensEgress: widenRemove})
	}
	sort.SliceStable(diffs, func(i, j int) bool { return diffValue(diffs[i]) < diffValue(diffs[j]) })
	for _, d := range diffs {
		pl.add(d)
	}
}

func diffValue(d Diff) string {
	if d.Op == Remove {
		return d.Before
	}
	return d.After
}

// env compares env with the record's fingerprints: no backend reads env
// back.
func (pl *planner) env() {
	if pl.capOf(FieldEnv).Mode == Ignored {
		return
	}
	var recEnv map[string]string
	if pl.rec != nil {
		recEnv = pl.rec.Config.Env
	}
	for _, k := range unionKeys(pl.sb.Env, recEnv) {
		path := "env." + k
		dv, inD := pl.sb.Env[k]
		rv, inR := recEnv[k]
		d := Diff{Field: FieldEnv, Path: path, Sensitive: pl.sensitive(path)}
		switch {
		case inD && !inR:
			d.Op, d.After = Add, dv
		case !inD && inR:
			d.Op, d.Before = Remove, rv
		default:
			same := pl.rec.Fingerprints[path] == pl.d.Fingerprints[path]
			if pl.rec.Fingerprints[path] == "" && !pl.rec.sensitive(path) {
				same = rv == dv
			}
			if same {
				continue
			}
			d.Op, d.Before, d.After = Change, rv, dv
		}
		pl.add(d)
	}
}

// services compares each service with the record: no backend reads a
// service's env back. A service is shown by what it runs; its env values
// are compared as env's are (by fingerprint where sensitive).
func (pl *planner) services() {
	if pl.capOf(FieldServices).Mode == Ignored {
		return
	}
	var rec map[string]spec.Service
	if pl.rec != nil {
		rec = pl.rec.Config.Services
	}
	diffRecorded(pl, FieldServices, "services.", pl.sb.Services, rec, false, ServiceString, func(path string, dv, rv spec.Service) bool {
		return ServiceString(dv) == ServiceString(rv) && pl.sameServiceEnv(path, dv.Env, rv.Env)
	})
}

// diffRecorded adds the differences, key by key, between a map of the
// file and the record's: each shown by show, unchanged where same says
// so. With sensitive, a key whose path is sensitive is shown changed
// without its values.
func diffRecorded[V any](pl *planner, field Field, prefix string, desired, recorded map[string]V, sensitive bool, show func(V) string, same func(path string, dv, rv V) bool) {
	for _, k := range unionKeys(desired, recorded) {
		path := prefix + k
		dv, inD := desired[k]
		rv, inR := recorded[k]
		d := Diff{Field: field, Path: path, Sensitive: sensitive && pl.sensitive(path)}
		switch {
		case inD && !inR:
			d.Op, d.After = Add, show(dv)
		case !inD && inR:
			d.Op, d.Before = Remove, show(rv)
		case same(path, dv, rv):
			continue
		case d.Sensitive:
			d.Op = Change
		default:
			d.Op, d.Before, d.After = Change, show(rv), show(dv)
		}
		pl.add(d)
	}
}

// sameServiceEnv reports whether a service's env is the record's: each
// sensitive value by its fingerprint, the others as written.
func (pl *planner) sameServiceEnv(path string, desired, recorded map[string]string) bool {
	if len(desired) != len(recorded) {
		return false
	}
	for k, v := range desired {
		p := path + ".env." + k
		rv, ok := recorded[k]
		switch {
		case !ok:
			return false
		case pl.sensitive(p):
			if pl.rec.Fingerprints[p] != pl.d.Fingerprints[p] {
				return false
			}
		case rv != v:
			return false
		}
	}
	return true
}

// ServiceString is a service as plans show it: what it runs and on which
// ports, its env by name only.
func ServiceString(s spec.Service) string {
	var ports []string
	for _, p := range s.Ports {
		ports = append(ports, strconv.Itoa(p))
	}
	out := "image " + s.Image + ", ports " + strings.Join(ports, ", ")
	if s.Dockerd {
		out += ", its dockerd the sandbox's Docker daemon"
	}
	if len(s.Command) > 0 {
		out += ", command " + quoteArgs(s.Command)
	}
	if s.Ready != nil {
		out += fmt.Sprintf(", ready when %s succeeds (within %s)", quoteArgs(s.Ready.Command), s.Ready.Timeout)
	}
	if len(s.Env) > 0 {
		out += ", env " + strings.Join(sortedKeys(s.Env), " ")
	}
	if s.Egress {
		out += ", egress through the sandbox's proxy"
	}
	return out
}

// secrets compares where each secret's value comes from (an environment
// variable or a host command) and where it can go with the record. Values
// are never compared: no backend stores them, each exec gets them afresh.
func (pl *planner) secrets() {
	var recSecrets map[string]spec.Secret
	if pl.rec != nil {
		recSecrets = pl.rec.Config.Secrets
	}
	diffRecorded(pl, FieldSecrets, "secrets.", pl.sb.Secrets, recSecrets, true, pl.secretShown, func(path string, dv, rv spec.Secret) bool {
		if pl.sensitive(path) {
			return fingerprintsUnder(pl.rec.Fingerprints, path) == fingerprintsUnder(pl.d.Fingerprints, path)
		}
		return pl.secretShown(dv) == pl.secretShown(rv)
	})
}

// SecretSource says where a secret's value comes from, as plans show it:
// "env GITHUB_TOKEN" or "command gh auth token".
func SecretSource(s spec.Secret) string {
	if len(s.Command) > 0 {
		return "command " + quoteArgs(s.Command)
	}
	if s.File != "" {
		return "file " + s.File + " at " + s.Path
	}
	return "env " + s.Env
}

// secretShown is a secret as a plan shows it: where its value comes from
// and where it can go. A secret that names its hosts goes to them only,
// the way the backend's capability row says (sbx's egress proxy, Docker's
// own); one without, anywhere the agent sends it.
func (pl *planner) secretShown(s spec.Secret) string {
	if len(s.Hosts) == 0 {
		return SecretSource(s) + "; readable by the agent"
	}
	f := FieldSecretHosts
	if s.File != "" {
		f = FieldSecretFiles
	}
	return SecretSource(s) + "; sent only to " + strings.Join(s.Hosts, ", ") + ": " + pl.capOf(f).Reason
}

// quoteArgs joins argv as a shell would read it back.
func quoteArgs(argv []string) string {
	q := make([]string, len(argv))
	for i, a := range argv {
		if a != "" && strings.IndexFunc(a, func(r rune) bool {
			return !(r == '-' || r == '_' || r == '.' || r == '/' || r == ':' || r == '=' || r == '@' || r == ',' || r == '+' ||
				('a' <= r && r <= 'z') || ('A' <= r && r <= 'Z') || ('0' <= r && r <= '9'))
		}) < 0 {
			q[i] = a
			continue
		}
		q[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	return strings.Join(q, " ")
}

// declarationNotes says which of the sandbox's declaration files the
// sandbox itself could have written since the last apply: on backends that
// cannot keep them read-only inside the sandbox, that is how a changed
// file is noticed.
func (pl *planner) declarationNotes() {
	if pl.rec == nil || pl.declared || (pl.caps.Protects && pl.rec.Config.Protect && pl.sb.Protect) {
		return
	}
	was := map[string]string{}
	for _, f := range pl.rec.Config.Declarations {
		was[f.Path] = f.SHA256
	}
	for _, f := range pl.sb.Declarations {
		if was[f.Path] == f.SHA256 || !(pl.sb.Writable(f.Path) || pl.rec.Config.Writable(f.Path)) {
			continue
		}
		what := "changed"
		if _, ok := was[f.Path]; !ok {
			what = "appeared"
		}
		pl.notes = append(pl.notes, fmt.Sprintf("%s %s since the last apply, and the sandbox can write it: review what it changes (each widening is listed)", displayPath(pl.sb, f.Path), what))
	}
}

// displayPath names a file as the user named it, else by its path.
func displayPath(sb *spec.Spec, abs string) string {
	for _, o := range sb.Origins {
		if o.Path == abs {
			return o.File
		}
	}
	return abs
}

// fingerprintsUnder joins the fingerprints of path and of the fields
// inside it, so two redacted values compare.
func fingerprintsUnder(fps map[string]string, path string) string {
	var keys []string
	for k := range fps {
		if coversPath(path, k) && (k == path || strings.HasPrefix(k, path+".") || strings.HasPrefix(k, path+"[")) {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		b.WriteString(k + "=" + fps[k] + ";")
	}
	return b.String()
}

// defaultRanges reports whether ps are exactly spec.DefaultBlockCIDRs.
func defaultRanges(ps []netip.Prefix) bool {
	got := prefixStrings(ps)
	if len(got) != len(spec.DefaultBlockCIDRs) {
		return false
	}
	want := map[string]bool{}
	for _, c := range spec.DefaultBlockCIDRs {
		want[netip.MustParsePrefix(c).String()] = true
	}
	for _, g := range got {
		if !want[g] {
			return false
		}
	}
	return true
}

func boolString(b bool) string { return strconv.FormatBool(b) }

// effectiveResources fills in the driver's defaults where the file sets
// no limit.
func effectiveResources(r, def spec.Resources) spec.Resources {
	if r.CPUs == 0 {
		r.CPUs = def.CPUs
	}
	if r.Memory == 0 {
		r.Memory = def.Memory
	}
	if r.Pids == 0 {
		r.Pids = def.Pids
	}
	return r
}

func pidsString(n int) string {
	if n == 0 {
		return ""
	}
	return strconv.Itoa(n)
}

// poolString is a warm pool's size as plans show it ("" for none).
func poolString(n int) string { return pidsString(n) }

func unionKeys[V any](a, b map[string]V) []string {
	seen := map[string]bool{}
	var keys []string
	for _, m := range []map[string]V{a, b} {
		for k := range m {
			if !seen[k] {
				seen[k] = true
				keys = append(keys, k)
			}
		}
	}
	sort.Strings(keys)
	return keys
}

func sortedKeys[V any](m map[string]V) []string {
	return unionKeys(m, nil)
}

func toSet(vs []string) map[string]bool {
	s := map[string]bool{}
	for _, v := range vs {
		s[v] = true
	}
	return s
}

func sortedCopy(vs []string) []string {
	out := append([]string(nil), vs...)
	sort.Strings(out)
	return out
}

func contains(vs []string, v string) bool {
	for _, x := range vs {
		if x == v {
			return true
		}
	}
	return false
}

func dedupe(vs []string) []string {
	var out []string
	for _, v := range vs {
		if !contains(out, v) {
			out = append(out, v)
		}
	}
	return out
}

func workspaceString(w spec.Workspace) string {
	if w.ReadOnly && w.Path != "" {
		return w.Path + ":ro"
	}
	return w.Path
}

func mountString(m spec.Mount) string {
	s := m.Source + ":" + m.Target
	if m.ReadOnly {
		s += ":ro"
	}
	return s
}

func mountStrings(ms []spec.Mount) []string {
	var out []string
	for _, m := range ms {
		out = append(out, mountString(m))
	}
	return out
}

func mountItems(sb *spec.Spec) []item {
	var out []item
	for i, m := range sb.Mounts {
		out = append(out, item{value: mountString(m), sensitive: sensitiveIn(sb, fmt.Sprintf("mounts[%d]", i))})
	}
	return out
}

// sensitiveIn reports whether a desired path is sensitive.
func sensitiveIn(sb *spec.Spec, path string) bool {
	for p := range sb.Sensitive {
		if coversPath(p, path) {
			return true
		}
	}
	return false
}

// PortString formats a port as docker run -p does: [ip:][hostPort:]port/proto.
func PortString(p spec.Port) string {
	s := ""
	if p.HostIP != "" {
		s = p.HostIP + ":"
	}
	if p.HostPort != 0 {
		s += strconv.Itoa(p.HostPort) + ":"
	} else if p.HostIP != "" {
		s += ":"
	}
	proto := p.Protocol
	if proto == "" {
		proto = "tcp"
	}
	return s + strconv.Itoa(p.ContainerPort) + "/" + proto
}

func portStrings(ps []spec.Port) []string {
	var out []string
	for _, p := range ps {
		out = append(out, PortString(p))
	}
	return out
}

func portItems(sb *spec.Spec) []item {
	var out []item
	for i, p := range sb.Ports {
		out = append(out, item{value: PortString(p), sensitive: sensitiveIn(sb, fmt.Sprintf("ports[%d]", i))})
	}
	return out
}

func findPort(ps []spec.Port, s string) spec.Port {
	for _, p := range ps {
		if PortString(p) == s {
			return p
		}
	}
	return spec.Port{}
}

// normalisePorts forgets the host port the OS picked for a live port whose
// desired or last-applied host port is "any" (0), so a fresh port on each
// start is no change, and removing such a port is no drift.
func normalisePorts(desired, live []spec.Port) []spec.Port {
	out := append([]spec.Port(nil), live...)
	for i, l := range out {
		for _, d := range desired {
			if d.HostPort == 0 && d.ContainerPort == l.ContainerPort && d.Protocol == l.Protocol &&
				(d.HostIP == "" || d.HostIP == l.HostIP) {
				out[i].HostPort, out[i].HostIP = 0, d.HostIP
			}
		}
	}
	return out
}

// HostPortStrings are network.hostPorts as the plan and Live name them.
func HostPortStrings(ps []int) []string {
	var out []string
	for _, p := range ps {
		out = append(out, strconv.Itoa(p))
	}
	return out
}

func cpusString(c float64) string {
	if c == 0 {
		return ""
	}
	return strconv.FormatFloat(c, 'g', -1, 64)
}

func memoryString(m int64) string {
	switch {
	case m == 0:
		return ""
	case m%(1<<30) == 0:
		return strconv.FormatInt(m>>30, 10) + "g"
	case m%(1<<20) == 0:
		return strconv.FormatInt(m>>20, 10) + "m"
	}
	return strconv.FormatInt(m, 10)
}

func prefixStrings[T fmt.Stringer](ps []T) []string {
	var out []string
	for _, p := range ps {
		out = append(out, p.String())
	}
	return out
}

// observedDigest summarises what the plan was made from, so a saved plan
// can tell that the live sandbox moved since.
func observedDigest(names []string, live map[string]*Live, records map[string]*Record) string {
	type obs struct {
		Live   *Live   `json:"live"`
		Record *Record `json:"record"`
	}
	all := map[string]obs{}
	for _, n := range names {
		l := existing(live[n])
		if l != nil {
			c := *l
			c.Mounts = append([]spec.Mount(nil), c.Mounts...)
			sort.Slice(c.Mounts, func(i, j int) bool { return mountString(c.Mounts[i]) < mountString(c.Mounts[j]) })
			c.Ports = append([]spec.Port(nil), c.Ports...)
			sort.Slice(c.Ports, func(i, j int) bool { return PortString(c.Ports[i]) < PortString(c.Ports[j]) })
			c.Network.Allow = sortedCopy(c.Network.Allow)
			c.Network.Deny = sortedCopy(c.Network.Deny)
			c.Network.BlockCIDRs = sortedCopy(c.Network.BlockCIDRs)
			l = &c
		}
		all[n] = obs{Live: l, Record: records[n]}
	}
	return digest(all)
}

// desiredDigest is what Plan records as the digest of ds (Changes.Desired).
func desiredDigest(driver string, ds []Desired) string {
	all := map[string]*Record{}
	for _, d := range ds {
		r, err := newRecord(driver, spec.Resources{}, d)
		if err != nil {
			continue
		}
		all[d.Spec.Name] = r
	}
	return digest(all)
}

func digest(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return ""
	}
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}
