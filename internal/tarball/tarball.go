// Package tarball moves a directory tree as a tar stream between sbx and a
// sandbox it shares no filesystem with (the kubernetes driver's workspace
// volume, seeded from the host and pulled back).
//
// Write reads a tree as package untrusted reads anything an agent may have
// written: no symlink followed (a link is archived as its text), nothing
// but directories, regular files and links opened, bounded work.
//
// Extract writes a stream that a hostile agent may have made. What it
// guarantees:
//
//   - Nothing is written outside the root. Every name must be local (no
//     absolute path, no "..", no volume name); every create goes through
//     os.Root; no entry is written through a symlink or below one, whether
//     the stream made the link or it was there before (an existing link
//     in a file's place is replaced, never followed); a link the stream
//     makes must be relative and resolve inside the root as the kernel
//     resolves it: through the links already there, its own and the
//     host's ("s -> .", then "t -> s/.." climbs out of the root, though
//     "s/.." looks local). Because a later link can change where an
//     earlier one leads, every link the stream made is resolved again
//     once the stream ends, and one that now leads out is removed.
//   - Nothing but directories, regular files and such links is made:
//     hard links, devices, FIFOs and sockets are skipped and reported, and
//     modes lose setuid, setgid, sticky and group/other write bits.
//   - Protected paths (the sandbox's own declaration, its prompt) are
//     never written; entries at or under them are skipped and reported.
//   - Nothing of git's configuration surface is written unless the
//     stream is the host's own (HostGit): of a .git directory at any depth only objects, refs, logs,
//     HEAD, ORIG_HEAD, index and packed-refs (gitdir.Copyable); config,
//     config.worktree, commondir, hooks, info, worktrees, modules and a
//     .git file or link are skipped and reported, so git on the host
//     never takes configuration from the stream.
//   - The work is bounded: total bytes, one file's bytes and the number of
//     entries; past a bound the extraction stops with an error (what was
//     written stays; nothing is written past it).
//   - Nothing is deleted but a regular file or symlink the stream
//     replaces; a directory is never replaced by a file or link.
package tarball

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/sbxhq/sbx/internal/gitdir"
	"github.com/sbxhq/sbx/internal/untrusted"
)

// Limits bound one stream, in either direction.
type Limits struct {
	MaxBytes   int64 // file content in total
	MaxFile    int64 // one file's content
	MaxEntries int
}

// DefaultLimits are the bounds of a workspace copy.
var DefaultLimits = Limits{MaxBytes: 8 << 30, MaxFile: 2 << 30, MaxEntries: 1_000_000}

// ErrLimit is the cause of a stream that exceeds its Limits.
var ErrLimit = errors.New("over the limit")

// Stats say what a stream held.
type Stats struct {
	Dirs, Files, Links int
	Bytes              int64
	// Skipped lists entries not copied, each with why ("a/fifo: a named
	// pipe"); at most maxSkipped are kept, SkippedMore counts the rest.
	Skipped     []string `json:",omitempty"`
	SkippedMore int      `json:",omitempty"`
	// ProtectedSame counts the protected files and links not written
	// because the root already holds the same: they are not among
	// Skipped, which names what was left different.
	ProtectedSame int `json:",omitempty"`
}

const maxSkipped = 100

func (s *Stats) skip(name, why string) {
	if len(s.Skipped) < maxSkipped {
		s.Skipped = append(s.Skipped, name+": "+why)
	} else {
		s.SkippedMore++
	}
}

