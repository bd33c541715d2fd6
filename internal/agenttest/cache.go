package agenttest

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/sbxhq/sbx/driver/runner"
	"github.com/sbxhq/sbx/reconcile"
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
	Client *http.Client
	Runner *runner.Runner
}

// New is the cache the environment names: $SBX_AGENT_CACHE (default
// DefaultDir) and $SBX_DEBIAN_MIRROR (default http://deb.debian.org/debian).
func New(getenv func(string) string) *Cache {
	c := &Cache{Dir: getenv("SBX_AGENT_CACHE"), Mirror: getenv("SBX_DEBIAN_MIRROR"),
		Pins: defaultPins(), Client: &http.Client{}, Runner: &runner.Runner{}}
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

// lock takes the cache's lock, waiting for another process that holds it,
// and makes the key's directory, clear of what killed runs left in it.
func (c *Cache) lock(ctx context.Context) (*reconcile.Lock, error) {
	if err := os.MkdirAll(c.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("agent cache (set SBX_AGENT_CACHE to a writable directory): %w", err)
	}
	l, err := reconcile.AcquireLock(ctx, c.Dir, "agents", reconcile.LockOptions{Timeout: lockWait, Poll: 250 * time.Millisecond, Command: "agenttest"})
	if err != nil {
		return nil, err
	}
	if err := c.clearTemp(); err != nil {
		l.Release()
		return nil, err
	}
	return l, nil
}

// tmpPrefix starts the name of everything being written in a key's
// directory; a name without it is complete.
const tmpPrefix = "tmp-"

// clearTemp makes the key's directory and removes the work in progress a
// killed run left there. Only the lock's holder writes, so no tmp- entry
// belongs to a live run.
func (c *Cache) clearTemp() error {
	dir := c.keyDir()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	entries, err := os.ReadDir(dir)
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

// pruneKeys removes the directories of other keys: what older pins or
// recipes left. Only names shaped like a key are touched.
func (c *Cache) pruneKeys() error {
	entries, err := os.ReadDir(c.Dir)
	if err != nil {
		return err
	}
	current := c.Key()
	for _, e := range entries {
		if e.IsDir() && e.Name() != current && isKey(e.Name()) {
			if err := os.RemoveAll(filepath.Join(c.Dir, e.Name())); err != nil {
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
