package docker

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/sbxhq/sbx/internal/gitsync"
	"github.com/sbxhq/sbx/internal/untrusted"
	"github.com/sbxhq/sbx/spec"
)

// The git model. A sandbox never has the host's .git: while
// workspace.protect is on, its workspace's .git is a volume of its own
// (gitRole), seeded at create from the host's HEAD, refs and index, whose
// history reaches the host's objects through a relative alternate
// ("../sbx-host-objects", gitrepository-layout(5)) to the host's
// .git/objects, bound read-only inside it. The agent commits there; its
// commits reach the host only through git's fetch into refs/sbx/NAME/*
// (FetchGit, package gitsync): at the end of sbx loop, on sbx pull, and
// before the volume goes (a replace or destroy). So nothing of git's
// configuration surface the host reads — config, config.worktree,
// commondir, hooks/, info/, worktrees/, modules/ — is ever writable from
// inside, whatever is renamed on either side: .git is a mount point
// (busy), and replacing a file in the host's .git changes nothing the
// sandbox sees. A workspace without .git gets an empty one (sbx makes it,
// as the mount point), so a .git the agent makes later is in its volume
// too; a .git file (a linked worktree's) is bound read-only over itself.

// gitRole names a sandbox's own git directory's volume and its role.
const gitRole = "git"

// hostObjectsDir is where the host's objects are bound inside the
// sandbox's own git directory.
const hostObjectsDir = "sbx-host-objects"

// maxSeedEntries and maxSeedBytes bound what is copied from the host's
// .git into a new sandbox's (refs, index): a repository past them is
// refused rather than half-copied.
const (
	maxSeedEntries = 200_000
	maxSeedBytes   = 1 << 30
)

// protectGit adds to p what keeps the host's .git out of the sandbox's
// reach (see above). With create it makes the empty .git of a workspace
// that has none.
func (p *protection) protectGit(sp *spec.Spec, create bool) error {
	if sp.Workspace.ReadOnly {
		return nil
	}
	dotgit := filepath.Join(sp.Workspace.Path, ".git")
	fi, err := os.Lstat(dotgit)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if create {
			if err := os.Mkdir(dotgit, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
				return fmt.Errorf("workspace.protect: %v", err)
			}
		}
	case err != nil:
		return fmt.Errorf("workspace.protect: %v", err)
	case fi.Mode().IsRegular():
		// A linked worktree's or submodule's pointer: the directory it
		// names is not in the sandbox, and the file stays as it is.
		p.binds = append(p.binds, dotgit+":"+dotgit+":ro")
		p.paths = append(p.paths, dotgit)
		p.sources = append(p.sources, dotgit)
		return nil
	case !fi.IsDir():
		return fmt.Errorf("workspace.protect: %s is a %s, not git's directory or file; sbx binds no link or special file (remove it, or set workspace.protect: false)", dotgit, untrusted.Kind(fi.Mode()))
	}
	p.git = true
	p.binds = append(p.binds, volumeName(sp.Name, gitRole)+":"+dotgit)
	p.paths = append(p.paths, dotgit)
	// The host's .git (or the empty one sbx made) is the mount point: a
	// .git swapped in for it on the host would be what the sandbox sees.
	p.sources = append(p.sources, dotgit)
	objects := filepath.Join(dotgit, "objects")
	if fi, err := os.Lstat(objects); err == nil && fi.IsDir() {
		target := filepath.Join(dotgit, hostObjectsDir)
		p.binds = append(p.binds, objects+":"+target+":ro")
		p.paths = append(p.paths, target)
		p.sources = append(p.sources, objects)
		p.hostObjects = true
	}
	return nil
}

