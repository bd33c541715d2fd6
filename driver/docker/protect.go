package docker

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/sbxhq/sbx/spec"
)

// localPlaceholder is what sbx writes to a missing sandbox.local.yaml so
// that it can be mounted read-only: a sandbox could otherwise create the
// overlay and widen itself. The loader takes a file of comments as no
// overlay.
const localPlaceholder = `# Personal overrides, merged over the sandbox file next to this one.
# sbx created this file empty so that it can keep it read-only inside the
# sandbox (workspace.protect). Edit it on the host; git-ignore it.
`

// protection is what keeps a sandbox's own declaration out of its reach
// (workspace.protect): host paths the sandbox could write (in its
// workspace or a read-write mount) bound read-only over themselves.
type protection struct {
	binds []string // -v arguments
	paths []string // the paths inside the sandbox, for labelProtected
	// git is set when the workspace's .git is the sandbox's own volume,
	// hostObjects when the host's objects are bound into it (git.go).
	git, hostObjects bool
	// sources are the host paths bound, for labelIdentity.
	sources []string
}

// protect lists the read-only binds that protect sp's declaration: every
// file layer, sandbox.local.yaml (created empty, when create is set and it
// is missing), the loop's prompt, the template's build context (its
// Dockerfile and .dockerignore when the context is the whole workspace),
// and the workspace's .git, which becomes the sandbox's own (git.go). The
// declarations and prompts of its neighbours (the other sandboxes sbx was
// given with it, Configure) that it could write get the same binds: in a
// run of several agents over one workspace none can rewrite another's
// file. A path that passes through a symbolic link is refused: a bind
// follows links, and the link may point at a host file. Without create it
// only checks, as the plan does before anything runs.
func protect(sp *spec.Spec, neighbours []*spec.Spec, create bool) (*protection, error) {
	p := &protection{}
	if !sp.Protect {
		return p, nil
	}
	seen := map[string]bool{}
	add := func(path string, wantDir, optional bool) error {
		root, target, ok := sandboxPath(sp, path)
		if !ok || seen[target] {
			return nil
		}
		fi, err := checkNoLinks(root, path)
		switch {
		case errors.Is(err, fs.ErrNotExist) && optional:
			return nil
		case err != nil:
			return fmt.Errorf("workspace.protect: %v", err)
		case wantDir && !fi.IsDir(), !wantDir && !fi.Mode().IsRegular():
			return fmt.Errorf("workspace.protect: %s is not a regular %s", path, map[bool]string{true: "directory", false: "file"}[wantDir])
		}
		seen[target] = true
		p.binds = append(p.binds, path+":"+target+":ro")
		p.paths = append(p.paths, target)
		p.sources = append(p.sources, path)
		return nil
	}
	for _, n := range append([]*spec.Spec{sp}, neighbours...) {
		if n != sp && n.Name == sp.Name {
			continue
		}
		// A neighbour's missing file is its own plan's to report.
		theirs := n != sp
		for _, d := range n.Declarations {
			if err := add(d.Path, false, theirs); err != nil {
				return nil, err
			}
		}
		if len(n.Declarations) > 0 {
			local := spec.LocalPath(n.Declarations[0].Path)
			if root, _, ok := sandboxPath(sp, local); ok {
				if create {
					if err := placeholder(root, local); err != nil {
						return nil, fmt.Errorf("workspace.protect: %v", err)
					}
				}
				if err := add(local, false, !create); err != nil {
					return nil, err
				}
			}
		}
		if n.Loop != nil && n.Loop.Prompt != "" {
			if err := add(n.Loop.Prompt, false, theirs); err != nil {
				return nil, err
			}
		}
	}
	if b := sp.Template.Build; b != nil {
		if b.Context != sp.Workspace.Path && !spec.Within(sp.Workspace.Path, b.Context) {
			if err := add(b.Context, true, false); err != nil {
				return nil, err
			}
		} else {
			for _, f := range []string{b.Dockerfile, ".dockerignore"} {
				if err := add(filepath.Join(b.Context, f), false, f == ".dockerignore"); err != nil {
					return nil, err
				}
			}
		}
	}
	if err := p.protectGit(sp, create); err != nil {
		return nil, err
	}
	sort.Strings(p.paths)
	return p, nil
}

// sandboxPath says where the sandbox sees host path path when it can
// write it: in its read-write workspace (at the same path) or under a
// read-write mount. root is the host directory that mount starts at.
func sandboxPath(sp *spec.Spec, path string) (root, target string, ok bool) {
	if !sp.Workspace.ReadOnly && spec.Within(path, sp.Workspace.Path) {
		return sp.Workspace.Path, path, true
	}
	for _, m := range sp.Mounts {
		if !m.ReadOnly && spec.Within(path, m.Source) {
			rel, _ := filepath.Rel(m.Source, path)
			return m.Source, filepath.Join(m.Target, rel), true
		}
	}
	return "", "", false
}

// checkNoLinks stats every component of path below root without following
// links and fails on a symbolic link; it returns path's own info.
func checkNoLinks(root, path string) (fs.FileInfo, error) {
	rel, err := filepath.Rel(root, path)
	if err != nil {
		return nil, err
	}
	cur := root
	var fi fs.FileInfo
	if fi, err = os.Lstat(cur); err != nil {
		return nil, err
	}
	if rel == "." {
		return fi, nil
	}
	for _, part := range strings.Split(rel, string(filepath.Separator)) {
		cur = filepath.Join(cur, part)
		if fi, err = os.Lstat(cur); err != nil {
			return nil, err
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			return nil, fmt.Errorf("%s is a symbolic link; sbx does not bind what a link points at (remove the link, or set workspace.protect: false)", cur)
		}
	}
	return fi, nil
}

// restorePlaceholder puts the empty sandbox.local.yaml back when the
// user removed it while the sandbox was stopped: the sandbox binds it
// read-only, and docker start (or reading the stopped container's files)
// makes a bind's missing source a directory, root's, in the workspace.
func restorePlaceholder(sp *spec.Spec) error {
	if !sp.Protect || len(sp.Declarations) == 0 {
		return nil
	}
	local := spec.LocalPath(sp.Declarations[0].Path)
	root, _, ok := sandboxPath(sp, local)
	if !ok {
		return nil
	}
	if err := placeholder(root, local); err != nil {
		return fmt.Errorf("workspace.protect: %v", err)
	}
	return nil
}

// placeholder creates an empty overlay at path unless something is there.
// root is the host directory the sandbox can write path under: the file
// is created within it (os.Root), so a directory the agent swapped for a
// link out of it is refused, never written through.
func placeholder(root, path string) error {
	rel, err := filepath.Rel(root, path)
	if err != nil {
		return err
	}
	r, err := os.OpenRoot(root)
	if err != nil {
		return err
	}
	defer r.Close()
	f, err := r.OpenFile(rel, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if errors.Is(err, fs.ErrExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if _, err := f.WriteString(localPlaceholder); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