// Write writes the tree under root to w as a tar stream: directories,
// regular files and symlinks (their text), with slash-separated relative
// names; anything else is skipped. Modes keep their permission bits only;
// owners and times are not kept.
func Write(ctx context.Context, root *os.Root, w io.Writer, lim Limits) (*Stats, error) {
	st := &Stats{}
	tw := tar.NewWriter(w)
	entries := 0
	err := untrusted.Walk(ctx, root, func(e *untrusted.Entry) error {
		if e.Err != nil {
			return fmt.Errorf("%s: %w", e.Path, e.Err)
		}
		entries++
		if entries > lim.MaxEntries {
			return fmt.Errorf("more than %d entries: %w", lim.MaxEntries, ErrLimit)
		}
		mode := e.Info.Mode()
		switch {
		case mode.IsDir():
			st.Dirs++
			return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: e.Path + "/", Mode: int64(mode.Perm())})
		case mode&fs.ModeSymlink != 0:
			target, err := e.Readlink()
			if err != nil {
				return err
			}
			st.Links++
			return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeSymlink, Name: e.Path, Linkname: target, Mode: 0o777})
		case mode.IsRegular():
			f, info, err := e.Open()
			if err != nil {
				return err
			}
			defer f.Close()
			size := info.Size()
			if size > lim.MaxFile {
				return fmt.Errorf("%s: %d bytes, more than %d: %w", e.Path, size, lim.MaxFile, ErrLimit)
			}
			if st.Bytes+size > lim.MaxBytes {
				return fmt.Errorf("more than %d bytes: %w", lim.MaxBytes, ErrLimit)
			}
			if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: e.Path, Mode: int64(info.Mode().Perm()), Size: size}); err != nil {
				return err
			}
			// The file may have changed size since its fstat: copy
			// exactly what the header says, or fail.
			n, err := io.Copy(tw, io.LimitReader(f, size))
			if err == nil && n != size {
				err = fmt.Errorf("%s: shrank while being read", e.Path)
			}
			if err != nil {
				return err
			}
			st.Files++
			st.Bytes += size
			return nil
		}
		st.skip(e.Path, untrusted.Kind(mode))
		return nil
	})
	if err != nil {
		return st, err
	}
	return st, tw.Close()
}

// ExtractOptions say what Extract may not write.
type ExtractOptions struct {
	Limits Limits
	// Protected reports whether a slash-separated path relative to the
	// root must not be written (nor anything under it).
	Protected func(name string) bool
	// HostGit says the stream comes from the host (a copy into the
	// sandbox), so .git's configuration is copied like any file; without
	// it only git's data is (gitdir.Copyable).
	HostGit bool
	// NoGit says the root's own .git is not written at all: a sandbox's
	// commits come home by git's fetch (package gitsync). Its data is
	// skipped without a word; its configuration is still named among the
	// skipped entries.
	NoGit bool
}

