package agenttest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/sbxhq/sbx/driver/runner"
)

// ErrNeedRoot is the cause of a build on a machine where the template is
// not built yet and this process is not root: debootstrap needs root.
var ErrNeedRoot = errors.New("building the template needs root (debootstrap)")

// ErrNoDebootstrap is the cause of a build where debootstrap is not
// installed (Debian package debootstrap).
var ErrNoDebootstrap = errors.New("building the template needs debootstrap (apt-get install debootstrap)")

// Template returns the template image of the cache the environment names
// (New(os.Getenv)), building it if needed; log gets progress lines.
func Template(ctx context.Context, log io.Writer) (string, error) {
	return New(os.Getenv).Template(ctx, log)
}

// Image is the template's name and tag: sbx-agent-template:KEY[:12].
func (c *Cache) Image() string { return imageRepo + ":" + c.Key()[:12] }

// Template returns the template image, built once per key: at once if
// Docker has it; else imported from the cached rootfs.tar; else built
// (debootstrap and the agents' download run side by side), imported, and
// older images and cache entries removed.
func (c *Cache) Template(ctx context.Context, log io.Writer) (string, error) {
	image := c.Image()
	if ok, err := c.imageExists(ctx, image); err != nil || ok {
		return done(image, err)
	}
	tar := filepath.Join(c.keyDir(), "rootfs.tar")
	if _, err := os.Stat(tar); err != nil && os.Geteuid() != 0 {
		return "", ErrNeedRoot
	}
	l, err := c.lock(ctx)
	if err != nil {
		return "", err
	}
	defer l.Release()
	// Another process may have made it while this one waited.
	if ok, err := c.imageExists(ctx, image); err != nil || ok {
		return done(image, err)
	}
	log = &syncWriter{w: log}
	if _, err := os.Stat(tar); err != nil {
		if err := c.buildRootfs(ctx, tar, log); err != nil {
			return "", err
		}
	}
	if err := c.importImage(ctx, tar, image, log); err != nil {
		return "", err
	}
	for _, err := range []error{c.pruneImages(ctx, image, log), c.pruneKeys()} {
		if err != nil {
			fmt.Fprintf(log, "agenttest: pruning: %v\n", err)
		}
	}
	return image, nil
}

// done is image, or nothing when err says it could not be had.
func done(image string, err error) (string, error) {
	if err != nil {
		return "", err
	}
	return image, nil
}

// syncWriter lets the download and debootstrap, which run side by side,
// share the caller's log.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

// imageExists asks Docker whether it has image; docker image ls lists
// nothing, without failing, when it does not.
func (c *Cache) imageExists(ctx context.Context, image string) (bool, error) {
	out, err := c.Runner.Output(ctx, "docker", "image", "ls", "--quiet", image)
	return len(bytes.TrimSpace(out)) > 0, err
}

