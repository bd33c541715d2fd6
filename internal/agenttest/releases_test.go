package agenttest

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sbxhq/sbx/driver/runner"
)

// npmRegistry plays the npm registry over TLS on loopback: version
// documents and tarballs by path, and the paths asked for.
type npmRegistry struct {
	srv   *httptest.Server
	mu    sync.Mutex
	files map[string]string
	asked []string
}

func newNPMRegistry(t *testing.T) *npmRegistry {
	r := &npmRegistry{files: map[string]string{}}
	r.srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		r.asked = append(r.asked, req.URL.Path)
		body, ok := r.files[req.URL.Path]
		r.mu.Unlock()
		if !ok {
			http.NotFound(w, req)
			return
		}
		io.WriteString(w, body)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *npmRegistry) paths() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.asked...)
}

// The paths of the four version documents LatestPins reads.
const (
	claudeLatestPath   = "/@anthropic-ai/claude-code/latest"
	claudePlatformPath = "/@anthropic-ai/claude-code-linux-x64/2.2.0"
	codexLatestPath    = "/@openai/codex/latest"
	codexPlatformPath  = "/@openai/codex/0.180.0-linux-x64"
)

// releaseDocs are the registry's answers for a Claude Code 2.2.0 and a
// Codex 0.180.0, shaped as registry.npmjs.org's for 2.1.332 and 0.171.0
// (the fields read, and some that are not), with the tarballs claude and
// codex.
func releaseDocs(url string, claude, codex []byte) map[string]map[string]any {
	return map[string]map[string]any{
		claudeLatestPath: {
			"name": "@anthropic-ai/claude-code", "version": "2.2.0", "bin": map[string]any{"claude": "bin/claude.exe"},
			"optionalDependencies": map[string]any{
				"@anthropic-ai/claude-code-darwin-arm64":     "2.2.0",
				"@anthropic-ai/claude-code-linux-x64":        "2.2.0",
				"@anthropic-ai/claude-code-linux-x64-musl":   "2.2.0",
				"@anthropic-ai/claude-code-linux-arm64-musl": "2.2.0",
			},
			"dist": map[string]any{"integrity": integrity([]byte("the wrapper")), "tarball": url + "/@anthropic-ai/claude-code/-/claude-code-2.2.0.tgz"},
		},
		claudePlatformPath: {
			"name": "@anthropic-ai/claude-code-linux-x64", "version": "2.2.0", "os": []any{"linux"}, "cpu": []any{"x64"},
			"dist": map[string]any{"integrity": integrity(claude), "tarball": url + "/@anthropic-ai/claude-code-linux-x64/-/claude-code-linux-x64-2.2.0.tgz"},
		},
		codexLatestPath: {
			"name": "@openai/codex", "version": "0.180.0", "bin": map[string]any{"codex": "bin/codex.js"},
			"optionalDependencies": map[string]any{
				"@openai/codex-linux-x64":   "npm:@openai/codex@0.180.0-linux-x64",
				"@openai/codex-linux-arm64": "npm:@openai/codex@0.180.0-linux-arm64",
			},
			"dist": map[string]any{"integrity": integrity([]byte("the wrapper")), "tarball": url + "/@openai/codex/-/codex-0.180.0.tgz"},
		},
		codexPlatformPath: {
			"name": "@openai/codex", "version": "0.180.0-linux-x64", "os": []any{"linux"}, "cpu": []any{"x64"},
			"dist": map[string]any{"integrity": integrity(codex), "tarball": url + "/@openai/codex/-/codex-0.180.0-linux-x64.tgz"},
		},
	}
}

// serve puts docs, as JSON, at their paths.
func (r *npmRegistry) serve(t *testing.T, docs map[string]map[string]any) {
	t.Helper()
	for p, d := range docs {
		b, err := json.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		r.files[p] = string(b)
	}
}

// latestCache is a cache reading r, its directory a temporary one.
func latestCache(t *testing.T, r *npmRegistry) *Cache {
	return &Cache{Dir: t.TempDir(), Pins: defaultPins(), Registry: r.srv.URL, Client: r.srv.Client(), Runner: &runner.Runner{}}
}

