package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/sbxhq/sbx/driver/runner"
	"github.com/sbxhq/sbx/internal/gitsync"
	"github.com/sbxhq/sbx/internal/tarball"
	"github.com/sbxhq/sbx/internal/untrusted"
	"github.com/sbxhq/sbx/spec"
)

// The workspace model: the sandbox works on a copy of the host workspace
// in its volume, made when the sandbox is created. sbx pull copies the
// sandbox's copy back over the host's, sbx push the host's over the
// sandbox's; neither deletes anything the other side lacks.

// Pull copies the sandbox's workspace back over the host workspace. The
// stream comes from the agent's side (sbx __k8s-tar in the pod, which the
// agent could have replaced or fed): tarball.Extract keeps it inside the
// workspace, off symlinks, within bounds, out of git's configuration
// surface (of a nested .git only objects, refs, logs, HEAD, index and
// packed-refs come back: gitdir.Copyable), and, while workspace.protect
// is on, away from the sandbox's own declaration. The workspace's own
// .git is never written: the sandbox's commits come home by git's fetch
// into refs/sbx/NAME/* (fetchGit, package gitsync).
// It returns what it copied and skipped, as far as it got.
func (d *Driver) Pull(ctx context.Context, sp *spec.Spec, w io.Writer) (*tarball.Stats, error) {
	p, pod := d.target(sp.Name)
	root, err := os.OpenRoot(sp.Workspace.Path)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	pr, pw := io.Pipe()
	type result struct {
		st  *tarball.Stats
		err error
	}
	done := make(chan result, 1)
	go func() {
		st, err := tarball.Extract(ctx, pr, root, tarball.ExtractOptions{Limits: tarball.DefaultLimits, Protected: protectedIn(sp), NoGit: true})
		// Whatever is left of the stream is not read: the pod's side
		// sees a closed pipe.
		pr.CloseWithError(errors.New("extraction ended"))
		done <- result{st, err}
	}()
	args := d.kubectl(p, "exec", pod, "-c", AgentContainer, "--", helperPath, "__k8s-tar", sp.Workspace.Path)
	runErr := d.opts.Runner.Run(ctx, runner.Cmd{Args: args, Stdout: pw, StreamStdout: true})
	pw.Close()
	res := <-done
	if res.err != nil {
		return res.st, fmt.Errorf("pulling the workspace of %q: %w", sp.Name, res.err)
	}
	if runErr != nil {
		return res.st, fmt.Errorf("pulling the workspace of %q: %w", sp.Name, runErr)
	}
	report(w, "pulled", sp.Workspace.Path, res.st)
	if err := d.fetchGit(ctx, sp, w); err != nil {
		return res.st, fmt.Errorf("pulling the workspace of %q: %w", sp.Name, err)
	}
	return res.st, nil
}

// fetchGit brings the commits of the pod's .git into the host's
// repository as refs/sbx/NAME/*: its data only (gitsync.Data) is copied
// out, within bounds, into a scratch directory of sbx's, from which git
// fetches. A pod without a .git, or a host workspace that is no
// repository, brings nothing, and says so.
func (d *Driver) fetchGit(ctx context.Context, sp *spec.Spec, w io.Writer) error {
	p, pod := d.target(sp.Name)
	return gitsync.Home(ctx, sp.Workspace.Path, sp.Name, w, func(root *os.Root) error {
		pr, pw := io.Pipe()
		done := make(chan error, 1)
		go func() {
			err := gitsync.Extract(ctx, pr, root)
			pr.CloseWithError(errors.New("extraction ended"))
			done <- err
		}()
		args := d.kubectl(p, "exec", pod, "-c", AgentContainer, "--", helperPath, "__k8s-tar", filepath.Join(sp.Workspace.Path, ".git"))
		var stderr strings.Builder
		runErr := d.opts.Runner.Run(ctx, runner.Cmd{Args: args, Stdout: pw, StreamStdout: true, Stderr: &stderr})
		pw.Close()
		if err := <-done; err != nil {
			return err
		}
		if runErr != nil && !strings.Contains(stderr.String(), "no such file or directory") {
			return runErr
		}
		return nil // no .git in the pod: nothing to fetch
	})
}

