package agenttest

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha512"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/sbxhq/sbx/internal/tarball"
)

// Tools are the agents' native builds on the host.
type Tools struct {
	// Claude is Claude Code's native binary (glibc, x86-64).
	Claude string
	// CodexDir is Codex's vendor/x86_64-unknown-linux-musl directory:
	// bin/codex, bin/codex-code-mode-host, codex-path/rg,
	// codex-resources/.
	CodexDir string
}

// maxTarball bounds one download. The pinned tarballs are under 200 MB
// (the newest releases' are checked against the same bound);
// the digest is checked only at the end, so the bound stops an endless
// response first.
const maxTarball = 1 << 30

// unpackLimits bound what one tarball unpacks to; the pinned ones unpack
// to under 500 MB in under 100 files.
func unpackLimits() tarball.Limits {
	return tarball.Limits{MaxBytes: 2 << 30, MaxFile: 1 << 30, MaxEntries: 10_000}
}

// Fetch downloads, verifies and unpacks the agents into the cache the
// environment names (Open(ctx, os.Getenv): the pinned agents, or with
// SBX_AGENT_RELEASES=latest the newest), once per key.
func Fetch(ctx context.Context) (Tools, error) {
	c, err := Open(ctx, os.Getenv)
	if err != nil {
		return Tools{}, err
	}
	return c.Fetch(ctx, io.Discard)
}

// Fetch returns the agents from the cache, downloading what it lacks;
// log gets a line per download. Concurrent callers, in this process or
// others, wait for one another.
func (c *Cache) Fetch(ctx context.Context, log io.Writer) (Tools, error) {
	if t, ok := c.tools(); ok {
		return t, nil
	}
	l, err := c.lock(ctx)
	if err != nil {
		return Tools{}, err
	}
	defer l.Release()
	t, err := c.fetchLocked(ctx, log)
	if err != nil {
		return Tools{}, err
	}
	if err := c.pruneKeys(); err != nil {
		fmt.Fprintf(log, "agenttest: %v\n", err)
	}
	return t, nil
}

// tools returns the agents' paths if both packages are unpacked.
func (c *Cache) tools() (Tools, bool) {
	dir := c.keyDir()
	for _, p := range c.Pins.all() {
		if _, err := os.Lstat(filepath.Join(dir, p.Dir, "package", filepath.FromSlash(p.Want))); err != nil {
			return Tools{}, false
		}
	}
	return Tools{
		Claude:   filepath.Join(dir, c.Pins.Claude.Dir, "package", "claude"),
		CodexDir: filepath.Join(dir, c.Pins.Codex.Dir, "package", "vendor", codexTriple),
	}, true
}

// fetchLocked is Fetch for the holder of the lock.
func (c *Cache) fetchLocked(ctx context.Context, log io.Writer) (Tools, error) {
	for _, p := range c.Pins.all() {
		if _, err := os.Lstat(filepath.Join(c.keyDir(), p.Dir)); err == nil {
			continue
		}
		if err := c.fetchPin(ctx, p, log); err != nil {
			return Tools{}, fmt.Errorf("%s@%s: %w", p.Name, p.Version, err)
		}
	}
	t, ok := c.tools()
	if !ok {
		return Tools{}, fmt.Errorf("agent cache %s: a package directory is there without its binary; remove the directory", c.keyDir())
	}
	return t, nil
}