// wantLatest are the pins of releaseDocs.
func wantLatest(url string, claude, codex []byte) Pins {
	return Pins{
		Claude: Pin{Name: "@anthropic-ai/claude-code-linux-x64", Version: "2.2.0", Release: "2.2.0",
			Tarball:   url + "/@anthropic-ai/claude-code-linux-x64/-/claude-code-linux-x64-2.2.0.tgz",
			Integrity: integrity(claude), Dir: "claude", Want: "claude"},
		Codex: Pin{Name: "@openai/codex", Version: "0.180.0-linux-x64", Release: "0.180.0",
			Tarball:   url + "/@openai/codex/-/codex-0.180.0-linux-x64.tgz",
			Integrity: integrity(codex), Dir: "codex", Want: "vendor/" + codexTriple + "/bin/codex"},
	}
}

// TestLatestPins reads the newest releases from a registry shaped like
// npm's, asking for nothing but the four version documents, and fetches
// and verifies what they name.
func TestLatestPins(t *testing.T) {
	reg := newNPMRegistry(t)
	claude := tgz(t, entry{name: "package/claude", body: "claude 2.2.0"})
	codex := tgz(t, entry{name: "package/vendor/" + codexTriple + "/bin/codex", body: "codex 0.180.0"})
	reg.serve(t, releaseDocs(reg.srv.URL, claude, codex))
	reg.files["/@anthropic-ai/claude-code-linux-x64/-/claude-code-linux-x64-2.2.0.tgz"] = string(claude)
	reg.files["/@openai/codex/-/codex-0.180.0-linux-x64.tgz"] = string(codex)
	c := latestCache(t, reg)

	if err := c.choose(t.Context(), ReleasesLatest); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(wantLatest(reg.srv.URL, claude, codex), c.Pins); diff != "" {
		t.Errorf("pins (-want +got):\n%s", diff)
	}
	if !c.Latest {
		t.Error("the cache is not marked as holding the newest releases")
	}
	if diff := cmp.Diff([]string{claudeLatestPath, claudePlatformPath, codexLatestPath, codexPlatformPath}, reg.paths()); diff != "" {
		t.Errorf("asked the registry for (-want +got):\n%s", diff)
	}
	if got, want := c.Pins.String(), "claude-code 2.2.0, codex 0.180.0"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	tools, err := c.Fetch(t.Context(), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]string{tools.Claude: "claude 2.2.0", tools.CodexDir + "/bin/codex": "codex 0.180.0"} {
		if b, err := os.ReadFile(p); err != nil || string(b) != want {
			t.Errorf("%s: %q, %v; want %q", p, b, err, want)
		}
	}
}

