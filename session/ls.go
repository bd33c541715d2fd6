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
}

// Listed is one managed sandbox.
type Listed struct {
	Name   string `json:"name"`
	Driver string `json:"driver"`
	// File is the sandbox file that declared it when it was last
	// applied (absolute), "" when sbx has no record of it.
	File   string `json:"file,omitempty"`
	Exists bool   `json:"exists"`
	// Status is the backend's word: running, stopped, exited…
	Status string `json:"status,omitempty"`
	// State is in-sync, changes-pending, drifted or absent (as sbx status
	// says), undeclared (the file no longer declares it), or unknown (its
	// file or backend could not be read; Detail says why).
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
func List(ctx context.Context, opts ListOptions) (*Listing, error) {
	out := &Listing{FormatVersion: ListFormatVersion, Sandboxes: []Listed{}, Errors: []string{}}
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
				out.Sandboxes = append(out.Sandboxes, Listed{Name: n, Driver: d.Name, File: recordFile(store, d.Name, n), State: "unknown", Detail: "the backend cannot be reached"})
			}
			continue
		}
		rows, errs := listDriver(ctx, opts, store, chosen, names)
		out.Sandboxes = append(out.Sandboxes, rows...)
		out.Errors = append(out.Errors, errs...)
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

func recordFile(store *reconcile.Store, driver, name string) string {
	r, err := store.Get(driver, name)
	if err != nil || r == nil {
		return ""
	}
	return declaredIn(r)
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

// listDriver lists one reachable backend's managed sandboxes.
func listDriver(ctx context.Context, opts ListOptions, store *reconcile.Store, chosen Chosen, recorded []string) ([]Listed, []string) {
	var errs []string
	name := chosen.Entry.Name
	names := map[string]bool{}
	for _, n := range recorded {
		names[n] = true
	}
	if l, ok := chosen.Backend.(driver.Lister); ok {
		managed, err := l.Managed(ctx)
		if err != nil {
			return nil, []string{fmt.Sprintf("driver %s: %v", name, err)}
		}
		for _, n := range managed {
			names[n] = true
		}
	}
	all := make([]string, 0, len(names))
	for n := range names {
		all = append(all, n)
	}
	sort.Strings(all)
	live, err := chosen.Backend.Observe(ctx, all)
	if err != nil {
		return nil, []string{fmt.Sprintf("driver %s: %v", name, err)}
	}
	// Group the sandboxes by the files they were applied from: the record
	// in the state directory, else the one the backend keeps (labels).
	type group struct {
		files []string
		names []string
	}
	groups := map[string]*group{}
	var rows []Listed
	for _, n := range all {
		rec, err := store.Get(name, n)
		if err != nil {
			errs = append(errs, err.Error())
		}
		if rec == nil && live[n] != nil {
			rec = live[n].Record
		}
		if rec == nil || declaredIn(rec) == "" {
			row := Listed{Name: n, Driver: name, State: "unknown", Detail: "sbx has no record of the file it was applied from"}
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
		s, err := Open(ctx, Options{Files: g.files, Driver: name, Env: opts.Env, StateDir: opts.StateDir, HostValue: opts.HostValue})
		if err != nil {
			detail := fmt.Sprintf("%s cannot be read: %v", file, oneLine(err))
			for _, n := range g.names {
				row := Listed{Name: n, Driver: name, File: file, State: "unknown", Detail: detail}
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
				if l := live[n]; l != nil && l.Exists {
					row.Exists, row.Status = true, l.Status
				}
				rows = append(rows, row)
				continue
			}
			rows = append(rows, Listed{Name: n, Driver: name, File: file, Exists: st.Exists, Status: st.Status, State: st.State, Pending: st.Pending})
		}
	}
	return rows, errs
}

// oneLine joins a multi-line error (a file's diagnostics) into one line.
func oneLine(err error) string {
	return strings.Join(strings.Fields(strings.ReplaceAll(err.Error(), "\n", "; ")), " ")
}
