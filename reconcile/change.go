package reconcile

import (
	"fmt"
	"sort"

	"github.com/sbxhq/sbx/internal/par"
	"github.com/sbxhq/sbx/spec"
)

// KindChange is the kind of a plan made by PlanChange: what a change to
// the files does to the sandboxes they declare, with no backend asked.
const KindChange = "change"

// PlanChange compares the sandboxes that two revisions of the files declare
// (base, before the change; head, after it) under a driver's capabilities,
// with the planner that compares files with a live sandbox: every
// sandbox of head is planned against base's declaration of the same name as
// if that were what was last applied, and nothing is observed. A sandbox
// base does not declare is created; one head does not declare is
// destroyed. Widenings are measured from base's declaration, and for a
// sandbox new in head from the defaults without the agent's own hosts, so
// that all of its egress, mounts, secrets and host values are listed. The
// plan has no steps (no backend made it) and cannot be applied. It is
// pure: same input, same plan.
func PlanChange(base, head []Desired, caps Caps, opts Options) *Changes {
	p := &Changes{
		FormatVersion: FormatVersion, Kind: KindChange, Driver: caps.Driver, DriverVersion: opts.DriverVersion,
		Errors: []string{}, specs: map[string]*spec.Spec{},
	}
	before := map[string]Desired{}
	for _, d := range base {
		before[d.Spec.Name] = d
	}
	ds := append([]Desired(nil), head...)
	sort.Slice(ds, func(i, j int) bool { return ds[i].Spec.Name < ds[j].Spec.Name })
	type planned struct {
		base, head *Record
		change     *SandboxChange
		errs       []string
	}
	res := make([]planned, len(ds))
	par.Each(len(ds), func(i int) {
		d, r := ds[i], &res[i]
		name := d.Spec.Name
		head, headErr := newRecord(caps.Driver, spec.Resources{}, d)
		if headErr == nil {
			r.head = head
		}
		if b, ok := before[name]; ok {
			rec, err := newRecord(caps.Driver, caps.Defaults, b)
			if err != nil {
				r.errs = []string{fmt.Sprintf("base revision: %v", err)}
				return
			}
			r.base, d.Approved = rec, rec
		} else {
			def := DefaultSpec(d.Spec, caps)
			def.Network.AgentHosts = false
			d.Approved = &Record{Config: *def}
		}
		for _, pr := range Check(d.Spec, caps) {
			r.errs = append(r.errs, fmt.Sprintf("sandbox %q: %s: %s", name, pr.Path, pr.Message))
		}
		if len(r.errs) > 0 {
			return
		}
		r.change, r.errs = planOne(d, nil, r.base, ownership{}, caps, head, headErr, true)
		r.change.Steps = []Step{}
	})
	bases, heads := map[string]*Record{}, map[string]*Record{}
	for i, d := range ds {
		p.specs[d.Spec.Name] = d.Spec
		if res[i].head != nil {
			heads[d.Spec.Name] = res[i].head
		}
		if res[i].base != nil {
			bases[d.Spec.Name] = res[i].base
		}
		if res[i].change != nil {
			p.Sandboxes = append(p.Sandboxes, res[i].change)
		}
		p.Errors = append(p.Errors, res[i].errs...)
	}
	var gone []string
	for name := range before {
		if _, ok := p.specs[name]; !ok {
			gone = append(gone, name)
		}
	}
	sort.Strings(gone)
	for _, name := range gone {
		rec, err := newRecord(caps.Driver, caps.Defaults, before[name])
		if err != nil {
			p.Errors = append(p.Errors, fmt.Sprintf("base revision: %v", err))
			continue
		}
		bases[name] = rec
		p.Sandboxes = append(p.Sandboxes, &SandboxChange{Sandbox: name, Action: ActionDestroy, Reasons: []string{},
			Changes: []Diff{}, Drift: []Diff{}, Steps: []Step{}})
	}
	sort.SliceStable(p.Sandboxes, func(i, j int) bool { return p.Sandboxes[i].Sandbox < p.Sandboxes[j].Sandbox })
	p.digests = func() {
		p.Observed = digest(bases)
		p.Desired = digest(heads)
	}
	return p
}