// TestLatestPinsHostile plays a hostile or broken registry: an answer
// that is too big, not a version document, or names another package,
// version or tarball than the one asked for is refused, and nothing is
// pinned.
func TestLatestPinsHostile(t *testing.T) {
	set := func(doc string, f func(d map[string]any)) func(map[string]map[string]any) {
		return func(docs map[string]map[string]any) { f(docs[doc]) }
	}
	dist := func(d map[string]any) map[string]any { return d["dist"].(map[string]any) }
	deps := func(d map[string]any) map[string]any { return d["optionalDependencies"].(map[string]any) }
	tests := []struct {
		name string
		docs func(docs map[string]map[string]any) // changes the good answers
		raw  map[string]string                    // replaces answers by path
		want string
	}{
		{name: "huge", docs: set(claudeLatestPath, func(d map[string]any) { d["description"] = strings.Repeat("x", 2<<20) }),
			want: "more than 1048576 bytes"},
		{name: "malformed", raw: map[string]string{claudeLatestPath: `{"name": "@anthropic-ai/claude-code", "version": `},
			want: "not a version document"},
		{name: "not an object", raw: map[string]string{codexLatestPath: `["@openai/codex"]`},
			want: "not a version document"},
		{name: "duplicate names", raw: map[string]string{claudeLatestPath: `{"name":"@anthropic-ai/claude-code","version":"2.2.0","version":"9.9.9",` +
			`"optionalDependencies":{"@anthropic-ai/claude-code-linux-x64":"9.9.9"}}`},
			want: "not a version document"},
		{name: "trailing data", raw: map[string]string{claudeLatestPath: `{"name":"@anthropic-ai/claude-code","version":"2.2.0"} {"version":"9.9.9"}`},
			want: "not a version document"},
		{name: "version of the wrong type", raw: map[string]string{codexLatestPath: `{"name":"@openai/codex","version":180}`},
			want: "not a version document"},
		{name: "dependencies of the wrong type", docs: set(codexLatestPath, func(d map[string]any) { d["optionalDependencies"] = []any{"@openai/codex-linux-x64"} }),
			want: "not a version document"},
		{name: "another wrapper", docs: set(claudeLatestPath, func(d map[string]any) { d["name"] = "@anthropic-ai/claude-codex" }),
			want: `@anthropic-ai/claude-code@latest: the registry names the package "@anthropic-ai/claude-codex"`},
		{name: "pre-release", docs: set(claudeLatestPath, func(d map[string]any) { d["version"] = "2.2.0-beta.1" }),
			want: `version "2.2.0-beta.1" is not a plain semver`},
		{name: "v prefix", docs: set(codexLatestPath, func(d map[string]any) { d["version"] = "v0.180.0" }),
			want: `version "v0.180.0" is not a plain semver`},
		{name: "two numbers", docs: set(codexLatestPath, func(d map[string]any) { d["version"] = "0.180" }),
			want: `version "0.180" is not a plain semver`},
		{name: "leading zero", docs: set(codexLatestPath, func(d map[string]any) { d["version"] = "0.0180.0" }),
			want: `version "0.0180.0" is not a plain semver`},
		{name: "a path for a version", docs: set(claudeLatestPath, func(d map[string]any) { d["version"] = "2.2.0/../../../@evil/x/1.0.0" }),
			want: `is not a plain semver`},
		{name: "a newline in the version", docs: set(claudeLatestPath, func(d map[string]any) { d["version"] = "2.2.0\n" }),
			want: `version "2.2.0\n" is not a plain semver`},
		{name: "empty version", docs: set(claudeLatestPath, func(d map[string]any) { delete(d, "version") }),
			want: `version "" is not a plain semver`},
		{name: "no linux-x64 build", docs: set(claudeLatestPath, func(d map[string]any) { delete(deps(d), "@anthropic-ai/claude-code-linux-x64") }),
			want: "@anthropic-ai/claude-code@2.2.0: its optionalDependencies have no @anthropic-ai/claude-code-linux-x64"},
		{name: "no optionalDependencies", docs: set(codexLatestPath, func(d map[string]any) { delete(d, "optionalDependencies") }),
			want: "@openai/codex@0.180.0: its optionalDependencies have no @openai/codex-linux-x64"},
		{name: "the build of another version", docs: set(claudeLatestPath, func(d map[string]any) { deps(d)["@anthropic-ai/claude-code-linux-x64"] = "2.1.0" }),
			want: `optionalDependencies[@anthropic-ai/claude-code-linux-x64] is "2.1.0", want "2.2.0"`},
		{name: "a range for the build", docs: set(claudeLatestPath, func(d map[string]any) { deps(d)["@anthropic-ai/claude-code-linux-x64"] = "^2.2.0" }),
			want: `is "^2.2.0", want "2.2.0"`},
		{name: "an alias to another package", docs: set(codexLatestPath, func(d map[string]any) {
			deps(d)["@openai/codex-linux-x64"] = "npm:@evil/codex@0.180.0-linux-x64"
		}), want: `is "npm:@evil/codex@0.180.0-linux-x64", want "npm:@openai/codex@0.180.0-linux-x64"`},
		{name: "an alias to another platform", docs: set(codexLatestPath, func(d map[string]any) {
			deps(d)["@openai/codex-linux-x64"] = "npm:@openai/codex@0.180.0-linux-arm64"
		}), want: `want "npm:@openai/codex@0.180.0-linux-x64"`},
		{name: "the build's document for another version", docs: set(codexPlatformPath, func(d map[string]any) { d["version"] = "0.179.0-linux-x64" }),
			want: `@openai/codex@0.180.0-linux-x64: the registry answered for package "@openai/codex" version "0.179.0-linux-x64"`},
		{name: "the build's document for another package", docs: set(claudePlatformPath, func(d map[string]any) { d["name"] = "@evil/claude-code-linux-x64" }),
			want: `the registry answered for package "@evil/claude-code-linux-x64" version "2.2.0"`},
		{name: "tarball off the registry", docs: set(codexPlatformPath, func(d map[string]any) { dist(d)["tarball"] = "https://evil.example/codex-0.180.0-linux-x64.tgz" }),
			want: `tarball "https://evil.example/codex-0.180.0-linux-x64.tgz", want the registry's https://127.0.0.1:`},
		{name: "tarball over http", docs: func(docs map[string]map[string]any) {
			d := dist(docs[claudePlatformPath])
			d["tarball"] = strings.Replace(d["tarball"].(string), "https://", "http://", 1)
		}, want: "want the registry's https://"},
		{name: "tarball of another version", docs: func(docs map[string]map[string]any) {
			d := dist(docs[codexPlatformPath])
			d["tarball"] = strings.Replace(d["tarball"].(string), "0.180.0", "0.170.0", 1)
		}, want: "codex-0.170.0-linux-x64.tgz\", want the registry's"},
		{name: "no tarball", docs: set(claudePlatformPath, func(d map[string]any) { delete(d, "dist") }),
			want: `tarball "", want the registry's`},
		{name: "integrity not sha512", docs: set(codexPlatformPath, func(d map[string]any) { dist(d)["integrity"] = "sha1-AAAAAAAAAAAAAAAAAAAAAAAAAAA=" }),
			want: "is not sha512"},
		{name: "huge integrity", docs: set(codexPlatformPath, func(d map[string]any) { dist(d)["integrity"] = "sha512-" + strings.Repeat("A", 500_000) }),
			want: "is not a sha512 digest"},
		{name: "the build not found", raw: map[string]string{codexPlatformPath: ""},
			want: "/@openai/codex/0.180.0-linux-x64: 404 Not Found"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			reg := newNPMRegistry(t)
			docs := releaseDocs(reg.srv.URL, []byte("claude"), []byte("codex"))
			if tc.docs != nil {
				tc.docs(docs)
			}
			reg.serve(t, docs)
			for p, body := range tc.raw {
				if body == "" {
					delete(reg.files, p)
				} else {
					reg.files[p] = body
				}
			}
			c := latestCache(t, reg)
			err := c.choose(t.Context(), ReleasesLatest)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error with %q", err, tc.want)
			}
			if !strings.HasPrefix(err.Error(), "SBX_AGENT_RELEASES=latest: ") {
				t.Errorf("the error does not say where the releases came from: %v", err)
			}
			if len(err.Error()) > 1000 {
				t.Errorf("the error is %d bytes long", len(err.Error()))
			}
			if diff := cmp.Diff(defaultPins(), c.Pins); diff != "" || c.Latest {
				t.Errorf("the pins changed (latest %v) (-want +got):\n%s", c.Latest, diff)
			}
			documents := map[string]bool{claudeLatestPath: true, claudePlatformPath: true, codexLatestPath: true, codexPlatformPath: true}
			for _, p := range reg.paths() {
				if !documents[p] {
					t.Errorf("asked the registry for %s", p)
				}
			}
		})
	}
}

// TestChoose reads SBX_AGENT_RELEASES's values.
func TestChoose(t *testing.T) {
	tests := []struct {
		releases string
		want     string // error text; "" for the pins
	}{
		{"", ""},
		{"pinned", ""},
		{"newest", "SBX_AGENT_RELEASES must be pinned or latest"},
		{"Latest", "SBX_AGENT_RELEASES must be pinned or latest"},
	}
	for _, tc := range tests {
		t.Run(tc.releases, func(t *testing.T) {
			reg := newNPMRegistry(t)
			c := latestCache(t, reg)
			err := c.choose(t.Context(), tc.releases)
			got := ""
			if err != nil {
				got = err.Error()
			}
			if got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
			if diff := cmp.Diff(defaultPins(), c.Pins); diff != "" || c.Latest {
				t.Errorf("the pins changed (-want +got):\n%s", diff)
			}
			if len(reg.paths()) > 0 {
				t.Errorf("asked the registry for %v", reg.paths())
			}
		})
	}
}
