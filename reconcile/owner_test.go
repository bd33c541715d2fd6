package reconcile

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var (
	ownerA = Owner{Workspace: "/home/a/repo", User: "a"}
	ownerB = Owner{Workspace: "/home/a/repo-worktree", User: "a"}
	ownerC = Owner{Workspace: "/home/c/repo", User: "c"}
)

// ownedRecord is the record sb's sandbox gets when applied by owner.
func ownedRecord(t *testing.T, caps Caps, owner Owner) *Record {
	t.Helper()
	d := desiredOf(t, baseSpec())
	d.Owner = owner
	r, err := newRecord(caps.Driver, caps.Defaults, d)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestOwnerOf(t *testing.T) {
	caps := sbxCaps()
	labelled := func(o Owner) *Live {
		l := liveOf(baseSpec(), caps)
		l.Managed, l.Record = true, ownedRecord(t, caps, o)
		return l
	}
	adopted := ownedRecord(t, caps, ownerB)
	adopted.AdoptedFrom = &ownerA
	tests := []struct {
		name   string
		stored *Record
		live   *Live
		want   Owner
	}{
		{"nothing known", nil, nil, Owner{}},
		{"a record written before owners", recordOf(t, caps, baseSpec()), liveOf(baseSpec(), caps), Owner{}},
		{"only this machine's record (no labels: Docker's sbx)", ownedRecord(t, caps, ownerA), liveOf(baseSpec(), caps), ownerA},
		{"only the labels (another machine's or user's)", nil, labelled(ownerC), ownerC},
		{"record and labels agree", ownedRecord(t, caps, ownerA), labelled(ownerA), ownerA},
		// Another user made the sandbox that exists after this machine's
		// record was written: the labels describe the sandbox there is.
		{"labels of another owner beat a stale record", ownedRecord(t, caps, ownerB), labelled(ownerC), ownerC},
		{"an adoption the labels cannot show", adopted, labelled(ownerA), ownerB},
		{"an adoption of another sandbox than the labelled one", adopted, labelled(ownerC), ownerC},
		{"labels of a sandbox that no longer exists do not count", ownedRecord(t, caps, ownerA), &Live{Name: "api", Record: ownedRecord(t, caps, ownerC)}, ownerA},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, OwnerOf(tt.stored, tt.live)); diff != "" {
				t.Errorf("OwnerOf (-want +got):\n%s", diff)
			}
		})
	}
}

// TestPlanRefusesAnotherWorkspace: checkout B declares the sandbox
// checkout A applied. Plan and destroy refuse it, saying whose it is and
// what to do, unless --adopt takes it over, which the plan says and the
// record keeps.
func TestPlanRefusesAnotherWorkspace(t *testing.T) {
	caps := sbxCaps()
	sb := baseSpec()
	live := map[string]*Live{"api": liveOf(sb, caps)}
	records := map[string]*Record{"api": ownedRecord(t, caps, ownerA)}
	inB := desiredOf(t, sb)
	inB.Owner = ownerB

	p := Plan([]Desired{inB}, live, records, caps, Options{})
	want := `sandbox "api" belongs to /home/a/repo (user a), not to this workspace (/home/a/repo-worktree): give this workspace's sandbox another name (name: in sandbox.local.yaml), destroy it there, or pass --adopt to take it over`
	if diff := cmp.Diff([]string{want}, p.Errors); diff != "" {
		t.Errorf("plan errors (-want +got):\n%s", diff)
	}
	if len(p.Sandboxes) != 0 {
		t.Errorf("a refused sandbox is planned: %+v", p.Sandboxes)
	}
	d := PlanDestroy([]string{"api"}, live, records, caps, Options{Owners: map[string]Owner{"api": ownerB}})
	if diff := cmp.Diff([]string{want}, d.Errors); diff != "" {
		t.Errorf("destroy errors (-want +got):\n%s", diff)
	}
	// Even when the sandbox is gone, its record is A's: B does not take
	// the name over silently.
	if p := Plan([]Desired{inB}, map[string]*Live{}, records, caps, Options{}); len(p.Errors) != 1 {
		t.Errorf("plan over another workspace's record of a deleted sandbox: %v", p.Errors)
	}

	// From A itself, nothing to do.
	inA := desiredOf(t, sb)
	inA.Owner = ownerA
	if p := Plan([]Desired{inA}, live, records, caps, Options{}); !p.Empty() {
		t.Errorf("plan in the owner's workspace is not empty: %v %+v", p.Errors, p.Sandboxes)
	}
	if d := PlanDestroy([]string{"api"}, live, records, caps, Options{Owners: map[string]Owner{"api": ownerA}}); len(d.Errors) != 0 || len(d.Sandboxes) != 1 || d.Sandboxes[0].Action != ActionDestroy {
		t.Errorf("destroy in the owner's workspace: %v %+v", d.Errors, d.Sandboxes)
	}

	// --adopt takes it over: an update with the record as the only step
	// besides the check, saying from whom.
	p = Plan([]Desired{inB}, live, records, caps, Options{Adopt: true})
	if len(p.Errors) != 0 || len(p.Sandboxes) != 1 {
		t.Fatalf("adopt: %v %+v", p.Errors, p.Sandboxes)
	}
	c := p.Sandboxes[0]
	if c.Action != ActionUpdate || !c.Adopt || !p.Adopts() {
		t.Errorf("adopt: action %s, adopt %v", c.Action, c.Adopt)
	}
	if !strings.Contains(strings.Join(c.Notes, "\n"), "takes the sandbox over from /home/a/repo (user a)") {
		t.Errorf("adopt notes: %q", c.Notes)
	}
	rec := c.Steps[len(c.Steps)-1]
	if rec.Kind != StepRecord || rec.Record.Owner != ownerB || rec.Record.AdoptedFrom != nil {
		t.Errorf("adopt's last step: %+v", rec)
	}
	if d := PlanDestroy([]string{"api"}, live, records, caps, Options{Adopt: true, Owners: map[string]Owner{"api": ownerB}}); len(d.Errors) != 0 {
		t.Errorf("destroy --adopt: %v", d.Errors)
	}
}

