package agenttest

import (
	"archive/tar"
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"
)

// layerEntry is one entry the agents add to the base: its header, and a
// regular file's content, read from src (a file of the cache) or body.
type layerEntry struct {
	hdr  *tar.Header
	src  string
	body string
}

// layer builds the list of what the agents add, parents before children.
type layer struct {
	entries []layerEntry
	mtime   time.Time // of the entries made here rather than copied
}

// agentLayer is what the agents add to the base (see the package
// comment): Claude Code's binary, Codex's vendor directory, its wrapper
// and ripgrep's link, and Codex's config in root's and the agent's
// homes, each with its owner and mode. The homes and the directories the
// files go into are the base's.
func agentLayer(t Tools, now time.Time) ([]layerEntry, error) {
	l := &layer{mtime: now}
	if err := l.file("usr/local/bin/claude", t.Claude, 0, 0o755); err != nil {
		return nil, err
	}
	if err := l.tree(strings.TrimPrefix(codexDir, "/"), t.CodexDir); err != nil {
		return nil, err
	}
	l.text("usr/local/bin/codex", codexWrapper, 0, 0o755)
	l.add(&tar.Header{Typeflag: tar.TypeSymlink, Name: "usr/local/bin/rg", Linkname: codexDir + "/codex-path/rg", Mode: 0o777})
	homes := []struct {
		dir string
		uid int
	}{{"root", 0}, {strings.TrimPrefix(agentHome, "/"), agentID}}
	for _, h := range homes {
		l.add(&tar.Header{Typeflag: tar.TypeDir, Name: h.dir + "/.codex", Mode: 0o700, Uid: h.uid, Gid: h.uid})
		l.text(h.dir+"/.codex/config.toml", codexConfig, h.uid, 0o644)
	}
	return l.entries, nil
}

// add appends h under its tar name: "./" and the slash-separated path
// relative to /, directories with a trailing slash (GNU tar's names, as
// the base's are written). An mtime of its own it keeps.
func (l *layer) add(h *tar.Header) *layerEntry {
	h.Name = "./" + h.Name
	if h.Typeflag == tar.TypeDir {
		h.Name += "/"
	}
	if h.ModTime.IsZero() {
		h.ModTime = l.mtime
	}
	l.entries = append(l.entries, layerEntry{hdr: h})
	return &l.entries[len(l.entries)-1]
}

// text adds a regular file holding body.
func (l *layer) text(name, body string, uid int, perm int64) {
	l.add(&tar.Header{Typeflag: tar.TypeReg, Name: name, Size: int64(len(body)), Mode: perm, Uid: uid, Gid: uid}).body = body
}

// file adds a copy of the regular file src, owned by uid.
func (l *layer) file(name, src string, uid int, perm int64) error {
	fi, err := os.Lstat(src)
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%s: not a regular file", src)
	}
	l.add(&tar.Header{Typeflag: tar.TypeReg, Name: name, Size: fi.Size(), Mode: perm, Uid: uid, Gid: uid, ModTime: fi.ModTime()}).src = src
	return nil
}

// tree adds the tree src at name, root's, with its modes and symlinks:
// what internal/tarball's extraction made of a verified tarball, so
// nothing but directories, regular files and links inside it.
func (l *layer) tree(name, src string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		target := path.Join(name, filepath.ToSlash(rel))
		fi, err := d.Info()
		if err != nil {
			return err
		}
		perm := int64(fi.Mode().Perm())
		switch {
		case d.IsDir():
			l.add(&tar.Header{Typeflag: tar.TypeDir, Name: target, Mode: perm, ModTime: fi.ModTime()})
			return nil
		case d.Type()&fs.ModeSymlink != 0:
			link, err := os.Readlink(p)
			if err != nil {
				return err
			}
			l.add(&tar.Header{Typeflag: tar.TypeSymlink, Name: target, Linkname: link, Mode: 0o777, ModTime: fi.ModTime()})
			return nil
		case d.Type().IsRegular():
			return l.file(target, p, 0, perm)
		}
		return fmt.Errorf("%s: not a file, directory or symlink", p)
	})
}

