package session

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/sbxhq/sbx/spec"
	"github.com/sbxhq/sbx/state"

	"github.com/sbxhq/sbx/driver"
	"github.com/sbxhq/sbx/reconcile"
)

// ListFormatVersion is the version of the `sbx ls --json` document
// (docs/ls-json.md).
const ListFormatVersion = "1"

// Listing is what sbx ls reports: every sandbox sbx manages on this
// machine, on every backend it can reach.
type Listing struct {
	FormatVersion string   `json:"format_version"`
	Sandboxes     []Listed `json:"sandboxes"`
	// Errors are backends or files sbx could not read, each once.
	Errors []string `json:"errors"`
	// Others counts other users' sandboxes left out (without --all).
	Others int `json:"others,omitempty"`
}

// owned fills in whom the sandbox belongs to, and whether here.
func (r *Listed) owned(o reconcile.Owner, here string) {
	r.Workspace, r.User = o.Workspace, o.User
	r.Here = here != "" && o.Workspace == here
}

// Listed is one managed sandbox.
type Listed struct {
	Name   string `json:"name"`
	Driver string `json:"driver"`
	// Workspace and User are whom the sandbox belongs to
	// (reconcile.Owner), absent when sbx recorded no owner for it.
	Workspace string `json:"workspace,omitempty"`
	User      string `json:"user,omitempty"`
	// Here is set for the sandboxes of the workspace sbx ls runs in.
	Here bool `json:"here,omitempty"`
	// File is the sandbox file that declared it when it was last
	// applied (absolute), "" when sbx has no record of it.
	File   string `json:"file,omitempty"`
	Exists bool   `json:"exists"`
	// Status is the backend's word: running, stopped, exited…
	Status string `json:"status,omitempty"`
	// State is in-sync, changes-pending, drifted or absent (as sbx status
	// says), undeclared (the file no longer declares it), unknown (its
	// file or backend could not be read; Detail says why), or other-user
	// (another user's, listed with --all by what the backend's listing
	// says of it only: name, status, owner).
	State   string `json:"state"`
	Pending int    `json:"pending_changes"`
	Detail  string `json:"detail,omitempty"`
}

// ListOptions say where to look.
type ListOptions struct {
	Env      driver.Env
	StateDir state.Dir
	// Driver limits the listing to one driver ("" for all).
	Driver string
	// User is whose sandboxes are listed ("" is HostUser()); All lists
	// other users' too, by name, status and owner only.
	User string
	All  bool
	// Here is the workspace sbx ls runs in (reconcile.Owner.Workspace),
	// "" when it runs in none: its sandboxes are marked.
	Here string
	// HostValue hears every value the listed sandboxes' files read from
	// the host environment (spec.Options.HostValue), so that the caller
	// can keep them out of what it prints.
	HostValue func(spec.HostValue)
}

// List finds every sandbox sbx manages: those with a record in the state
// directory, per driver, and those a backend marks as sbx's itself (the
// docker driver's labels). Each is compared with the file it was applied
// from, as sbx status does, so the listing says whether it is in sync. A
// backend that cannot be reached is left out unless sbx has records on
// it, which are then listed as unknown. Like plan, it runs no host
// command and changes nothing.
//
// A sandbox is the current user's when its owner (reconcile.OwnerOf of
// this machine's record and the backend's labels) names the user, or,
// with no owner recorded, when this user's state directory has a record
// of it. Others' sandboxes are left out unless opts.All; even then sbx
// neither observes them nor reads their files: what the backend's
// listing says (name, status, owner) is all it shows. Others counts them.
func List(ctx context.Context, opts ListOptions) (*Listing, error) {
	out := &Listing{FormatVersion: ListFormatVersion, Sandboxes: []Listed{}, Errors: []string{}}
	if opts.User == "" {
		opts.User = HostUser()
	}
	store, err := reconcile.OpenStore(opts.StateDir)
	if err != nil {
		return nil, err
	}
	for _, d := range Drivers {
		if opts.Driver != "" && d.Name != opts.Driver {
			continue
		}
		names, err := store.Names(d.Name)
		if err != nil {
			return nil, err
		}
		chosen, err := Choose(ctx, opts.Env, opts.StateDir, d.Name)
		if err != nil {
			if len(names) > 0 || opts.Driver != "" {
				out.Errors = append(out.Errors, err.Error())
			}
			for _, n := range names {
				row := Listed{Name: n, Driver: d.Name, State: "unknown", Detail: "the backend cannot be reached"}
				if r, err := store.Get(d.Name, n); err == nil && r != nil {
					row.File = declaredIn(r)
					row.owned(r.Owner, opts.Here)
				}
				out.Sandboxes = append(out.Sandboxes, row)
			}
			continue
		}
		rows, others, errs := listDriver(ctx, opts, store, chosen, names)
		out.Sandboxes = append(out.Sandboxes, rows...)
		out.Errors = append(out.Errors, errs...)
		out.Others += others
	}
	sort.SliceStable(out.Sandboxes, func(i, j int) bool {
		a, b := out.Sandboxes[i], out.Sandboxes[j]
		if a.Driver != b.Driver {
			return a.Driver < b.Driver
		}
		return a.Name < b.Name
	})
	return out, nil
}

