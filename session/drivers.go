package session

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/sbxhq/sbx/driver"
	"github.com/sbxhq/sbx/driver/cliutil"
	"github.com/sbxhq/sbx/driver/docker"
	"github.com/sbxhq/sbx/driver/dockersandbox"
	"github.com/sbxhq/sbx/driver/kubernetes"
	"github.com/sbxhq/sbx/driver/runner"
	"github.com/sbxhq/sbx/driver/sbx"
	"github.com/sbxhq/sbx/reconcile"
	"github.com/sbxhq/sbx/spec"
	"github.com/sbxhq/sbx/state"
)

// Driver is one entry of the registry: a backend sbx can drive.
type Driver struct {
	Name string
	// Auto is set for drivers `driver: auto` may pick, in the order it
	// tries them.
	Auto bool
	// Legacy explains why a driver is kept but not recommended; its plans
	// carry it as a note.
	Legacy string
	// New makes the driver. It runs nothing; Identify probes it.
	New func(env driver.Env) (driver.Backend, error)
	// Table is the driver's capability table as data, for a driver New
	// cannot make when its program is missing (validate needs no
	// backend installed).
	Table func() reconcile.Caps
}

// Drivers is the registry, in `driver: auto`'s order. The kubernetes
// driver is only ever named: a kubeconfig on the machine says nothing
// about where the user wants sandboxes.
var Drivers = []Driver{
	{Name: "sbx", Auto: true, New: func(env driver.Env) (driver.Backend, error) {
		bin, err := DockerSbx(env)
		if err != nil {
			return nil, err
		}
		return sbx.New(sbx.Options{Runner: env.Runner, Binary: bin, Docker: dockerCLI(env)}), nil
	}, Table: func() reconcile.Caps { return sbx.Capabilities(cliutil.Version{}) }},
	{Name: "docker", Auto: true, New: func(env driver.Env) (driver.Backend, error) {
		bin := env.Getenv("SBX_STATIC_BINARY")
		if bin == "" {
			bin = env.Self
		}
		return docker.New(docker.Options{Runner: env.Runner, Docker: dockerCLI(env), Binary: bin}), nil
	}},
	{Name: "kubernetes", New: func(env driver.Env) (driver.Backend, error) {
		bin := env.Getenv("SBX_STATIC_BINARY")
		if bin == "" {
			bin = env.Self
		}
		kubectl := env.Getenv("SBX_KUBECTL")
		if kubectl == "" {
			kubectl = "kubectl"
		}
		return kubernetes.New(kubernetes.Options{Runner: env.Runner, Kubectl: kubectl, Docker: dockerCLI(env), Binary: bin,
			HelperImage: env.Getenv("SBX_K8S_HELPER_IMAGE")}), nil
	}},
	{Name: "docker-sandbox", Legacy: "Docker removed the docker sandbox plugin from Docker Desktop (2026-07); sbx keeps this driver for those who still have it. Docker's standalone sbx (driver: sbx) is its successor.",
		New: func(env driver.Env) (driver.Backend, error) {
			return dockersandbox.New(dockersandbox.Options{Runner: env.Runner, Docker: dockerCLI(env)}), nil
		}},
}

// DriverNames lists the drivers sandbox.yaml may name (besides auto).
func DriverNames() []string {
	var names []string
	for _, d := range Drivers {
		names = append(names, d.Name)
	}
	return names
}

// lookup finds a registry entry.
func lookup(name string) (Driver, error) {
	for _, d := range Drivers {
		if d.Name == name {
			return d, nil
		}
	}
	return Driver{}, &UnknownDriverError{Name: name}
}

// UnknownDriverError is a driver name the registry does not have.
type UnknownDriverError struct{ Name string }

func (e *UnknownDriverError) Error() string {
	return fmt.Sprintf("unknown driver %q (drivers: %s)", e.Name, strings.Join(DriverNames(), ", "))
}

// Caps returns a driver's capability table without probing it (validate
// uses it to report what the declared driver cannot do). A driver whose
// table depends on its version gets the table of a version not yet known.
func Caps(env driver.Env, name string) (reconcile.Caps, error) {
	d, err := lookup(name)
	if err != nil {
		return reconcile.Caps{}, err
	}
	b, err := d.New(env)
	if err != nil {
		// The backend's program is missing: its table is still data.
		if d.Table == nil {
			return reconcile.Caps{}, fmt.Errorf("driver %s: %v", name, err)
		}
		return d.Table(), nil
	}
	return b.Caps(), nil
}

// Chosen is the backend a session uses, identified.
type Chosen struct {
	Backend  driver.Backend
	Identity driver.Identity
	Entry    Driver
}

// Choose makes and identifies the driver name names, or for "auto" the
// first usable one in the registry's order.
func Choose(ctx context.Context, env driver.Env, stateDir state.Dir, name string) (Chosen, error) {
	if name != "auto" {
		d, err := lookup(name)
		if err != nil {
			return Chosen{}, err
		}
		c, err := identify(ctx, env, stateDir, d)
		if err != nil {
			return Chosen{}, fmt.Errorf("driver %s: %w", name, err)
		}
		return c, nil
	}
	var tried []string
	for _, d := range Drivers {
		if !d.Auto {
			continue
		}
		c, err := identify(ctx, env, stateDir, d)
		if err == nil {
			return c, nil
		}
		tried = append(tried, fmt.Sprintf("%s: %v", d.Name, err))
	}
	return Chosen{}, fmt.Errorf("driver auto: no usable backend:\n  %s", strings.Join(tried, "\n  "))
}

