package agenttest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/sbxhq/sbx/driver/runner"
	"github.com/sbxhq/sbx/state"
)

// DefaultDir is the cache when SBX_AGENT_CACHE is unset.
const DefaultDir = "/var/cache/sbx-agents"

// lockWait bounds the wait for another process's fetch or build; a cold
// build takes minutes on a loaded machine.
const lockWait = 30 * time.Minute

// Cache is where the agents and the template's filesystem are kept (see
// the package comment for its layout).
type Cache struct {
	Dir    string // the cache's root
	Mirror string // the Debian mirror debootstrap uses
	Pins   Pins
	// Latest marks Pins as the registry's newest releases: their key is
	// recorded (the file latest) so that pruning keeps it beside the
	// pinned one's.
	Latest bool
	// Registry is the npm registry LatestPins reads; "" is
	// DefaultRegistry.
	Registry string
	Client   *http.Client
	Runner   *runner.Runner

	// buildBase writes the base's tar to its argument; nil is
	// debootstrapBase. Tests count the builds through it.
	buildBase func(ctx context.Context, dst string, log io.Writer) error
}

// New is the cache of the pinned agents the environment names:
// $SBX_AGENT_CACHE (default DefaultDir) and $SBX_DEBIAN_MIRROR (default
// http://deb.debian.org/debian). Open also reads SBX_AGENT_RELEASES.
func New(getenv func(string) string) *Cache {
	c := &Cache{Dir: getenv("SBX_AGENT_CACHE"), Mirror: getenv("SBX_DEBIAN_MIRROR"),
		Pins: defaultPins(), Registry: DefaultRegistry, Client: &http.Client{}, Runner: &runner.Runner{}}
	if c.Dir == "" {
		c.Dir = DefaultDir
	}
	if c.Mirror == "" {
		c.Mirror = defaultMirror
	}
	return c
}

// Key is the cache key of c's pins and the recipe.
func (c *Cache) Key() string { return key(c.Pins) }

func (c *Cache) keyDir() string { return filepath.Join(c.Dir, c.Key()) }

// basePrefix starts the name of a base's directory: base-BASEKEY.
const basePrefix = "base-"

func (c *Cache) baseDir() string { return filepath.Join(c.Dir, basePrefix+baseKey()) }

// baseTar is the base's filesystem: Debian and the agent user.
func (c *Cache) baseTar() string { return filepath.Join(c.baseDir(), "rootfs.tar") }

// latestFile holds the key of the newest releases last used.
const latestFile = "latest"

// lock takes the cache's lock, waiting for another process that holds it,
// and makes the key's directory, clear of what killed runs left in it and
// in the base's. With the newest releases it records their key first, so
// that no pruning from now on removes what it is about to make.
func (c *Cache) lock(ctx context.Context) (*state.Lock, error) {
	if err := os.MkdirAll(c.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("agent cache (set SBX_AGENT_CACHE to a writable directory): %w", err)
	}
	l, err := state.AcquireLock(ctx, state.Dir(c.Dir), "agents", state.LockOptions{Timeout: lockWait, Poll: 250 * time.Millisecond, Command: "agenttest"})
	if err != nil {
		return nil, err
	}
	if err := c.prepare(); err != nil {
		l.Release()
		return nil, err
	}
	return l, nil
}

// prepare is lock's work once the lock is held.
func (c *Cache) prepare() error {
	if err := os.MkdirAll(c.keyDir(), 0o755); err != nil {
		return err
	}
	for _, dir := range []string{c.Dir, c.keyDir(), c.baseDir()} {
		if err := clearTemp(dir); err != nil {
			return err
		}
	}
	if c.Latest {
		return c.markLatest()
	}
	return nil
}

// tmpPrefix starts the name of everything being written in the cache; a
// name without it is complete.
const tmpPrefix = "tmp-"

// clearTemp removes the work in progress a killed run left in dir, if
// dir exists. Only the lock's holder writes, so no tmp- entry belongs to
// a live run.
func clearTemp(dir string) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), tmpPrefix) {
			if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
				return fmt.Errorf("removing a killed run's work: %w", err)
			}
		}
	}
	return nil
}

// markLatest records c's key as the newest releases' (the file latest),
// written under a temporary name and renamed into place.
func (c *Cache) markLatest() error {
	tmp := filepath.Join(c.Dir, tmpPrefix+latestFile)
	if err := os.WriteFile(tmp, []byte(c.Key()+"\n"), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(c.Dir, latestFile))
}

// latestKey is the key the file latest records, if it holds one.
func (c *Cache) latestKey() (string, bool) {
	b, err := os.ReadFile(filepath.Join(c.Dir, latestFile))
	if err != nil {
		return "", false
	}
	k := strings.TrimSuffix(string(b), "\n")
	return k, isKey(k)
}

// kept are the keys pruning keeps: c's own, the pins', and the newest
// releases' last used. CI tests both; a new release replaces only the
// latest's.
func (c *Cache) kept() map[string]bool {
	keep := map[string]bool{c.Key(): true, key(defaultPins()): true}
	if k, ok := c.latestKey(); ok {
		keep[k] = true
	}
	return keep
}

// pruneKeys removes the directories of keys not kept, and of bases but
// c's: what older pins, releases or recipes left. Only names shaped like
// a key, or base- and a key, are touched.
func (c *Cache) pruneKeys() error {
	entries, err := os.ReadDir(c.Dir)
	if err != nil {
		return err
	}
	keep := c.kept()
	base := filepath.Base(c.baseDir())
	for _, e := range entries {
		name := e.Name()
		old := isKey(name) && !keep[name] ||
			strings.HasPrefix(name, basePrefix) && isKey(strings.TrimPrefix(name, basePrefix)) && name != base
		if e.IsDir() && old {
			if err := os.RemoveAll(filepath.Join(c.Dir, name)); err != nil {
				return fmt.Errorf("removing an old cache entry: %w", err)
			}
		}
	}
	return nil
}

// isKey reports whether name is shaped like a key: 64 lower-case hex
// digits.
func isKey(name string) bool {
	if len(name) != 64 {
		return false
	}
	for _, r := range name {
		if !(r >= '0' && r <= '9' || r >= 'a' && r <= 'f') {
			return false
		}
	}
	return true
}
