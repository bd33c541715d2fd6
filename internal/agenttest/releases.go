package agenttest

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"

	jsonv2 "github.com/go-json-experiment/json"
)

// DefaultRegistry is the npm registry the newest releases are read from.
const DefaultRegistry = "https://registry.npmjs.org"

// The values of SBX_AGENT_RELEASES: the pins (the default), or the
// newest releases the registry names.
const (
	ReleasesPinned = "pinned"
	ReleasesLatest = "latest"
)

// maxManifest bounds one answer of the registry: the version documents
// read here are a few kilobytes.
const maxManifest = 1 << 20

// Open is the cache the environment names (New), holding the releases
// $SBX_AGENT_RELEASES chooses: unset or "pinned", the pins; "latest", the
// newest releases (LatestPins), so that CI meets a release that breaks
// sbx before users do.
func Open(ctx context.Context, getenv func(string) string) (*Cache, error) {
	c := New(getenv)
	if err := c.choose(ctx, getenv("SBX_AGENT_RELEASES")); err != nil {
		return nil, err
	}
	return c, nil
}

// choose sets c's pins to the releases named.
func (c *Cache) choose(ctx context.Context, releases string) error {
	switch releases {
	case "", ReleasesPinned:
		return nil
	case ReleasesLatest:
		pins, err := c.LatestPins(ctx)
		if err != nil {
			return fmt.Errorf("SBX_AGENT_RELEASES=latest: %w", err)
		}
		c.Pins, c.Latest = pins, true
		return nil
	}
	return fmt.Errorf("SBX_AGENT_RELEASES must be %s or %s", ReleasesPinned, ReleasesLatest)
}

// LatestPins reads from c's registry the agents' newest releases, the
// same builds defaultPins names for the pinned ones: the version the
// latest dist-tag of each wrapper package names, the linux-x64 package
// its optionalDependencies list for that version, and that package's
// tarball and dist.integrity. The registry's answers are untrusted: each
// is bounded, must parse strictly, must name the package and version
// asked for (plain semver, the platform package the one expected), and
// the tarball must be the registry's own URL for it.
func (c *Cache) LatestPins(ctx context.Context) (Pins, error) {
	claude, err := c.resolve(ctx, claudeRelease)
	if err != nil {
		return Pins{}, err
	}
	codex, err := c.resolve(ctx, codexRelease)
	if err != nil {
		return Pins{}, err
	}
	return Pins{Claude: claude, Codex: codex}, nil
}

// release says how one agent's linux-x64 build is found from its
// wrapper's newest version.
type release struct {
	wrapper string // the wrapper package, whose latest dist-tag is read
	dep     string // the optionalDependencies name of the linux-x64 build
	// platform is the package name and version dep must resolve to for
	// the wrapper's version v.
	platform  func(v string) (name, version string)
	dir, want string // Pin.Dir and Pin.Want
}

// claudeRelease: @anthropic-ai/claude-code's optionalDependencies list
// "@anthropic-ai/claude-code-linux-x64": "VERSION", the wrapper's own
// version (the registry's version document for 2.1.332).
var claudeRelease = release{
	wrapper:  claudePackage,
	dep:      claudePlatform,
	platform: func(v string) (string, string) { return claudePlatform, v },
	dir:      "claude",
	want:     "claude",
}

// codexRelease: @openai/codex's optionalDependencies list
// "@openai/codex-linux-x64": "npm:@openai/codex@VERSION-linux-x64", an
// alias to a version of the wrapper's own name (the registry's version
// document for 0.171.0).
var codexRelease = release{
	wrapper:  codexPackage,
	dep:      codexPlatform,
	platform: func(v string) (string, string) { return codexPackage, v + platformSuffix },
	dir:      "codex",
	want:     "vendor/" + codexTriple + "/bin/codex",
}

// manifest is the part of a registry version document
// (GET REGISTRY/NAME/VERSION or REGISTRY/NAME/DIST-TAG, the package.json
// as published plus dist) that is read: the npm registry API's "version
// object" (github.com/npm/registry, docs/REGISTRY-API.md).
type manifest struct {
	Name                 string            `json:"name"`
	Version              string            `json:"version"`
	OptionalDependencies map[string]string `json:"optionalDependencies"`
	Dist                 struct {
		Tarball   string `json:"tarball"`
		Integrity string `json:"integrity"`
	} `json:"dist"`
}