// compose writes the image's filesystem to the tar file dst: every entry
// of the base's tar as it is (owners, modes, setuid bits, hard links,
// device nodes and absolute links of a Debian system, which a confined
// extraction would refuse and only root could make), then the agents'
// (agentLayer). Nothing of either is unpacked on the host: entries are
// copied from one stream to the other. A base that already has a path
// the agents add, or lacks a directory they go into, is refused. dst is
// written under a temporary name renamed into place.
func (c *Cache) compose(ctx context.Context, base string, t Tools, dst string, log io.Writer) error {
	start := time.Now()
	entries, err := agentLayer(t, start.Truncate(time.Second))
	if err != nil {
		return err
	}
	in, err := os.Open(base)
	if err != nil {
		return err
	}
	defer in.Close()
	tmp := filepath.Join(filepath.Dir(dst), tmpPrefix+filepath.Base(dst))
	out, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	err = writeComposed(ctx, out, bufio.NewReaderSize(in, 1<<20), entries)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return errors.Join(err, os.Remove(tmp))
	}
	if err := os.Rename(tmp, dst); err != nil {
		return err
	}
	fmt.Fprintf(log, "agenttest: wrote %s (%s): the base and %s, in %s\n", dst, fileSize(dst), c.Pins, time.Since(start).Round(time.Second))
	return nil
}

// writeComposed writes the base's tar stream and then entries to w as
// one tar stream.
func writeComposed(ctx context.Context, w io.Writer, base io.Reader, entries []layerEntry) error {
	bw := bufio.NewWriterSize(w, 1<<20)
	tw := tar.NewWriter(bw)
	adds := map[string]bool{}
	for _, e := range entries {
		adds[entryPath(e.hdr.Name)] = true
	}
	dirs, err := copyBase(ctx, tw, base, adds)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if err := writeEntry(tw, e, dirs); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return bw.Flush()
}

// copyBase copies every entry of the tar stream r to tw and returns the
// paths of its directories. An entry at a path in adds fails the copy:
// the agents' files would shadow the base's.
func copyBase(ctx context.Context, tw *tar.Writer, r io.Reader, adds map[string]bool) (map[string]bool, error) {
	tr := tar.NewReader(r)
	dirs := map[string]bool{}
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		h, err := tr.Next()
		if err == io.EOF {
			return dirs, nil
		}
		if err != nil {
			return nil, fmt.Errorf("reading the base: %w", err)
		}
		p := entryPath(h.Name)
		if adds[p] {
			return nil, fmt.Errorf("the base already has /%s, which the agents add", p)
		}
		if h.Typeflag == tar.TypeDir {
			dirs[p] = true
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, fmt.Errorf("the base's %s: %w", h.Name, err)
		}
		if _, err := io.Copy(tw, tr); err != nil {
			return nil, fmt.Errorf("the base's %s: %w", h.Name, err)
		}
	}
}

// writeEntry writes one of the agents' entries, whose directory must be
// in dirs (the base's, or the agents' own written before it).
func writeEntry(tw *tar.Writer, e layerEntry, dirs map[string]bool) error {
	p := entryPath(e.hdr.Name)
	if parent := path.Dir(p); parent != "." && !dirs[parent] {
		return fmt.Errorf("the base has no directory /%s for /%s", parent, p)
	}
	if e.hdr.Typeflag == tar.TypeDir {
		dirs[p] = true
	}
	if err := tw.WriteHeader(e.hdr); err != nil {
		return err
	}
	if e.src == "" {
		_, err := io.WriteString(tw, e.body)
		return err
	}
	f, err := os.Open(e.src)
	if err != nil {
		return err
	}
	defer f.Close()
	// The header has the size the file had when the layer was listed;
	// exactly that much is copied, or the file changed and this fails.
	n, err := io.Copy(tw, io.LimitReader(f, e.hdr.Size))
	if err == nil && n != e.hdr.Size {
		err = fmt.Errorf("%s shrank while being copied", e.src)
	}
	return err
}

// entryPath is a tar name as a path relative to /: "./usr/bin/" is
// "usr/bin", "./" is ".".
func entryPath(name string) string {
	return path.Clean(strings.TrimPrefix(name, "./"))
}