// fetchPin downloads p's tarball into a temporary file, checks its digest
// and unpacks it to KEY/p.Dir.
func (c *Cache) fetchPin(ctx context.Context, p Pin, log io.Writer) error {
	want, err := parseIntegrity(p.Integrity)
	if err != nil {
		return err
	}
	dir := c.keyDir()
	f, err := os.CreateTemp(dir, tmpPrefix+"download-")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	h := sha512.New()
	start := time.Now()
	if err := c.download(ctx, p, io.MultiWriter(f, h), log); err != nil {
		return err
	}
	if got := h.Sum(nil); !bytes.Equal(got, want) {
		return fmt.Errorf("%s: sha512 is %s, the pin (or the registry's dist.integrity) says %s", p.Tarball,
			base64.StdEncoding.EncodeToString(got), base64.StdEncoding.EncodeToString(want))
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(dir, tmpPrefix+p.Dir+"-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	if err := unpack(ctx, f, tmp); err != nil {
		return err
	}
	if _, err := os.Lstat(filepath.Join(tmp, "package", filepath.FromSlash(p.Want))); err != nil {
		return fmt.Errorf("the package has no %s", p.Want)
	}
	// MkdirTemp's 0700 would keep the agents from other users.
	if err := os.Chmod(tmp, 0o755); err != nil {
		return err
	}
	if err := os.Rename(tmp, filepath.Join(dir, p.Dir)); err != nil {
		return err
	}
	fmt.Fprintf(log, "agenttest: %s@%s downloaded and unpacked in %s\n", p.Name, p.Version, time.Since(start).Round(time.Second))
	return nil
}

// download writes p's tarball to w.
func (c *Cache) download(ctx context.Context, p Pin, w io.Writer, log io.Writer) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.Tarball, nil)
	if err != nil {
		return err
	}
	resp, err := c.Client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", p.Tarball, resp.Status)
	}
	if resp.ContentLength > maxTarball {
		return fmt.Errorf("GET %s: %d bytes, more than %d", p.Tarball, resp.ContentLength, maxTarball)
	}
	fmt.Fprintf(log, "agenttest: downloading %s@%s (%s)\n", p.Name, p.Version, size(resp.ContentLength))
	n, err := io.Copy(w, io.LimitReader(resp.Body, maxTarball+1))
	if err != nil {
		return fmt.Errorf("GET %s: %w", p.Tarball, err)
	}
	if n > maxTarball {
		return fmt.Errorf("GET %s: more than %d bytes", p.Tarball, maxTarball)
	}
	return nil
}

// size spells a byte count for a progress line.
func size(n int64) string {
	if n < 0 {
		return "size unknown"
	}
	return fmt.Sprintf("%.0f MB", float64(n)/1e6)
}

// parseIntegrity reads an npm dist.integrity value: a Subresource
// Integrity string, "sha512-" and the base64 of the digest
// (https://docs.npmjs.com/cli/v10/configuring-npm/package-lock-json,
// "integrity"). Only sha512 is accepted, the algorithm the registry
// gives for every current tarball. s may come from the registry
// (LatestPins): a message quotes only its start.
func parseIntegrity(s string) ([]byte, error) {
	b64, ok := strings.CutPrefix(s, "sha512-")
	if !ok {
		return nil, fmt.Errorf("integrity %s is not sha512", clip(s))
	}
	d, err := base64.StdEncoding.DecodeString(b64)
	if err != nil || len(d) != sha512.Size {
		return nil, fmt.Errorf("integrity %s is not a sha512 digest", clip(s))
	}
	return d, nil
}

// unpack extracts the gzipped tar r into the empty directory dir with
// internal/tarball's confinement, and fails if any entry was refused: a
// name outside dir (absolute, or with ".."), a link that leaves it, a
// hard link, a device or anything but files, directories and symlinks
// inside. The stream comes from the network.
func unpack(ctx context.Context, r io.Reader, dir string) error {
	zr, err := gzip.NewReader(r)
	if err != nil {
		return fmt.Errorf("not a gzipped tarball: %w", err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	st, err := tarball.Extract(ctx, zr, root, tarball.ExtractOptions{Limits: unpackLimits()})
	if err != nil {
		return err
	}
	if len(st.Skipped) > 0 {
		return fmt.Errorf("the tarball has entries that cannot be unpacked safely: %s", strings.Join(st.Skipped, "; "))
	}
	return nil
}
