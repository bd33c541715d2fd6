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
// (Open(ctx, os.Getenv): the pinned agents, or with
// SBX_AGENT_RELEASES=latest the newest), building it if needed; log gets
// progress lines.
func Template(ctx context.Context, log io.Writer) (string, error) {
	c, err := Open(ctx, os.Getenv)
	if err != nil {
		return "", err
	}
	return c.Template(ctx, log)
}

// Image is the template's name and tag: sbx-agent-template:KEY[:12].
func (c *Cache) Image() string { return image(c.Key()) }

func image(key string) string { return imageRepo + ":" + key[:12] }

// Template returns the template image, built once per key: at once if
// Docker has it; else imported from the cached rootfs.tar; else that tar
// made from the base and the agents (the base built first if it is not
// cached: debootstrap and the agents' download run side by side),
// imported, and the images and cache entries of other keys removed.
func (c *Cache) Template(ctx context.Context, log io.Writer) (string, error) {
	image := c.Image()
	if ok, err := c.imageExists(ctx, image); err != nil || ok {
		return done(image, err)
	}
	if !exists(c.rootfsTar()) && !exists(c.baseTar()) && os.Geteuid() != 0 {
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
	tar, err := c.rootfs(ctx, log)
	if err != nil {
		return "", err
	}
	if err := c.importImage(ctx, tar, image, log); err != nil {
		return "", err
	}
	for _, err := range []error{c.pruneImages(ctx, log), c.pruneKeys()} {
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

// exists reports whether the file p is there.
func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
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

// rootfsTar is the image's whole filesystem, for docker import.
func (c *Cache) rootfsTar() string { return filepath.Join(c.keyDir(), "rootfs.tar") }

// rootfs returns rootfsTar, made first if it is not there: the base's
// tar and the agents (compose). Only the base needs debootstrap and root;
// a new release costs its download and the tar. For the lock's holder.
func (c *Cache) rootfs(ctx context.Context, log io.Writer) (string, error) {
	dst := c.rootfsTar()
	if exists(dst) {
		return dst, nil
	}
	t, err := c.fetchWithBase(ctx, log)
	if err != nil {
		return "", err
	}
	if err := c.compose(ctx, c.baseTar(), t, dst, log); err != nil {
		return "", fmt.Errorf("making the template's filesystem: %w", err)
	}
	return dst, nil
}

// fetchWithBase fetches the agents and, when the base is not cached,
// builds it meanwhile. The first failure stops the other work and is the
// one returned (the other's is only its cancellation).
func (c *Cache) fetchWithBase(ctx context.Context, log io.Writer) (Tools, error) {
	if exists(c.baseTar()) {
		return c.fetchLocked(ctx, log)
	}
	if err := os.MkdirAll(c.baseDir(), 0o755); err != nil {
		return Tools{}, err
	}
	build := c.buildBase
	if build == nil {
		build = c.debootstrapBase
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		once  sync.Once
		first error
	)
	fail := func(err error) {
		if err != nil {
			once.Do(func() { first = err; cancel() })
		}
	}
	var wg sync.WaitGroup
	var t Tools
	wg.Add(1)
	go func() {
		defer wg.Done()
		var err error
		t, err = c.fetchLocked(ctx, log)
		fail(err)
	}()
	fail(build(ctx, c.baseTar(), log))
	wg.Wait()
	if first != nil {
		return Tools{}, first
	}
	return t, nil
}

// debootstrapBase writes the base's filesystem to the tar file dst:
// Debian (debootstrap), trimmed, and the agent user.
func (c *Cache) debootstrapBase(ctx context.Context, dst string, log io.Writer) error {
	if os.Geteuid() != 0 {
		return ErrNeedRoot
	}
	debootstrap, err := sbin("debootstrap")
	if err != nil {
		return fmt.Errorf("%w: %v", ErrNoDebootstrap, err)
	}
	root, err := os.MkdirTemp(filepath.Dir(dst), tmpPrefix+"rootfs-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(root)
	// The image's / is this directory, made 0700.
	if err := os.Chmod(root, 0o755); err != nil {
		return err
	}
	if err := c.debootstrap(ctx, debootstrap, root, log); err != nil {
		return err
	}
	if err := c.customizeBase(ctx, root); err != nil {
		return fmt.Errorf("making the base's filesystem: %w", err)
	}
	return c.writeTar(ctx, root, dst, log)
}

// debootstrap installs Debian into root. It runs in new mount and PID
// namespaces (unshare): the /proc and /sys it mounts inside root never
// show in the host's mount table, and when this process dies (the
// parent-death signal on unshare) or gives up, --kill-child ends every
// process of the install with it.
func (c *Cache) debootstrap(ctx context.Context, debootstrap, root string, log io.Writer) error {
	logPath := filepath.Join(c.baseDir(), "debootstrap.log")
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

// pruneImages removes the sbx-agent-template images of keys not kept
// (see kept) that no container uses. A container made between the check
// and the removal keeps its image: docker image rm without --force
// refuses.
func (c *Cache) pruneImages(ctx context.Context, log io.Writer) error {
	keep := map[string]bool{}
	for k := range c.kept() {
		keep[image(k)] = true
	}
	out, err := c.Runner.Output(ctx, "docker", "image", "ls", "--format", "{{.Repository}}:{{.Tag}}", imageRepo)
	if err != nil {
		return err
	}
	var errs []error
	for _, image := range strings.Fields(string(out)) {
		if keep[image] || strings.HasSuffix(image, ":<none>") {
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