// Push copies the host workspace over the sandbox's.
func (d *Driver) Push(ctx context.Context, sp *spec.Spec, w io.Writer) error {
	p, pod := d.target(sp.Name)
	pr, pw := io.Pipe()
	werr := make(chan error, 1)
	go func() {
		err := writeWorkspace(ctx, sp.Workspace.Path, pw)
		pw.CloseWithError(err)
		werr <- err
	}()
	out, err := d.runInput(ctx, p, pr, "exec", "-i", pod, "-c", AgentContainer, "--", helperPath, "__k8s-prepare", "--untar", sp.Workspace.Path)
	pr.Close()
	if wErr := <-werr; wErr != nil && err == nil {
		err = wErr
	}
	if err != nil {
		return fmt.Errorf("pushing the workspace of %q: %w", sp.Name, err)
	}
	fmt.Fprintf(w, "pushed %s into sandbox %q (%s)\n", sp.Workspace.Path, sp.Name, strings.TrimSpace(string(out)))
	return nil
}

func report(w io.Writer, verb, dir string, st *tarball.Stats) {
	fmt.Fprintf(w, "%s %d files, %d directories and %d links (%s) into %s\n", verb, st.Files, st.Dirs, st.Links, spec.HumanSize(st.Bytes), dir)
	if n := len(st.Skipped) + st.SkippedMore; n > 0 {
		fmt.Fprintf(w, "skipped %d entries:\n", n)
		for _, s := range st.Skipped {
			// The names are the agent's: escaped, they cannot forge or
			// hide a line.
			fmt.Fprintf(w, "  %s\n", untrusted.Text(s))
		}
		if st.SkippedMore > 0 {
			fmt.Fprintf(w, "  … and %d more\n", st.SkippedMore)
		}
	}
	// Protected files the sandbox left as they are: a count, not a list
	// that would hide the ones it changed.
	if st.ProtectedSame > 0 {
		fmt.Fprintf(w, "left %d protected files and links as they are (the sandbox's copies are the same)\n", st.ProtectedSame)
	}
}

// protectedIn is what a pull never writes while workspace.protect is on,
// as paths relative to the workspace: what the docker driver mounts
// read-only (driver/docker/protect.go): every layer of the declaration,
// sandbox.local.yaml, the loop's prompt, the template's build context
// (its Dockerfile and .dockerignore when the context holds the
// workspace). Git's configuration surface never comes back, protect or
// not (tarball.Extract).
func protectedIn(sp *spec.Spec) func(string) bool {
	if !sp.Protect {
		return nil
	}
	set := map[string]bool{}
	add := func(path string) {
		if rel, err := filepath.Rel(sp.Workspace.Path, path); err == nil && filepath.IsLocal(rel) {
			set[foldName(filepath.ToSlash(rel))] = true
		}
	}
	for _, decl := range sp.Declarations {
		add(decl.Path)
	}
	if len(sp.Declarations) > 0 {
		add(spec.LocalPath(sp.Declarations[0].Path))
	}
	if sp.Loop != nil && sp.Loop.Prompt != "" {
		add(sp.Loop.Prompt)
	}
	if b := sp.Template.Build; b != nil {
		if b.Context != sp.Workspace.Path && !spec.Within(sp.Workspace.Path, b.Context) {
			add(b.Context)
		} else {
			add(filepath.Join(b.Context, b.Dockerfile))
			add(filepath.Join(b.Context, ".dockerignore"))
		}
	}
	return func(rel string) bool { return set[foldName(rel)] }
}

// foldName is a path as a case-insensitive file system (macOS, Windows)
// sees it: ".GIT/Hooks" is .git/hooks there, and Windows drops trailing
// dots and spaces. Protected names are compared folded everywhere: on a
// case-sensitive system that protects a few more names, never fewer.
func foldName(rel string) string {
	parts := strings.Split(strings.ToLower(rel), "/")
	for i, p := range parts {
		parts[i] = strings.TrimRight(p, ". ")
	}
	return strings.Join(parts, "/")
}
