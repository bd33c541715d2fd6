package reconcile

import "fmt"

// Owner is whom a sandbox belongs to: the workspace sbx applied it from
// and the host user who applied it. Sandbox names are global to a backend
// (one Docker daemon, one namespace), so two checkouts of one repository,
// or two users of one daemon, declare the same name; the owner tells
// their sandboxes apart.
//
// The workspace is the absolute, cleaned directory of the base sandbox
// file (spec.Spec.Dir) as sbx was invoked, not the file's workspace:
// field: that field is written by a layer the agent can write
// (sandbox.local.yaml), the directory is where the user ran sbx. A git
// worktree, a second clone, is another directory and so another
// workspace. Symbolic links are not resolved: the path is the one the
// user chose.
type Owner struct {
	Workspace string `json:"workspace,omitempty"`
	User      string `json:"user,omitempty"`
}

// Known reports whether sbx knows the owner: records and labels written
// before sbx recorded owners have none.
func (o Owner) Known() bool { return o.Workspace != "" }

// String is "WORKSPACE (user USER)".
func (o Owner) String() string {
	if o.User == "" {
		return o.Workspace
	}
	return fmt.Sprintf("%s (user %s)", o.Workspace, o.User)
}

// OwnerOf is whom a sandbox belongs to, from what sbx knows of it: the
// record the backend keeps with the sandbox (its labels, set by sbx when
// it created the sandbox and not writable from inside it) and this
// machine's record (the state directory). The state directory's record
// counts when it agrees with the backend's, or when it says which owner
// it took the sandbox over from (an explicit --adopt of a sandbox whose
// labels cannot change in place); otherwise the backend's labels count,
// since the sandbox they describe is the one that exists. A zero Owner:
// nobody recorded one (a sandbox applied before sbx recorded owners, or
// one sbx did not create).
func OwnerOf(stored *Record, live *Live) Owner {
	var labelled Owner
	if l := existing(live); l != nil && l.Record != nil {
		labelled = l.Record.Owner
	}
	return OwnerFrom(stored, labelled)
}

// OwnerFrom is OwnerOf with the owner the backend's labels name (zero
// without) in place of the observed sandbox: for a listing, which
// observes nothing.
func OwnerFrom(stored *Record, labelled Owner) Owner {
	if stored == nil || !stored.Owner.Known() {
		return labelled
	}
	if !labelled.Known() || labelled == stored.Owner || (stored.AdoptedFrom != nil && *stored.AdoptedFrom == labelled) {
		return stored.Owner
	}
	return labelled
}

// foreign is the refusal of a sandbox that belongs to another workspace
// than here, or "" when it is here's (or nobody's).
func foreign(name string, owner, here Owner) string {
	if !owner.Known() || !here.Known() || owner == here {
		return ""
	}
	return fmt.Sprintf("sandbox %q belongs to %s, not to this workspace (%s): give this workspace's sandbox another name (name: in %s), destroy it there, or pass --adopt to take it over",
		name, owner, here.Workspace, "sandbox.local.yaml")
}
