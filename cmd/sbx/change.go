package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/sbxhq/sbx/internal/untrusted"
	"github.com/sbxhq/sbx/reconcile"
	"github.com/sbxhq/sbx/schema"
	"github.com/sbxhq/sbx/session"
	"github.com/sbxhq/sbx/spec"
)

// worktree is the --head that names the working tree, not a revision.
const worktree = "the working tree"

// changePlan is `sbx plan --base REV [--head REV]`: what a change to the
// sandbox files does, read from git, with no backend asked. Both
// revisions are attacker input (a pull request's files): they are read
// with git's plumbing commands only, which run nothing a repository's
// config names, a symlink is never followed, a file outside the repository
// is refused, no host path they name is looked at, no command they name
// runs, and the personal sandbox.local.yaml is not merged (it is in no
// pull request).
func (a *app) changePlan(ctx context.Context, t *target, base, head string) (*reconcile.Changes, error) {
	g, err := openGit(ctx, a.env)
	if err != nil {
		return nil, err
	}
	baseRev, err := g.commit(ctx, base)
	if err != nil {
		return nil, err
	}
	headRev := worktree
	if head != "" {
		if headRev, err = g.commit(ctx, head); err != nil {
			return nil, err
		}
	}
	files, err := g.files(ctx, t.files, baseRev, headRev)
	if err != nil {
		return nil, err
	}
	sch, err := schema.Compile()
	if err != nil {
		return nil, err
	}
	opts := spec.Options{Schema: sch, LookupEnv: a.lookupEnv, HostValue: a.hostValues.add, NoLocal: true, NoHostFiles: true}
	load := func(rev string) ([]*spec.Spec, error) {
		var srcs []spec.Source
		for _, f := range files {
			data, err := g.read(ctx, rev, f)
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			if err != nil {
				return nil, err
			}
			srcs = append(srcs, spec.Source{Name: f, Dir: filepath.Join(g.top, filepath.FromSlash(path.Dir(f))), Data: data})
		}
		if len(srcs) == 0 {
			return nil, nil
		}
		res, err := spec.LoadSources(srcs, opts)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", revName(rev), err)
		}
		seen := map[string]string{}
		for _, sp := range res.Specs {
			if t.driver != "" {
				sp.Driver = t.driver
			}
			if prev, dup := seen[sp.Name]; dup {
				return nil, fmt.Errorf("%s: sandbox %q is declared by both %s and %s", revName(rev), sp.Name, prev, sp.Files[0])
			}
			seen[sp.Name] = sp.Files[0]
		}
		return res.Specs, nil
	}
	headSpecs, err := load(headRev)
	if err != nil {
		return nil, err
	}
	baseSpecs, err := load(baseRev)
	if err != nil {
		return nil, err
	}
	if len(headSpecs) == 0 && len(baseSpecs) == 0 {
		return nil, fmt.Errorf("no sandbox file %s at %s or %s", strings.Join(files, ", "), revName(baseRev), revName(headRev))
	}
	drv, err := changeDriver(t.driver, headSpecs, baseSpecs)
	if err != nil {
		return nil, err
	}
	caps, err := session.Caps(a.driverEnv(), drv)
	if err != nil {
		return nil, err
	}
	// Fingerprints compare values without keeping them; a key of this
	// invocation's is enough, as both sides are made with it.
	key := make(reconcile.Key, reconcile.KeySize)
	if _, err := rand.Read(key); err != nil {
		return nil, err
	}
	desired := func(specs []*spec.Spec, rev string) ([]reconcile.Desired, error) {
		var ds []reconcile.Desired
		for _, sp := range specs {
			d, err := reconcile.NewDesired(sp, key, g.buildHash(ctx, rev, sp, headRev == worktree))
			if err != nil {
				return nil, err
			}
			ds = append(ds, d)
		}
		return ds, nil
	}
	hd, err := desired(headSpecs, headRev)
	if err != nil {
		return nil, err
	}
	bd, err := desired(baseSpecs, baseRev)
	if err != nil {
		return nil, err
	}
	p := reconcile.PlanChange(bd, hd, caps, reconcile.Options{})
	p.Base, p.Head = base, head
	if head == "" {
		p.Head = worktree
	}
	return p, nil
}

func revName(rev string) string {
	if rev == worktree {
		return rev
	}
	return "revision " + rev
}