// buildRootfs writes the template's filesystem to the tar file dst.
func (c *Cache) buildRootfs(ctx context.Context, dst string, log io.Writer) error {
	if os.Geteuid() != 0 {
		return ErrNeedRoot
	}
	debootstrap, err := sbin("debootstrap")
	if err != nil {
		return fmt.Errorf("%w: %v", ErrNoDebootstrap, err)
	}
	root, err := os.MkdirTemp(c.keyDir(), tmpPrefix+"rootfs-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(root)
	// The image's / is this directory, made 0700.
	if err := os.Chmod(root, 0o755); err != nil {
		return err
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type fetched struct {
		t   Tools
		err error
	}
	tools := make(chan fetched, 1)
	go func() {
		t, err := c.fetchLocked(ctx, log)
		if err != nil {
			cancel()
		}
		tools <- fetched{t, err}
	}()
	derr := c.debootstrap(ctx, debootstrap, root, log)
	if derr != nil {
		cancel()
	}
	f := <-tools
	if f.err != nil {
		return f.err
	}
	if derr != nil {
		return derr
	}
	if err := c.customize(ctx, root, f.t); err != nil {
		return fmt.Errorf("making the template's filesystem: %w", err)
	}
	return c.writeTar(ctx, root, dst, log)
}

// debootstrap installs Debian into root. It runs in new mount and PID
// namespaces (unshare): the /proc and /sys it mounts inside root never
// show in the host's mount table, and when this process dies (the
// parent-death signal on unshare) or gives up, --kill-child ends every
// process of the install with it.
func (c *Cache) debootstrap(ctx context.Context, debootstrap, root string, log io.Writer) error {
	logPath := filepath.Join(c.keyDir(), "debootstrap.log")
	out, err := os.Create(logPath)
	if err != nil {
		return err
	}
	defer out.Close()
	args := []string{"unshare", "--mount", "--pid", "--fork", "--kill-child", "--",
		debootstrap, "--variant=" + variant, "--include=" + includes, "--keyring=" + keyring,
		suite, root, c.Mirror}
	fmt.Fprintf(log, "agenttest: debootstrap %s from %s (output in %s)\n", suite, c.Mirror, logPath)
	start := time.Now()
	cmd := exec.CommandContext(ctx, args[0], args[1:]...)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = childAttr()
	cmd.WaitDelay = 5 * time.Second
	if err := runLocked(cmd); err != nil {
		return fmt.Errorf("%s: %v; the end of its output (all of it in %s):\n%s", runner.Quote(args), err, logPath, tail(logPath, 20))
	}
	fmt.Fprintf(log, "agenttest: debootstrap done in %s\n", time.Since(start).Round(time.Second))
	return nil
}

// runLocked runs cmd from one OS thread: the parent-death signal is sent
// when the thread that started the child ends, which must not happen
// while the child runs.
func runLocked(cmd *exec.Cmd) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	return cmd.Run()
}

// tail is the last n lines of the file p.
func tail(p string, n int) string {
	b, err := os.ReadFile(p)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// writeTar archives root to dst with GNU tar, numeric owners kept, under
// a temporary name renamed into place.
func (c *Cache) writeTar(ctx context.Context, root, dst string, log io.Writer) error {
	tmp := filepath.Join(filepath.Dir(dst), tmpPrefix+filepath.Base(dst))
	start := time.Now()
	if _, err := c.Runner.Output(ctx, "tar", "--create", "--file="+tmp, "--numeric-owner",
		"--one-file-system", "--directory="+root, "."); err != nil {
		os.Remove(tmp)
		return err
	}
	if err := os.Rename(tmp, dst); err != nil {
		return err
	}
	fmt.Fprintf(log, "agenttest: wrote %s (%s) in %s\n", dst, fileSize(dst), time.Since(start).Round(time.Second))
	return nil
}

// fileSize spells the size of the file p.
func fileSize(p string) string {
	fi, err := os.Stat(p)
	if err != nil {
		return err.Error()
	}
	return size(fi.Size())
}

// importImage makes image from the tar file with the template's config.
func (c *Cache) importImage(ctx context.Context, tar, image string, log io.Writer) error {
	args := []string{"docker", "import", "--message", "sbx agent template " + c.Key()}
	for _, ch := range imageChanges() {
		args = append(args, "--change", ch)
	}
	args = append(args, tar, image)
	fmt.Fprintf(log, "agenttest: docker import of %s (%s) as %s\n", tar, fileSize(tar), image)
	start := time.Now()
	if _, err := c.Runner.Output(ctx, args...); err != nil {
		return err
	}
	fmt.Fprintf(log, "agenttest: imported in %s\n", time.Since(start).Round(time.Second))
	return nil
}

// pruneImages removes the other sbx-agent-template images that no
// container uses. A container made between the check and the removal
// keeps its image: docker image rm without --force refuses.
func (c *Cache) pruneImages(ctx context.Context, keep string, log io.Writer) error {
	out, err := c.Runner.Output(ctx, "docker", "image", "ls", "--format", "{{.Repository}}:{{.Tag}}", imageRepo)
	if err != nil {
		return err
	}
	var errs []error
	for _, image := range strings.Fields(string(out)) {
		if image == keep || strings.HasSuffix(image, ":<none>") {
			continue
		}
		users, err := c.Runner.Output(ctx, "docker", "ps", "--all", "--quiet", "--filter", "ancestor="+image)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if len(bytes.TrimSpace(users)) > 0 {
			fmt.Fprintf(log, "agenttest: keeping %s: containers use it\n", image)
			continue
		}
		if _, err := c.Runner.Output(ctx, "docker", "image", "rm", image); err != nil {
			errs = append(errs, err)
			continue
		}
		fmt.Fprintf(log, "agenttest: removed the old image %s\n", image)
	}
	return errors.Join(errs...)
}

// sbin finds a system program: on PATH, or in /usr/sbin, which a
// non-login shell's PATH may lack.
func sbin(name string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	p := filepath.Join("/usr/sbin", name)
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("%s is not installed: %w", name, err)
	}
	return p, nil
}