// gitSeed is the tar stream that starts a sandbox's own git directory:
// the host's HEAD, refs, packed-refs, shallow, index and info/exclude,
// and a config and alternates of sbx's. Everything is writable by any
// user inside (the sandbox's user is whoever its image says); the volume
// is the sandbox's alone. A host workspace without .git starts an empty
// directory the agent may git init.
func gitSeed(sp *spec.Spec, hostObjects bool) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	now := time.Now()
	// The stream is unpacked in the workspace, so that its first entry,
	// .git itself, sets the mode of the volume's root (a "." entry does
	// not: the daemon skips it).
	dir := func(name string) error {
		return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: path.Join(".git", name) + "/", Mode: 0o777, ModTime: now})
	}
	file := func(name string, data []byte) error {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: path.Join(".git", name), Mode: 0o666, Size: int64(len(data)), ModTime: now}); err != nil {
			return err
		}
		_, err := tw.Write(data)
		return err
	}
	if err := dir("."); err != nil {
		return nil, err
	}
	if !hostObjects {
		return buf.Bytes(), tw.Close()
	}
	// The host's .git is read within itself, no link followed, bounded:
	// an earlier sandbox without this model may have written it.
	host, err := os.OpenRoot(filepath.Join(sp.Workspace.Path, ".git"))
	if err != nil {
		return nil, err
	}
	defer host.Close()
	config := "[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = false\n\tlogallrefupdates = true\n"
	if c, err := untrusted.ReadRegular(host, "config", maxSeedBytes); err == nil && sha256Format(c) {
		config = "[core]\n\trepositoryformatversion = 1\n\tfilemode = true\n\tbare = false\n\tlogallrefupdates = true\n[extensions]\n\tobjectformat = sha256\n"
	}
	for _, d := range []string{"objects", "objects/info", "objects/pack", "refs", "refs/heads", "refs/tags", "info"} {
		if err := dir(d); err != nil {
			return nil, err
		}
	}
	if err := file("config", []byte(config)); err != nil {
		return nil, err
	}
	if err := file("objects/info/alternates", []byte("../"+hostObjectsDir+"\n")); err != nil {
		return nil, err
	}
	entries, size := 0, int64(0)
	copyFile := func(rel string) error {
		data, err := untrusted.ReadRegular(host, rel, maxSeedBytes-size)
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, untrusted.ErrNotRegular) {
			return nil
		}
		if errors.Is(err, untrusted.ErrTooLarge) {
			return fmt.Errorf("copying the host's .git into the sandbox's: more than %d bytes", maxSeedBytes)
		}
		if err != nil {
			return err
		}
		if entries++; entries > maxSeedEntries {
			return fmt.Errorf("copying the host's .git into the sandbox's: more than %d refs", maxSeedEntries)
		}
		size += int64(len(data))
		return file(rel, data)
	}
	for _, f := range []string{"HEAD", "packed-refs", "shallow", "index", "info/exclude"} {
		if err := copyFile(f); err != nil {
			return nil, err
		}
	}
	err = fs.WalkDir(host.FS(), "refs", func(rel string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			if rel == "refs" || rel == "refs/heads" || rel == "refs/tags" {
				return nil
			}
			return dir(rel)
		case d.Type().IsRegular():
			return copyFile(rel)
		}
		return nil // a link or special file in refs/ is no ref git writes
	})
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	return buf.Bytes(), tw.Close()
}

// sha256Format reports whether a git config sets extensions.objectFormat
// to sha256 (a line "objectformat = sha256", in any case and spacing).
func sha256Format(config []byte) bool {
	for _, line := range strings.Split(string(config), "\n") {
		if strings.EqualFold(strings.Join(strings.Fields(line), ""), "objectformat=sha256") {
			return true
		}
	}
	return false
}

// seedGit puts the seed into a created (not yet started) sandbox
// container's own git directory, unpacking it in its workspace ws.
func (e *engine) seedGit(ctx context.Context, id, ws string, seed []byte) error {
	_, err := e.do(ctx, http.MethodPut, "/containers/"+url.PathEscape(id)+"/archive", url.Values{"path": {ws}}, bytes.NewReader(seed), "application/x-tar")
	if err != nil {
		return fmt.Errorf("starting the sandbox's own git directory: %v", err)
	}
	return nil
}