// changeDriver is the driver whose capabilities the change is planned
// under: --driver, else the one the files name (auto: the first driver
// auto tries, as on a machine that has it).
func changeDriver(override string, specs ...[]*spec.Spec) (string, error) {
	if override != "" {
		return override, nil
	}
	names := map[string]bool{}
	for _, ss := range specs {
		for _, sp := range ss {
			names[sp.Driver] = true
		}
	}
	var list []string
	for n := range names {
		list = append(list, n)
	}
	sort.Strings(list)
	if len(list) != 1 {
		return "", fmt.Errorf("the sandboxes name different drivers (%s); name one with --driver", strings.Join(list, ", "))
	}
	if list[0] != "auto" {
		return list[0], nil
	}
	for _, d := range session.Drivers {
		if d.Auto {
			return d.Name, nil
		}
	}
	return "", errors.New("no driver for driver: auto")
}

// git runs git's plumbing commands in a repository. A repository's
// config can name programs git runs (core.fsmonitor when the index is
// read, hooks, diff.external and textconv when a diff is made, filters
// when a file is checked out or added, core.sshCommand when fetching):
// only rev-parse, ls-tree and cat-file run here, which do none of that,
// and the settings that name programs are overridden besides.
type git struct {
	env []string
	top string // the repository's top directory
	// prefix is the working directory relative to top, "" at the top,
	// slash-separated.
	prefix string
}

func openGit(ctx context.Context, env []string) (*git, error) {
	g := &git{env: env}
	out, err := g.run(ctx, "", "rev-parse", "--show-toplevel", "--show-prefix")
	if err != nil {
		return nil, fmt.Errorf("--base needs a git repository: %w", err)
	}
	lines := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	if len(lines) < 1 || lines[0] == "" {
		return nil, errors.New("--base needs a git work tree")
	}
	g.top = lines[0]
	if len(lines) > 1 {
		g.prefix = strings.TrimSuffix(lines[1], "/")
	}
	return g, nil
}

// run runs git with args in dir ("" the working directory).
func (g *git) run(ctx context.Context, dir string, args ...string) ([]byte, error) {
	safe := []string{"--no-pager", "--literal-pathspecs", "--no-replace-objects",
		"-c", "core.fsmonitor=false", "-c", "core.hooksPath=" + os.DevNull,
		"-c", "diff.external=", "-c", "core.pager=cat", "-c", "core.sshCommand=false", "-c", "protocol.allow=never"}
	cmd := exec.CommandContext(ctx, "git", append(safe, args...)...)
	cmd.Dir = dir
	cmd.Env = append(append([]string(nil), g.env...), "GIT_TERMINAL_PROMPT=0", "GIT_OPTIONAL_LOCKS=0")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		msg := strings.TrimSpace(stderr.String())
		if msg == "" {
			msg = err.Error()
		}
		return nil, fmt.Errorf("git %s: %s", args[0], untrusted.Line(msg))
	}
	return out, nil
}

// commit resolves a revision to its commit's object name. A revision
// starting with "-" is refused: git would read it as an option.
func (g *git) commit(ctx context.Context, rev string) (string, error) {
	if rev == "" || strings.HasPrefix(rev, "-") || strings.ContainsAny(rev, "\x00\n") {
		return "", fmt.Errorf("invalid revision %q", rev)
	}
	out, err := g.run(ctx, g.top, "rev-parse", "--verify", "--quiet", "--end-of-options", rev+"^{commit}")
	if err != nil {
		return "", fmt.Errorf("revision %q is not a commit in this repository (in CI, fetch it: git fetch --depth=1 origin %s)", rev, rev)
	}
	return strings.TrimSpace(string(out)), nil
}

// files are the sandbox files, as paths relative to the repository's top:
// those named (relative to the working directory), else the nearest
// sandbox.yaml in head, or in base when head has none.
func (g *git) files(ctx context.Context, named []string, base, head string) ([]string, error) {
	if len(named) == 0 {
		for _, rev := range []string{head, base} {
			for dir := g.prefix; ; dir = path.Dir(dir) {
				if dir == "." {
					dir = ""
				}
				f := path.Join(dir, session.DefaultFile)
				if _, err := g.read(ctx, rev, f); !errors.Is(err, fs.ErrNotExist) {
					return []string{f}, nil
				}
				if dir == "" {
					break
				}
			}
		}
		return nil, fmt.Errorf("no %s in %s at %s or %s", session.DefaultFile, g.dir(), revName(base), revName(head))
	}
	var out []string
	for _, f := range named {
		var rel string
		if filepath.IsAbs(f) {
			r, err := filepath.Rel(g.top, f)
			if err != nil {
				return nil, fmt.Errorf("%s is outside the repository", f)
			}
			rel = filepath.ToSlash(r)
		} else {
			rel = path.Join(g.prefix, filepath.ToSlash(f))
		}
		rel = path.Clean(rel)
		if !filepath.IsLocal(filepath.FromSlash(rel)) {
			return nil, fmt.Errorf("%s is outside the repository %s", f, g.top)
		}
		out = append(out, rel)
	}
	return out, nil
}