// resolve resolves r's newest release to the pin of its linux-x64 build.
func (c *Cache) resolve(ctx context.Context, r release) (Pin, error) {
	w, err := c.manifest(ctx, r.wrapper, "latest")
	if err != nil {
		return Pin{}, err
	}
	if w.Name != r.wrapper {
		return Pin{}, fmt.Errorf("%s@latest: the registry names the package %s", r.wrapper, clip(w.Name))
	}
	if !plainSemver(w.Version) {
		return Pin{}, fmt.Errorf("%s@latest: version %s is not a plain semver (MAJOR.MINOR.PATCH)", r.wrapper, clip(w.Version))
	}
	name, version := r.platform(w.Version)
	dep, ok := w.OptionalDependencies[r.dep]
	if !ok {
		return Pin{}, fmt.Errorf("%s@%s: its optionalDependencies have no %s", r.wrapper, w.Version, r.dep)
	}
	if got, want := dep, depSpec(r.dep, name, version); got != want {
		return Pin{}, fmt.Errorf("%s@%s: optionalDependencies[%s] is %s, want %q", r.wrapper, w.Version, r.dep, clip(got), want)
	}
	p, err := c.manifest(ctx, name, version)
	if err != nil {
		return Pin{}, err
	}
	if p.Name != name || p.Version != version {
		return Pin{}, fmt.Errorf("%s@%s: the registry answered for package %s version %s", name, version, clip(p.Name), clip(p.Version))
	}
	if want := c.tarballURL(name, version); p.Dist.Tarball != want {
		return Pin{}, fmt.Errorf("%s@%s: tarball %s, want the registry's %s", name, version, clip(p.Dist.Tarball), want)
	}
	if _, err := parseIntegrity(p.Dist.Integrity); err != nil {
		return Pin{}, fmt.Errorf("%s@%s: %w", name, version, err)
	}
	return Pin{Name: name, Version: version, Release: w.Version, Tarball: p.Dist.Tarball,
		Integrity: p.Dist.Integrity, Dir: r.dir, Want: r.want}, nil
}

// depSpec is how a wrapper's optionalDependencies name the package
// name@version under the name dep: the bare version when the names are
// the same, else npm's alias "npm:NAME@VERSION"
// (docs.npmjs.com/cli/v10/configuring-npm/package-json, "dependencies":
// "npm:<name>@<version>").
func depSpec(dep, name, version string) string {
	if dep == name {
		return version
	}
	return "npm:" + name + "@" + version
}

// tarballURL is where the registry keeps name@version's tarball:
// REGISTRY/NAME/-/BASE-VERSION.tgz, BASE the name without its scope (as
// every dist.tarball the pins were read from).
func (c *Cache) tarballURL(name, version string) string {
	base := name[strings.LastIndex(name, "/")+1:]
	return c.registry() + "/" + name + "/-/" + base + "-" + version + ".tgz"
}

func (c *Cache) registry() string {
	if c.Registry == "" {
		return DefaultRegistry
	}
	return strings.TrimSuffix(c.Registry, "/")
}

// manifest reads the registry's version document for name at version (a
// version or a dist-tag). name is one of this package's constants and
// version a plain semver, a platform version made of one, or "latest":
// nothing from the registry goes into the URL unchecked.
func (c *Cache) manifest(ctx context.Context, name, version string) (*manifest, error) {
	u := c.registry() + "/" + name + "/" + version
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := c.Client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", u, resp.Status)
	}
	if resp.ContentLength > maxManifest {
		return nil, fmt.Errorf("GET %s: %d bytes, more than %d", u, resp.ContentLength, maxManifest)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxManifest+1))
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", u, err)
	}
	if len(body) > maxManifest {
		return nil, fmt.Errorf("GET %s: more than %d bytes", u, maxManifest)
	}
	// go-json-experiment/json refuses duplicate names, invalid UTF-8,
	// trailing data and a value of the wrong type: one answer, one
	// reading.
	var m manifest
	if err := jsonv2.Unmarshal(body, &m); err != nil {
		return nil, fmt.Errorf("GET %s: not a version document: %s", u, shorten(err.Error(), 300))
	}
	return &m, nil
}

// semverRE is a plain semver: three numbers without leading zeros, no
// pre-release or build (semver.org, 2.0.0, item 2); each number has at
// most 9 digits.
var semverRE = regexp.MustCompile(`^(0|[1-9][0-9]{0,8})\.(0|[1-9][0-9]{0,8})\.(0|[1-9][0-9]{0,8})$`)

func plainSemver(v string) bool { return semverRE.MatchString(v) }

// clip quotes a string from the registry for a message: control
// characters escaped, at most 100 bytes of it.
func clip(s string) string { return fmt.Sprintf("%q", shorten(s, 100)) }

// shorten is at most the first n bytes of s, marked when cut: a
// registry's text, or an error quoting it, in a message.
func shorten(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
