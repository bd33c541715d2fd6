package agenttest

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// customizeBase turns the debootstrapped tree root into the base's
// filesystem (see the package comment): trimmed and the agent user.
// useradd is the host's, run with --root (it chroots into root and uses
// root's /etc and /etc/skel). The agents and their configuration are
// added by compose.
func (c *Cache) customizeBase(ctx context.Context, root string) error {
	steps := []func() error{
		func() error { return trim(root) },
		func() error { return neutralEtc(root) },
		func() error { return c.addAgent(ctx, root) },
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