// identityTTL bounds how long a probe is trusted for an unchanged
// executable (a plugin can change behind the same docker CLI).
const identityTTL = time.Hour

type cachedIdentity struct {
	Identity driver.Identity `json:"identity"`
	Checked  time.Time       `json:"checked"`
}

// identify makes a driver and probes it, remembering the answer in the
// state directory for the same executable (path, size, modification
// time), so a no-op plan costs only the listing and policy reads.
func identify(ctx context.Context, env driver.Env, stateDir state.Dir, d Driver) (Chosen, error) {
	b, err := d.New(env)
	if err != nil {
		return Chosen{}, err
	}
	path, err := env.Runner.LookPath(b.Executable())
	if err != nil {
		return Chosen{}, err
	}
	fi, err := os.Stat(path)
	if err != nil {
		return Chosen{}, err
	}
	key := fmt.Sprintf("%s|%s|%d|%d", d.Name, path, fi.Size(), fi.ModTime().UnixNano())
	cache := stateDir.Identities()
	entries := map[string]cachedIdentity{}
	if stateDir != "" {
		if data, err := os.ReadFile(cache); err == nil {
			json.Unmarshal(data, &entries)
		}
		if e, ok := entries[key]; ok && time.Since(e.Checked) < identityTTL && e.Identity.Version != "" {
			b.Use(e.Identity)
			return Chosen{Backend: b, Identity: e.Identity, Entry: d}, nil
		}
	}
	id, err := b.Identify(ctx)
	if err != nil {
		return Chosen{}, err
	}
	if stateDir != "" {
		entries[key] = cachedIdentity{Identity: id, Checked: time.Now()}
		if data, err := json.Marshal(entries); err == nil {
			state.Write(cache, data) // a cache: one that cannot be written is asked again
		}
	}
	return Chosen{Backend: b, Identity: id, Entry: d}, nil
}

// PassedThroughEnv marks the environment of a command sbx passes a verb
// through to. An sbx that finds it set was itself taken for Docker's sbx
// (another copy of ours earlier or later on PATH) and must not pass the
// verb on again: two copies would call each other forever.
const PassedThroughEnv = "SBX_PASSED_THROUGH"

// DockerSbx finds Docker's own sbx: $SBX_DOCKER_SBX, else the first sbx on
// PATH that is not this executable.
func DockerSbx(env driver.Env) (string, error) {
	if from := env.Getenv(PassedThroughEnv); from != "" {
		return "", fmt.Errorf("Docker's sbx CLI was not found: %s, which another sbx ran as Docker's, is a copy of this sbx", from)
	}
	if p := env.Getenv("SBX_DOCKER_SBX"); p != "" {
		return p, nil
	}
	self, _ := filepath.EvalSymlinks(env.Self)
	for _, dir := range filepath.SplitList(env.Getenv("PATH")) {
		if dir == "" {
			dir = "."
		}
		for _, name := range runner.ExecutableNames("sbx") {
			p := filepath.Join(dir, name)
			fi, err := os.Stat(p)
			if err != nil || fi.IsDir() || !runner.IsExecutable(fi) {
				continue
			}
			if real, err := filepath.EvalSymlinks(p); err == nil && real == self {
				continue
			}
			return p, nil
		}
	}
	return "", errors.New("Docker's sbx CLI was not found on PATH (set SBX_DOCKER_SBX to its path)")
}

// dockerCLI is the docker CLI to run: $SBX_DOCKER, else docker on PATH.
func dockerCLI(env driver.Env) string {
	if p := env.Getenv("SBX_DOCKER"); p != "" {
		return p
	}
	return "docker"
}

// DriverProblems reports, at their place in the files, what each sandbox
// asks of the driver it names that the driver cannot do (its capability
// table and constraints, reconcile.Check). A sandbox on driver auto is not
// checked: which backend it gets is known only when one is probed. env is
// called once, when a sandbox names a driver: making it reads this
// executable's path, which `sbx validate` of a file without a driver
// need not pay for.
func DriverProblems(env func() driver.Env, specs []*spec.Spec) spec.Diagnostics {
	var ds spec.Diagnostics
	var e *driver.Env
	for _, sp := range specs {
		if sp.Driver == "auto" {
			continue
		}
		if e == nil {
			v := env()
			e = &v
		}
		caps, err := Caps(*e, sp.Driver)
		var unknown *UnknownDriverError
		if errors.As(err, &unknown) {
			continue // the schema has reported an unknown driver
		}
		if err != nil {
			ds = append(ds, spec.Diagnostic{File: sp.Files[0], Path: "driver", Message: err.Error()})
			continue
		}
		for _, p := range reconcile.Check(sp, caps) {
			d := spec.Diagnostic{File: sp.Files[0], Path: p.Path, Message: fmt.Sprintf("%s (driver %s)", p.Message, sp.Driver)}
			if o, ok := sp.OriginOf(p.Path); ok {
				d.File, d.Line, d.Col = o.File, o.Line, o.Col
			}
			ds = append(ds, d)
		}
	}
	return ds.Sort()
}