// declaredIn is the base file of a record's sandbox, absolute.
func declaredIn(r *reconcile.Record) string {
	if len(r.Config.Declarations) > 0 {
		return r.Config.Declarations[0].Path
	}
	if len(r.Config.Files) > 0 {
		return r.Config.Files[0]
	}
	return ""
}

// listDriver lists one reachable backend's managed sandboxes: the user's,
// observed and compared with their files, and, with opts.All, others' as
// the backend's listing gave them; without, how many others there are.
func listDriver(ctx context.Context, opts ListOptions, store *reconcile.Store, chosen Chosen, recorded []string) ([]Listed, int, []string) {
	var errs []string
	name := chosen.Entry.Name
	stored := map[string]*reconcile.Record{}
	for _, n := range recorded {
		rec, err := store.Get(name, n)
		if err != nil {
			errs = append(errs, err.Error())
		}
		stored[n] = rec
	}
	names := map[string]bool{}
	for _, n := range recorded {
		names[n] = true
	}
	var rows []Listed
	others := 0
	if l, ok := chosen.Backend.(driver.Lister); ok {
		// A listing that fails (a namespace the user may not list) is
		// said, and the sandboxes this machine has records of are still
		// listed.
		managed, err := l.Managed(ctx)
		if err != nil {
			errs = append(errs, fmt.Sprintf("driver %s: listing the sandboxes sbx made: %v", name, err))
		}
		for _, m := range managed {
			owner := reconcile.OwnerFrom(stored[m.Name], m.Owner)
			mine := owner.User == opts.User || (!owner.Known() && stored[m.Name] != nil)
			if !mine {
				// Not this user's: nothing of it is read but what the
				// listing said.
				if opts.All {
					row := Listed{Name: m.Name, Driver: name, Exists: true, Status: m.Status, State: "other-user"}
					row.owned(owner, "")
					rows = append(rows, row)
				} else {
					others++
				}
				names[m.Name] = false
				continue
			}
			names[m.Name] = true
		}
	}
	all := make([]string, 0, len(names))
	for n, mine := range names {
		if mine {
			all = append(all, n)
		}
	}
	sort.Strings(all)
	live, err := chosen.Backend.Observe(ctx, all)
	if err != nil {
		return rows, others, append(errs, fmt.Sprintf("driver %s: %v", name, err))
	}
	// Group the sandboxes by the files they were applied from: the record
	// in the state directory, else the one the backend keeps (labels).
	type group struct {
		files []string
		names []string
	}
	groups := map[string]*group{}
	owners := map[string]reconcile.Owner{}
	for _, n := range all {
		rec := stored[n]
		owners[n] = reconcile.OwnerOf(rec, live[n])
		if rec == nil && live[n] != nil {
			rec = live[n].Record
		}
		if rec == nil || declaredIn(rec) == "" {
			row := Listed{Name: n, Driver: name, State: "unknown", Detail: "sbx has no record of the file it was applied from"}
			row.owned(owners[n], opts.Here)
			if l := live[n]; l != nil && l.Exists {
				row.Exists, row.Status = true, l.Status
			}
			rows = append(rows, row)
			continue
		}
		var files []string
		for _, d := range rec.Config.Declarations {
			files = append(files, d.Path)
		}
		if len(files) == 0 {
			files = rec.Config.Files
		}
		key := strings.Join(files, "\x00")
		if groups[key] == nil {
			groups[key] = &group{files: files}
		}
		groups[key].names = append(groups[key].names, n)
	}
	keys := make([]string, 0, len(groups))
	for k := range groups {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		g := groups[k]
		file := g.files[0]
		s, err := Open(ctx, Options{Files: g.files, Driver: name, Env: opts.Env, StateDir: opts.StateDir, HostValue: opts.HostValue, User: opts.User})
		if err != nil {
			detail := fmt.Sprintf("%s cannot be read: %v", file, oneLine(err))
			for _, n := range g.names {
				row := Listed{Name: n, Driver: name, File: file, State: "unknown", Detail: detail}
				row.owned(owners[n], opts.Here)
				if l := live[n]; l != nil && l.Exists {
					row.Exists, row.Status = true, l.Status
				}
				rows = append(rows, row)
			}
			continue
		}
		status, perr := s.Status()
		errs = append(errs, perr...)
		byName := map[string]Status{}
		for _, st := range status {
			byName[st.Name] = st
		}
		for _, n := range g.names {
			st, ok := byName[n]
			if !ok {
				row := Listed{Name: n, Driver: name, File: file, State: "undeclared", Detail: file + " no longer declares it: declare it there again to manage it (sbx destroy), or remove it with the backend's own CLI"}
				row.owned(owners[n], opts.Here)
				if l := live[n]; l != nil && l.Exists {
					row.Exists, row.Status = true, l.Status
				}
				rows = append(rows, row)
				continue
			}
			row := Listed{Name: n, Driver: name, File: file, Exists: st.Exists, Status: st.Status, State: st.State, Pending: st.Pending}
			row.owned(owners[n], opts.Here)
			rows = append(rows, row)
		}
	}
	return rows, others, errs
}

// oneLine joins a multi-line error (a file's diagnostics) into one line.
func oneLine(err error) string {
	return strings.Join(strings.Fields(strings.ReplaceAll(err.Error(), "\n", "; ")), " ")
}
