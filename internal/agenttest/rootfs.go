package agenttest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// customize turns the debootstrapped tree root into the template's
// filesystem (see the package comment): trimmed, the agent user, the
// agents and their configuration. useradd is the host's, run with
// --root (it chroots into root and uses root's /etc and /etc/skel).
func (c *Cache) customize(ctx context.Context, root string, t Tools) error {
	steps := []func() error{
		func() error { return trim(root) },
		func() error { return neutralEtc(root) },
		func() error { return c.addAgent(ctx, root) },
		func() error { return installClaude(root, t.Claude) },
		func() error { return installCodex(root, t.CodexDir) },
		func() error { return writeConfig(root, "root", 0) },
		func() error { return writeConfig(root, strings.TrimPrefix(agentHome, "/"), agentID) },
	}
	for _, step := range steps {
		if err := step(); err != nil {
			return err
		}
	}
	return nil
}

// trim removes what only takes room: apt's downloaded packages and lists
// (apt-get update brings them back), manuals, info pages, translations,
// and documentation but for copyright files.
func trim(root string) error {
	for _, dir := range []string{"var/cache/apt/archives", "var/lib/apt/lists"} {
		if err := removeFiles(filepath.Join(root, dir), func(string) bool { return false }); err != nil {
			return err
		}
	}
	for _, dir := range []string{"usr/share/man", "usr/share/info", "usr/share/locale"} {
		if err := emptyDir(filepath.Join(root, dir)); err != nil {
			return err
		}
	}
	bins, err := filepath.Glob(filepath.Join(root, "var/cache/apt/*.bin"))
	if err != nil {
		return err
	}
	for _, b := range bins {
		if err := os.Remove(b); err != nil {
			return err
		}
	}
	return removeFiles(filepath.Join(root, "usr/share/doc"), func(p string) bool { return filepath.Base(p) == "copyright" })
}

// removeFiles removes the regular files and symlinks under dir that keep
// does not keep; directories stay.
func removeFiles(dir string, keep func(string) bool) error {
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() || keep(p) {
			return nil
		}
		return os.Remove(p)
	})
}

// emptyDir removes what dir holds, keeping dir.
func emptyDir(dir string) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, e := range entries {
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			return err
		}
	}
	return nil
}

// neutralEtc replaces what debootstrap copied from the host (its
// resolv.conf and hostname; Docker mounts its own over both) and points
// apt at Debian's own mirror, whichever mirror built the image.
func neutralEtc(root string) error {
	files := []struct {
		name, content string
	}{
		{"etc/resolv.conf", ""},
		{"etc/hostname", ""},
		{"etc/apt/sources.list", sourcesList},
	}
	for _, f := range files {
		p := filepath.Join(root, f.name)
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		if err := os.WriteFile(p, []byte(f.content), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// addAgent makes the agent user and its group, uid and gid 1000, its home
// from /etc/skel, and checks the passwd entry that came of it.
func (c *Cache) addAgent(ctx context.Context, root string) error {
	useradd, err := sbin("useradd")
	if err != nil {
		return err
	}
	id := fmt.Sprint(agentID)
	if _, err := c.Runner.Output(ctx, useradd, "--root", root, "--create-home", "--home-dir", agentHome,
		"--uid", id, "--user-group", "--shell", "/bin/bash", agentUser); err != nil {
		return err
	}
	passwd, err := os.ReadFile(filepath.Join(root, "etc/passwd"))
	if err != nil {
		return err
	}
	want := fmt.Sprintf("%s:x:%d:%d::%s:/bin/bash", agentUser, agentID, agentID, agentHome)
	for _, line := range strings.Split(string(passwd), "\n") {
		if line == want {
			return nil
		}
	}
	return fmt.Errorf("useradd made no %q in /etc/passwd", want)
}

// installClaude puts Claude Code's binary at /usr/local/bin/claude, where
// the npm package's postinstall would leave it on PATH: the binary
// itself, with no wrapper.
func installClaude(root, claude string) error {
	dst := filepath.Join(root, "usr/local/bin/claude")
	if err := linkFile(claude, dst); err != nil {
		return err
	}
	return own(dst, 0, 0o755)
}

// installCodex puts Codex's vendor directory at /opt/codex, the wrapper
// at /usr/local/bin/codex and ripgrep at /usr/local/bin/rg. The files are
// the cache's, hard-linked: making them root's makes the cache's root's.
func installCodex(root, vendor string) error {
	dst := filepath.Join(root, strings.TrimPrefix(codexDir, "/"))
	if err := linkTree(vendor, dst); err != nil {
		return err
	}
	if err := filepath.WalkDir(dst, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, 0, 0)
	}); err != nil {
		return err
	}
	bin := filepath.Join(root, "usr/local/bin")
	if err := os.WriteFile(filepath.Join(bin, "codex"), []byte(codexWrapper), 0o755); err != nil {
		return err
	}
	return os.Symlink(codexDir+"/codex-path/rg", filepath.Join(bin, "rg"))
}

// writeConfig writes home's .codex/config.toml (home relative to root),
// owned by uid.
func writeConfig(root, home string, uid int) error {
	dir := filepath.Join(root, home, ".codex")
	if err := os.Mkdir(dir, 0o700); err != nil {
		return err
	}
	if err := own(dir, uid, 0o700); err != nil {
		return err
	}
	file := filepath.Join(dir, "config.toml")
	if err := os.WriteFile(file, []byte(codexConfig), 0o644); err != nil {
		return err
	}
	return own(file, uid, 0o644)
}

// own gives p to uid (and the group of the same number) with mode perm.
func own(p string, uid int, perm os.FileMode) error {
	if err := os.Lchown(p, uid, uid); err != nil {
		return err
	}
	return os.Chmod(p, perm)
}

// linkTree makes dst a copy of the tree src with hard links to its files
// (a copy where the file systems differ): the image's /opt/codex from the
// cache, without copying 400 MB. Both trees are this package's own.
func linkTree(src, dst string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			return os.MkdirAll(target, info.Mode().Perm())
		case d.Type()&fs.ModeSymlink != 0:
			link, err := os.Readlink(p)
			if err != nil {
				return err
			}
			return os.Symlink(link, target)
		case d.Type().IsRegular():
			return linkFile(p, target)
		}
		return fmt.Errorf("%s: not a file, directory or symlink", rel)
	})
}

// linkFile hard-links src at dst, or copies it when that fails.
func linkFile(src, dst string) error {
	if err := os.Link(src, dst); err == nil {
		return nil
	}
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	info, err := in.Stat()
	if err != nil {
		return err
	}
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, info.Mode().Perm())
	if err != nil {
		return err
	}
	_, err = io.Copy(out, in)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return errors.Join(err, os.Remove(dst))
	}
	return nil
}