// TestAdoptKeepsLabelledOwner: on a backend whose labels cannot change in
// place, the adopting record says whom it took the sandbox from, so that
// the next plan in the adopting workspace needs no --adopt and the old
// workspace is refused.
func TestAdoptKeepsLabelledOwner(t *testing.T) {
	caps := sbxCaps()
	sb := baseSpec()
	l := liveOf(sb, caps)
	l.Managed, l.Record = true, ownedRecord(t, caps, ownerA)
	live := map[string]*Live{"api": l}
	inB := desiredOf(t, sb)
	inB.Owner = ownerB
	p := Plan([]Desired{inB}, live, map[string]*Record{"api": l.Record}, caps, Options{Adopt: true})
	if len(p.Errors) != 0 || len(p.Sandboxes) != 1 {
		t.Fatalf("adopt: %v %+v", p.Errors, p.Sandboxes)
	}
	steps := p.Sandboxes[0].Steps
	got := steps[len(steps)-1].Record
	if got.Owner != ownerB || got.AdoptedFrom == nil || *got.AdoptedFrom != ownerA {
		t.Fatalf("adopting record: owner %v, adopted from %v", got.Owner, got.AdoptedFrom)
	}
	records := map[string]*Record{"api": got}
	if p := Plan([]Desired{inB}, live, records, caps, Options{}); !p.Empty() {
		t.Errorf("plan after adopting: %v %+v", p.Errors, p.Sandboxes)
	}
	inA := desiredOf(t, sb)
	inA.Owner = ownerA
	if p := Plan([]Desired{inA}, live, records, caps, Options{}); len(p.Errors) != 1 || !strings.Contains(p.Errors[0], "belongs to /home/a/repo-worktree (user a)") {
		t.Errorf("plan in the old workspace after the adoption: %v", p.Errors)
	}
}

// TestLegacyOwnerClaimed: a sandbox applied by an sbx that recorded no
// owner becomes the first workspace's that applies it: the plan says so
// and writes the record again; afterwards another workspace is refused.
func TestLegacyOwnerClaimed(t *testing.T) {
	caps := sbxCaps()
	sb := baseSpec()
	live := map[string]*Live{"api": liveOf(sb, caps)}
	legacy := recordOf(t, caps, sb)
	if legacy.Owner.Known() {
		t.Fatal("a record of a Desired without owner has one")
	}
	inA := desiredOf(t, sb)
	inA.Owner = ownerA
	p := Plan([]Desired{inA}, live, map[string]*Record{"api": legacy}, caps, Options{})
	if len(p.Errors) != 0 || len(p.Sandboxes) != 1 {
		t.Fatalf("legacy: %v %+v", p.Errors, p.Sandboxes)
	}
	c := p.Sandboxes[0]
	if c.Action != ActionUpdate || c.Adopt {
		t.Errorf("legacy: action %s, adopt %v; want an update that is no adoption", c.Action, c.Adopt)
	}
	if len(c.Notes) == 0 || !strings.Contains(c.Notes[0], "applying makes it this workspace's: /home/a/repo (user a)") {
		t.Errorf("legacy notes: %q", c.Notes)
	}
	last := c.Steps[len(c.Steps)-1]
	if last.Kind != StepRecord || last.Record.Owner != ownerA {
		t.Fatalf("legacy's last step: %+v", last)
	}
	claimed := map[string]*Record{"api": last.Record}
	if p := Plan([]Desired{inA}, live, claimed, caps, Options{}); !p.Empty() {
		t.Errorf("plan after the claim: %v %+v", p.Errors, p.Sandboxes)
	}
	inB := desiredOf(t, sb)
	inB.Owner = ownerB
	if p := Plan([]Desired{inB}, live, claimed, caps, Options{}); len(p.Errors) != 1 {
		t.Errorf("another workspace after the claim: %v", p.Errors)
	}
}