// Extract reads the tar stream r into root (see the package comment for
// what it refuses). It returns what it copied and skipped; an error ends
// it early.
func Extract(ctx context.Context, r io.Reader, root *os.Root, o ExtractOptions) (*Stats, error) {
	st := &Stats{}
	tr := tar.NewReader(r)
	// dirs are the directories this extraction made or found to be real
	// directories, so a path's parents are checked once.
	dirs := map[string]bool{".": true}
	// links are the symbolic links this extraction made, checked again
	// when it ends, however it ends.
	var links []madeLink
	defer func() { recheck(root, links, st) }()
	entries := 0
	for {
		if err := ctx.Err(); err != nil {
			return st, err
		}
		h, err := tr.Next()
		if err == io.EOF {
			return st, nil
		}
		if err != nil {
			return st, fmt.Errorf("reading the archive: %v", err)
		}
		entries++
		if entries > o.Limits.MaxEntries {
			return st, fmt.Errorf("more than %d entries: %w", o.Limits.MaxEntries, ErrLimit)
		}
		name, ok := localName(h.Name)
		if !ok {
			st.skip(printable(h.Name), "not a path inside the workspace")
			continue
		}
		if name == "." {
			continue
		}
		if !o.HostGit && !gitdir.Copyable(name, h.Typeflag == tar.TypeDir) {
			st.skip(name, "git's configuration (of a .git only objects, refs, logs, HEAD, index and packed-refs are copied)")
			continue
		}
		if o.NoGit && (gitdir.Fold(name) == ".git" || strings.HasPrefix(gitdir.Fold(name), ".git/")) {
			continue
		}
		if o.Protected != nil && protected(name, o.Protected) {
			switch same, err := sameAsRoot(root, name, h, tr, o.Limits.MaxFile); {
			case err != nil:
				return st, err
			case same && h.Typeflag == tar.TypeDir:
			case same:
				st.ProtectedSame++
			default:
				st.skip(name, "protected (the sandbox's declaration)")
			}
			continue
		}
		if why := parentsOK(root, name, dirs); why != "" {
			st.skip(name, why)
			continue
		}
		switch h.Typeflag {
		case tar.TypeDir:
			if err := mkdir(root, name, perm(h.Mode, true)); err != nil {
				st.skip(name, err.Error())
				continue
			}
			dirs[name] = true
			st.Dirs++
		case tar.TypeReg:
			if h.Size > o.Limits.MaxFile {
				return st, fmt.Errorf("%s: %d bytes, more than %d: %w", untrusted.Text(name), h.Size, o.Limits.MaxFile, ErrLimit)
			}
			if st.Bytes+h.Size > o.Limits.MaxBytes {
				return st, fmt.Errorf("more than %d bytes: %w", o.Limits.MaxBytes, ErrLimit)
			}
			if why, err := writeFile(root, name, perm(h.Mode, false), tr, h.Size); err != nil {
				return st, err
			} else if why != "" {
				st.skip(name, why)
				continue
			}
			st.Files++
			st.Bytes += h.Size
		case tar.TypeSymlink:
			if !linkInside(name, h.Linkname) || !resolvesInside(root, name, h.Linkname) {
				st.skip(name, fmt.Sprintf("a symbolic link to %s, outside the workspace or absolute", printable(h.Linkname)))
				continue
			}
			if why := replaceable(root, name); why != "" {
				st.skip(name, why)
				continue
			}
			if err := root.Symlink(h.Linkname, name); err != nil {
				st.skip(name, err.Error())
				continue
			}
			links = append(links, madeLink{name, h.Linkname})
			st.Links++
		default:
			st.skip(name, kindOf(h.Typeflag))
		}
	}
}