func (g *git) dir() string {
	if g.prefix == "" {
		return "the repository's top directory"
	}
	return g.prefix
}

// read reads the file at name (relative to the top, slash-separated) in
// rev, or in the working tree: fs.ErrNotExist when it is not there. A
// symlink is refused, in a revision and in the working tree, and so is
// anything that is not a regular file or is larger than a sandbox file
// may be.
func (g *git) read(ctx context.Context, rev, name string) ([]byte, error) {
	if rev == worktree {
		root, err := os.OpenRoot(g.top)
		if err != nil {
			return nil, err
		}
		defer root.Close()
		data, err := untrusted.ReadRegular(root, filepath.FromSlash(name), spec.MaxFileSize)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return nil, fs.ErrNotExist
		case err != nil:
			return nil, fmt.Errorf("%s in the working tree: %w", name, err)
		}
		return data, nil
	}
	out, err := g.run(ctx, g.top, "ls-tree", "-z", "--full-tree", rev, "--", name)
	if err != nil {
		return nil, err
	}
	entry := strings.TrimSuffix(string(out), "\x00")
	if entry == "" {
		return nil, fs.ErrNotExist
	}
	meta, got, ok := strings.Cut(entry, "\t")
	f := strings.Fields(meta)
	if !ok || got != name || len(f) != 3 {
		return nil, fmt.Errorf("%s at revision %s: unexpected git ls-tree output", name, rev)
	}
	mode, kind, oid := f[0], f[1], f[2]
	switch {
	case mode == "120000":
		return nil, fmt.Errorf("%s at revision %s is a symlink; sbx reads no file through one", name, rev)
	case kind != "blob" || (mode != "100644" && mode != "100755"):
		return nil, fmt.Errorf("%s at revision %s is not a regular file", name, rev)
	}
	size, err := g.run(ctx, g.top, "cat-file", "-s", oid)
	if err != nil {
		return nil, err
	}
	if n, err := strconv.ParseInt(strings.TrimSpace(string(size)), 10, 64); err != nil || n > spec.MaxFileSize {
		return nil, fmt.Errorf("%s at revision %s: larger than a sandbox file may be (%d bytes)", name, rev, spec.MaxFileSize)
	}
	return g.run(ctx, g.top, "cat-file", "blob", oid)
}

// buildHash stands for the content of a template's build context at rev:
// the git tree's object name of that directory, which changes with any
// file in it. The context is not read and nothing is built. A context
// outside the repository, or any when one side is the working tree
// (pathOnly), is named by its path only ("" without a build).
func (g *git) buildHash(ctx context.Context, rev string, sp *spec.Spec, pathOnly bool) string {
	b := sp.Template.Build
	if b == nil {
		return ""
	}
	rel, err := filepath.Rel(g.top, b.Context)
	if err != nil || !filepath.IsLocal(rel) && rel != "." || pathOnly {
		return "context " + b.Context
	}
	obj := rev + ":" + filepath.ToSlash(rel)
	if rel == "." {
		obj = rev + "^{tree}"
	}
	out, err := g.run(ctx, g.top, "rev-parse", "--verify", "--quiet", "--end-of-options", obj)
	if err != nil {
		return "context " + b.Context
	}
	return "git tree " + strings.TrimSpace(string(out))
}

// planChange runs plan --base: the change, rendered or as JSON, and its
// exit code.
func (a *app) planChange(ctx context.Context, t *target, base, head string, asJSON bool, out string, detailed bool) int {
	switch {
	case base == "":
		return a.errorf("--head needs --base: the revision the change starts from")
	case out != "":
		return a.errorf("--out saves a plan for apply; a plan with --base compares two revisions and cannot be applied")
	case t.adopt:
		return a.errorf("--adopt is about a live sandbox; a plan with --base asks no backend")
	}
	p, err := a.changePlan(ctx, t, base, head)
	if err != nil {
		return a.fail(err)
	}
	if err := p.Err(); err != nil {
		return a.errorf("%v", err)
	}
	if asJSON {
		err = reconcile.WriteJSON(a.stdout, p)
	} else {
		err = reconcile.RenderWidth(a.stdout, p, a.color(a.stdout), a.termWidth(a.stdout))
	}
	if err != nil {
		return a.errorf("%v", err)
	}
	if detailed && !p.Empty() {
		return exitChanges
	}
	return exitOK
}
