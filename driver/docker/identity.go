package docker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/sbxhq/sbx/driver"
	"github.com/sbxhq/sbx/spec"
)

// labelIdentity records (JSON, identities) what each protected host path
// and each of its parents up to its mount root was when the container was
// made. A read-only bind pins the inode present at create: a rename on the
// host (an editor's atomic save, sed -i, git checkout) or of a parent
// from inside (mv dir dir-old; mkdir dir) leaves the bind over a file
// nobody reads and the path writable, while Docker still lists the bind.
// Comparing identities is how sbx sees that.
const labelIdentity = "dev.sbx.identity"

// identities is labelIdentity's value.
type identities struct {
	// Protected are the protected host paths, each with the root of the
	// mount the sandbox could write it through (the workspace, or a
	// read-write mount's source).
	Protected []guarded `json:"protected"`
	// IDs are the file identities ("dev:ino", fileID) of every protected
	// path and of each of its parents up to and including its root.
	IDs map[string]string `json:"ids"`
}

// guarded is one protected host path and the root it lives under.
type guarded struct {
	Path string `json:"path"`
	Root string `json:"root"`
}

// recordIdentities is labelIdentity's value for the host paths prot
// protects: a few Lstat calls. Where the platform has no file identity
// (fileID) it records none, and nothing can be checked.
func recordIdentities(sp *spec.Spec, prot *protection) (string, error) {
	ids := identities{Protected: []guarded{}, IDs: map[string]string{}}
	for _, p := range prot.sources {
		root, _, ok := sandboxPath(sp, p)
		if !ok {
			continue
		}
		ids.Protected = append(ids.Protected, guarded{Path: p, Root: root})
		for _, c := range chain(root, p) {
			if _, done := ids.IDs[c]; done {
				continue
			}
			fi, err := os.Lstat(c)
			if err != nil {
				return "", fmt.Errorf("workspace.protect: %v", err)
			}
			if id, ok := fileID(fi); ok {
				ids.IDs[c] = id
			}
		}
	}
	data, err := json.Marshal(ids)
	return string(data), err
}

// chain is root and every directory from it down to path, path last.
func chain(root, path string) []string {
	out := []string{root}
	rel, err := filepath.Rel(root, path)
	if err != nil || rel == "." {
		return out
	}
	cur := root
	for _, part := range strings.Split(rel, string(filepath.Separator)) {
		cur = filepath.Join(cur, part)
		out = append(out, cur)
	}
	return out
}

// lostProtection says, one line per cause, how the protection recorded in
// labels no longer holds: a protected path or one of its parents that is
// not the file it was at create (replaced, removed, a link now). Nothing
// when it holds, or when the sandbox protects nothing. A protected
// container without the record (made by an earlier sbx) cannot be checked
// and is reported so that apply remakes it.
func lostProtection(labels map[string]string) []string {
	if labels[labelProtect] != "true" {
		return nil
	}
	raw, ok := labels[labelIdentity]
	var ids identities
	if !ok || json.Unmarshal([]byte(raw), &ids) != nil {
		return []string{"workspace.protect: the sandbox was made by an sbx that did not record what its read-only binds cover, so their loss cannot be seen; apply recreates it"}
	}
	ws := labels[labelWS]
	var lost []string
	seen := map[string]bool{}
	for _, g := range ids.Protected {
		for _, c := range chain(g.Root, g.Path) {
			want, ok := ids.IDs[c]
			if !ok {
				continue
			}
			what := changed(c, want)
			if what == "" {
				continue
			}
			if !seen[c] {
				seen[c] = true
				lost = append(lost, lostLine(ws, c, g.Path, what))
			}
			break // what lies below a changed parent changed with it
		}
	}
	return lost
}

// changed says how path is no longer the file whose identity was want,
// "" when it still is.
func changed(path, want string) string {
	fi, err := os.Lstat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "was removed or renamed"
	case err != nil:
		return fmt.Sprintf("cannot be checked (%v)", err)
	case fi.Mode()&fs.ModeSymlink != 0:
		return "became a symbolic link"
	}
	if id, ok := fileID(fi); ok && id != want {
		return "was replaced"
	}
	return ""
}

// lostLine is the plan's line for a protection lost at path c, which is
// protected path p or one of its parents.
func lostLine(ws, c, p, what string) string {
	if c == p {
		return fmt.Sprintf("workspace.protect: %s %s since the sandbox was created (its read-only bind no longer covers it)", shown(ws, c), what)
	}
	return fmt.Sprintf("workspace.protect: %s, a parent of %s, %s since the sandbox was created (the read-only bind no longer covers %s)", shown(ws, c), shown(ws, p), what, shown(ws, p))
}

// shown is path as the plan names it: relative to the workspace when it
// is in it.
func shown(ws, path string) string {
	if ws != "" && spec.Within(path, ws) {
		if rel, err := filepath.Rel(ws, path); err == nil {
			if rel == "." {
				return "the workspace " + path
			}
			return rel
		}
	}
	return path
}

// Unprotected says how the protection of sandbox name's declaration has
// been lost since it was created (lostProtection), nothing when it holds
// or the sandbox does not exist: one Engine API request and a few Lstat
// calls, cheap enough for every loop iteration.
func (d *Driver) Unprotected(ctx context.Context, name string) ([]string, error) {
	in, err := d.api.inspectContainer(ctx, ContainerName(name))
	if err != nil || in == nil {
		return nil, err
	}
	if in.Config.Labels[driver.LabelManaged] != "true" || in.Config.Labels[driver.LabelSandbox] != name {
		return nil, nil
	}
	return lostProtection(in.Config.Labels), nil
}