// localName cleans a tar entry's name; ok is false for a name that is
// absolute, leaves the root, or is not a clean local path on this system.
func localName(n string) (string, bool) {
	if n == "" || strings.ContainsRune(n, 0) || strings.HasPrefix(n, "/") || strings.Contains(n, `\`) {
		return "", false
	}
	c := path.Clean(strings.TrimSuffix(n, "/"))
	if c == "." {
		return ".", true
	}
	if !filepath.IsLocal(filepath.FromSlash(c)) {
		return "", false
	}
	for _, part := range strings.Split(c, "/") {
		if part == ".." {
			return "", false
		}
	}
	return c, true
}

// sameAsRoot reports whether the entry h, whose content r holds, is what
// root already has at name: a directory where there is one, a link with
// the same text, a regular file with the same bytes. A protected entry
// that is the same was not changed in the sandbox, and is not worth a
// line of the pull's report. Only a regular file of the root is read
// (never through a link), and only up to the entry's size; an entry over
// maxFile counts as changed unread. The error is the stream's.
func sameAsRoot(root *os.Root, name string, h *tar.Header, r io.Reader, maxFile int64) (bool, error) {
	fi, err := root.Lstat(name)
	if err != nil {
		return false, nil
	}
	switch h.Typeflag {
	case tar.TypeDir:
		return fi.IsDir(), nil
	case tar.TypeSymlink:
		target, err := root.Readlink(name)
		return fi.Mode()&fs.ModeSymlink != 0 && err == nil && target == h.Linkname, nil
	case tar.TypeReg:
	default:
		return false, nil
	}
	if !fi.Mode().IsRegular() || fi.Size() != h.Size || h.Size > maxFile {
		return false, nil
	}
	f, err := root.Open(name)
	if err != nil {
		return false, nil
	}
	defer f.Close()
	if now, err := f.Stat(); err != nil || !os.SameFile(fi, now) {
		return false, nil
	}
	a, b := make([]byte, 32<<10), make([]byte, 32<<10)
	for left := h.Size; left > 0; {
		n := int(min(left, int64(len(a))))
		if _, err := io.ReadFull(r, a[:n]); err != nil {
			return false, fmt.Errorf("reading the archive: %v", err)
		}
		if _, err := io.ReadFull(f, b[:n]); err != nil || !bytes.Equal(a[:n], b[:n]) {
			return false, nil
		}
		left -= int64(n)
	}
	return true, nil
}

func protected(name string, p func(string) bool) bool {
	for n := name; ; {
		if p(n) {
			return true
		}
		i := strings.LastIndexByte(n, '/')
		if i < 0 {
			return false
		}
		n = n[:i]
	}
}

// parentsOK checks that every parent of name is a real directory (made
// when missing), never a symlink or a file: writing below a link would
// write wherever it points, even inside the root (into a protected path).
func parentsOK(root *os.Root, name string, dirs map[string]bool) string {
	parent := path.Dir(name)
	if dirs[parent] {
		return ""
	}
	parts := strings.Split(parent, "/")
	for i := range parts {
		p := strings.Join(parts[:i+1], "/")
		if dirs[p] {
			continue
		}
		fi, err := root.Lstat(p)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			if err := root.Mkdir(p, 0o755); err != nil {
				return "cannot create its directory: " + err.Error()
			}
		case err != nil:
			return err.Error()
		case !fi.IsDir():
			return fmt.Sprintf("%s is a %s, not a directory", p, untrusted.Kind(fi.Mode()))
		}
		dirs[p] = true
	}
	return ""
}

// replaceable removes a regular file or symlink at name so that something
// new can be made there; it refuses to replace anything else.
func replaceable(root *os.Root, name string) string {
	fi, err := root.Lstat(name)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return ""
	case err != nil:
		return err.Error()
	case fi.IsDir():
		return "a directory is there"
	case !fi.Mode().IsRegular() && fi.Mode()&fs.ModeSymlink == 0:
		return "a " + untrusted.Kind(fi.Mode()) + " is there"
	}
	if err := root.Remove(name); err != nil {
		return err.Error()
	}
	return ""
}

func mkdir(root *os.Root, name string, mode fs.FileMode) error {
	fi, err := root.Lstat(name)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return root.Mkdir(name, mode)
	case err != nil:
		return err
	case !fi.IsDir():
		return fmt.Errorf("a %s is there", untrusted.Kind(fi.Mode()))
	}
	return nil
}

// writeFile makes name from the next size bytes of r; why says why it did
// not (the entry's content is then skipped).
func writeFile(root *os.Root, name string, mode fs.FileMode, r io.Reader, size int64) (why string, err error) {
	if why := replaceable(root, name); why != "" {
		return why, nil
	}
	// O_EXCL: what is made is a new file, never an existing one reached
	// through a link.
	f, err := root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return err.Error(), nil
	}
	n, err := io.Copy(f, io.LimitReader(r, size))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil && n != size {
		err = io.ErrUnexpectedEOF
	}
	if err != nil {
		return "", fmt.Errorf("%s: %v", untrusted.Text(name), err)
	}
	return "", nil
}

// linkInside reports whether a symlink at name with this target is
// relative and resolves (lexically) inside the root.
func linkInside(name, target string) bool {
	if target == "" || strings.HasPrefix(target, "/") || strings.Contains(target, `\`) || strings.ContainsRune(target, 0) {
		return false
	}
	resolved := path.Join(path.Dir(name), target)
	return resolved != ".." && !strings.HasPrefix(resolved, "../") && filepath.IsLocal(filepath.FromSlash(resolved))
}

// maxLinks is how many symbolic links one resolution follows before it
// gives up, as Linux's does (path_resolution(7): ELOOP after 40).
const maxLinks = 40

// madeLink is a symbolic link an extraction made.
type madeLink struct{ name, target string }

// resolvesInside reports whether the symbolic link at name (slash-separated,
// relative to the root) with this target leads inside the root when the
// kernel resolves it through the tree as it is now: component by
// component, following every link on the way (".." goes up from where a
// link really leads, not from its text). A component that does not exist
// is taken as it reads; recheck looks again once the tree is complete.
// A resolution that follows more than maxLinks links does not lead inside.
func resolvesInside(root *os.Root, name, target string) bool {
	hops := 0
	_, ok := resolve(root, parts(path.Dir(name)), target, &hops)
	return ok
}

// parts splits a clean slash-separated path into its names; "." has none.
func parts(p string) []string {
	if p == "." || p == "" {
		return nil
	}
	return strings.Split(p, "/")
}

// resolve walks target from the directory dir (names from the root, with
// no link among them) and returns where it leads, or false when it leaves
// the root, is absolute, or follows more than maxLinks links.
func resolve(root *os.Root, dir []string, target string, hops *int) ([]string, bool) {
	if target == "" || strings.HasPrefix(target, "/") || strings.Contains(target, `\`) || strings.ContainsRune(target, 0) {
		return nil, false
	}
	cur := append([]string(nil), dir...)
	for _, p := range strings.Split(target, "/") {
		switch p {
		case "", ".":
			continue
		case "..":
			if len(cur) == 0 {
				return nil, false
			}
			cur = cur[:len(cur)-1]
			continue
		}
		cur = append(cur, p)
		fi, err := root.Lstat(strings.Join(cur, "/"))
		if err != nil || fi.Mode()&fs.ModeSymlink == 0 {
			continue
		}
		if *hops++; *hops > maxLinks {
			return nil, false
		}
		next, err := root.Readlink(strings.Join(cur, "/"))
		if err != nil {
			return nil, false
		}
		var ok bool
		if cur, ok = resolve(root, cur[:len(cur)-1], next, hops); !ok {
			return nil, false
		}
	}
	return cur, true
}

// recheck resolves again every link the extraction made, with the tree as
// the whole stream left it, and removes each one that now leads out of
// the root (a later link in the stream changed the way), reporting it.
// All are judged before any is removed: a link whose way passes through
// one that leads out leads out too, so no link that stays changes.
func recheck(root *os.Root, links []madeLink, st *Stats) {
	var out []madeLink
	for _, l := range links {
		if now, err := root.Readlink(l.name); err != nil || now != l.target {
			continue // replaced by a later entry of the stream
		}
		if !resolvesInside(root, l.name, l.target) {
			out = append(out, l)
		}
	}
	for _, l := range out {
		why := fmt.Sprintf("a symbolic link to %s that leads outside the workspace (or round a loop) once the other links are made: removed", printable(l.target))
		if err := root.Remove(l.name); err != nil {
			why = fmt.Sprintf("a symbolic link to %s that leads outside the workspace (or round a loop) once the other links are made, and could not be removed: %v", printable(l.target), err)
		} else {
			st.Links--
		}
		st.skip(l.name, why)
	}
}

// perm keeps the permission bits a workspace file may have: no setuid,
// setgid or sticky bit, no write for group or others.
func perm(mode int64, dir bool) fs.FileMode {
	p := fs.FileMode(mode) & 0o755
	if dir {
		p |= 0o700
	} else {
		p |= 0o600
	}
	return p
}

func kindOf(t byte) string {
	switch t {
	case tar.TypeLink:
		return "a hard link"
	case tar.TypeChar:
		return "a character device"
	case tar.TypeBlock:
		return "a block device"
	case tar.TypeFifo:
		return "a named pipe"
	}
	return fmt.Sprintf("an entry of tar type %q", t)
}

// printable shortens and quotes a name from the stream for a message.
func printable(s string) string {
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return fmt.Sprintf("%q", s)
}