// archive streams a path out of a container (GET archive), running or
// not; the caller closes it.
func (e *engine) archive(ctx context.Context, container, p string) (io.ReadCloser, error) {
	target := "/containers/" + url.PathEscape(container) + "/archive?" + url.Values{"path": {p}}.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://docker"+target, nil)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	resp, err := e.http().Do(req)
	status := 0
	if resp != nil {
		status = resp.StatusCode
	}
	e.run.TraceRequest("docker engine API GET "+target, status, time.Since(start), "(a tar stream, read as it comes)", err)
	if err != nil {
		return nil, fmt.Errorf("docker engine API GET archive %s: %v", p, err)
	}
	if resp.StatusCode >= 300 {
		data, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
		resp.Body.Close()
		return nil, refusal("docker engine API GET archive "+p, resp.StatusCode, data)
	}
	return resp.Body, nil
}

// FetchGit brings the commits of the sandbox's own git directory into
// the host's repository (refs/sbx/NAME/*, package gitsync) and says so on
// w. Its data comes out of the container as tar streams and is written,
// within bounds, into a scratch directory of sbx's; only git's data is
// taken (gitsync.Data), never the agent's config, hooks, commondir or
// alternates. A sandbox without its own git directory (protection off, or
// made by an earlier sbx) or a host workspace that is no repository
// brings nothing, and says why.
func (d *Driver) FetchGit(ctx context.Context, sp *spec.Spec, w io.Writer) error {
	in, err := d.api.inspectContainer(ctx, ContainerName(sp.Name))
	if err != nil {
		return err
	}
	if in == nil {
		return fmt.Errorf("sandbox %q does not exist", sp.Name)
	}
	return d.fetchGit(ctx, in, sp.Name, w)
}

func (d *Driver) fetchGit(ctx context.Context, in *inspect, name string, w io.Writer) error {
	ws := in.Config.Labels[labelWS]
	dotgit := gitDirOf(in, name)
	if dotgit == "" || ws == "" {
		fmt.Fprintf(w, "sandbox %q has no git directory of its own: nothing to fetch\n", name)
		return nil
	}
	hostWS := ""
	for _, m := range in.Mounts {
		if m.Type == "bind" && m.Destination == ws {
			hostWS = m.Source
		}
	}
	if hostWS == "" {
		return fmt.Errorf("sandbox %q: its workspace mount is gone", name)
	}
	return gitsync.Home(ctx, hostWS, name, w, func(root *os.Root) error {
		for _, part := range []string{"HEAD", "packed-refs", "shallow", "refs", "objects"} {
			if err := d.copyGitPart(ctx, in.ID, path.Join(dotgit, part), root); err != nil {
				return fmt.Errorf("%s: %v", part, err)
			}
		}
		return nil
	})
}

// copyGitPart copies one part of the sandbox's git directory into root:
// a tar stream whose entries are named from the part's base name.
func (d *Driver) copyGitPart(ctx context.Context, id, p string, root *os.Root) error {
	r, err := d.api.archive(ctx, id, p)
	if notFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	defer r.Close()
	return gitsync.Extract(ctx, r, root)
}

// gitDirOf is where a sandbox container has its own git directory
// mounted, "" when it has none.
func gitDirOf(in *inspect, name string) string {
	for _, m := range in.Mounts {
		if m.Type == "volume" && m.Name == volumeName(name, gitRole) {
			return m.Destination
		}
	}
	return ""
}

// fetchBeforeRemove brings a sandbox's commits home before its git volume
// is removed; there is nothing to do without its container or volume.
func (d *Driver) fetchBeforeRemove(ctx context.Context, name string) error {
	in, err := d.api.inspectContainer(ctx, ContainerName(name))
	if err != nil || in == nil || gitDirOf(in, name) == "" {
		return err
	}
	return d.fetchGit(ctx, in, name, io.Discard)
}
