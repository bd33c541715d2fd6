package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/sbxhq/sbx/driver/runner"
	"github.com/sbxhq/sbx/reconcile"
	"github.com/sbxhq/sbx/spec"
)

// backend is a driver as the CLI uses it: reconcile's interface plus the
// version probe and the template build hash.
type backend interface {
	reconcile.Driver
	// Version probes the backend; it fails with a clear error when the
	// backend is absent or older than sbx supports.
	Version(ctx context.Context) (string, error)
	// BuildHash is the content hash of the sandbox's template build ("" when
	// it has none); a change rebuilds the template.
	BuildHash(sp *spec.Spec) (string, error)
	// Executable is the backend CLI, whose identity keys the version cache.
	Executable() string
}

type chosen struct {
	backend backend
	version string
}

// backendFor picks the one backend all the sandboxes use.
func (a *app) backendFor(ctx context.Context, specs []*spec.Spec) (chosen, error) {
	names := map[string]bool{}
	for _, sp := range specs {
		names[sp.Driver] = true
	}
	if len(names) != 1 {
		var list []string
		for n := range names {
			list = append(list, n)
		}
		return chosen{}, fmt.Errorf("the sandboxes name different drivers (%s); run sbx once per driver", strings.Join(list, ", "))
	}
	var name string
	for n := range names {
		name = n
	}
	if name != "auto" {
		b, err := a.newBackend(name)
		if err != nil {
			return chosen{}, err
		}
		v, err := a.version(ctx, b)
		if err != nil {
			return chosen{}, fmt.Errorf("driver %s: %v", name, err)
		}
		return chosen{b, v}, nil
	}
	var tried []string
	// The docker-sandbox driver is legacy (Docker removed the plugin), so
	// auto never picks it; it runs only when named.
	for _, n := range []string{"sbx", "docker"} {
		b, err := a.newBackend(n)
		if err == nil {
			var v string
			if v, err = a.version(ctx, b); err == nil {
				return chosen{b, v}, nil
			}
		}
		tried = append(tried, fmt.Sprintf("%s: %v", n, err))
	}
	return chosen{}, fmt.Errorf("driver auto: no usable backend:\n  %s", strings.Join(tried, "\n  "))
}

// runner returns the invocation's command runner, tracing to $SBX_TRACE
// when set.
func (a *app) runner() *runner.Runner {
	if a.run != nil {
		return a.run
	}
	a.run = &runner.Runner{}
	if path := a.getenv("SBX_TRACE"); path != "" {
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
		if err != nil {
			fmt.Fprintf(a.stderr, "sbx: SBX_TRACE: %v (not tracing)\n", err)
		} else {
			a.closers = append(a.closers, f)
			a.run.Trace = f
		}
	}
	return a.run
}

// runSecretCommand runs a secret's command on the host (no shell) and
// returns its trimmed output; the command's output never reaches a log.
func (a *app) runSecretCommand(ctx context.Context, argv []string) (string, error) {
	r := &runner.Runner{} // untraced: its output is the secret
	out, err := r.Output(ctx, argv...)
	var re *runner.Error
	if errors.As(err, &re) {
		// Its stderr may echo the secret; say only that it failed.
		return "", fmt.Errorf("%s failed (exit status %d)", runner.Quote(re.Args), re.ExitCode)
	}
	if err != nil {
		return "", err
	}
	v := strings.TrimSpace(string(out))
	if v == "" {
		return "", fmt.Errorf("%s printed nothing", runner.Quote(argv))
	}
	return v, nil
}

// getenv reads the environment as os.Getenv does.
func (a *app) getenv(name string) string {
	v, _ := a.lookupEnv(name)
	return v
}

func (a *app) writeJSON(v any) int {
	enc := json.NewEncoder(a.stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return a.errorf("%v", err)
	}
	return exitOK
}

// dockerSbx finds Docker's own sbx: $SBX_DOCKER_SBX, else the first sbx on
// PATH that is not this executable.
func (a *app) dockerSbx() (string, error) {
	if from := a.getenv(passedThroughEnv); from != "" {
		return "", fmt.Errorf("Docker's sbx CLI was not found: %s, which another sbx ran as Docker's, is a copy of this sbx", from)
	}
	if p := a.getenv("SBX_DOCKER_SBX"); p != "" {
		return p, nil
	}
	self, _ := os.Executable()
	self, _ = filepath.EvalSymlinks(self)
	for _, dir := range filepath.SplitList(a.getenv("PATH")) {
		if dir == "" {
			dir = "."
		}
		p := filepath.Join(dir, "sbx")
		fi, err := os.Stat(p)
		if err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
			continue
		}
		if real, err := filepath.EvalSymlinks(p); err == nil && real == self {
			continue
		}
		return p, nil
	}
	return "", fmt.Errorf("Docker's sbx CLI was not found on PATH (set SBX_DOCKER_SBX to its path)")
}

// docker is the docker CLI to run: $SBX_DOCKER, else docker on PATH.
func (a *app) docker() string {
	if p := a.getenv("SBX_DOCKER"); p != "" {
		return p
	}
	return "docker"
}

// versionTTL bounds how long a version probe is trusted for an unchanged
// executable (a plugin can change behind the same docker CLI).
const versionTTL = time.Hour

// version probes a backend's version, remembering the answer in the state
// directory for the same executable (path, size, modification time) so a
// no-op plan costs only the listing and policy reads.
func (a *app) version(ctx context.Context, b backend) (string, error) {
	path, err := exec.LookPath(b.Executable())
	if err != nil {
		return "", err
	}
	fi, err := os.Stat(path)
	if err != nil {
		return "", err
	}
	key := fmt.Sprintf("%s|%s|%d|%d", b.Name(), path, fi.Size(), fi.ModTime().UnixNano())
	dir, derr := reconcile.DefaultStateDir(a.getenv)
	cache := filepath.Join(dir, "versions.json")
	entries := map[string]cachedVersion{}
	if derr == nil {
		if data, err := os.ReadFile(cache); err == nil {
			json.Unmarshal(data, &entries)
		}
		if e, ok := entries[key]; ok && time.Since(e.Checked) < versionTTL && e.Version != "" {
			if vu, ok := b.(versionUser); ok {
				vu.UseVersion(e.Version)
			}
			return e.Version, nil
		}
	}
	v, err := b.Version(ctx)
	if err != nil || derr != nil {
		return v, err
	}
	entries[key] = cachedVersion{Version: v, Checked: time.Now()}
	if data, err := json.Marshal(entries); err == nil {
		if os.MkdirAll(dir, 0o700) == nil {
			tmp := cache + ".tmp"
			if os.WriteFile(tmp, data, 0o600) == nil {
				os.Rename(tmp, cache)
			}
		}
	}
	return v, nil
}

// versionUser is a backend whose behaviour depends on its version (which
// flags the CLI has): a cached version is handed to it.
type versionUser interface {
	UseVersion(v string)
}

type cachedVersion struct {
	Version string    `json:"version"`
	Checked time.Time `json:"checked"`
}
