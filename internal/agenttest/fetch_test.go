package agenttest

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha512"
	"encoding/base64"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sbxhq/sbx/driver/runner"
)

// entry is one tar entry of a test tarball.
type entry struct {
	name     string
	typ      byte // tar.TypeReg when zero
	body     string
	linkname string
}

// tgz makes a gzipped tarball of entries.
func tgz(t *testing.T, entries ...entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Typeflag: e.typ, Linkname: e.linkname, Mode: 0o755}
		if h.Typeflag == 0 {
			h.Typeflag = tar.TypeReg
		}
		if h.Typeflag == tar.TypeReg {
			h.Size = int64(len(e.body))
		}
		if h.Typeflag == tar.TypeChar {
			h.Devmajor, h.Devminor = 1, 3
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if _, err := io.WriteString(tw, e.body); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// tree lists what is under dir, slash-separated, symlinks with their
// targets.
func tree(t *testing.T, dir string) []string {
	t.Helper()
	var got []string
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		rel = filepath.ToSlash(rel)
		if d.Type()&os.ModeSymlink != 0 {
			target, _ := os.Readlink(p)
			rel += " -> " + target
		}
		got = append(got, rel)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(got)
	return got
}

// TestUnpackRefusesHostileTarballs plays a hostile registry (or a
// tampered tarball that got past the digest): every entry that would
// reach outside the package directory fails the unpack, and nothing is
// written outside it.
func TestUnpackRefusesHostileTarballs(t *testing.T) {
	tests := []struct {
		name    string
		entries func(outside string) []entry
		want    string // in the error
	}{
		{"dot-dot", func(string) []entry {
			return []entry{{name: "package/ok", body: "ok"}, {name: "../x", body: "pwned"}}
		}, `"../x"`},
		{"dot-dot inside the name", func(string) []entry {
			return []entry{{name: "package/../../x", body: "pwned"}}
		}, `"package/../../x"`},
		{"absolute path", func(outside string) []entry {
			return []entry{{name: filepath.ToSlash(filepath.Join(outside, "x")), body: "pwned"}}
		}, "not a path inside"},
		{"symlink out", func(string) []entry {
			return []entry{{name: "package/l", typ: tar.TypeSymlink, linkname: "../../outside"}, {name: "package/l/x", body: "pwned"}}
		}, "package/l: a symbolic link to"},
		{"absolute symlink", func(outside string) []entry {
			return []entry{{name: "package/l", typ: tar.TypeSymlink, linkname: outside}}
		}, "package/l: a symbolic link to"},
		{"file below a symlink inside", func(string) []entry {
			return []entry{{name: "package/l", typ: tar.TypeSymlink, linkname: "."}, {name: "package/l/x", body: "through a link"}}
		}, "package/l/x"},
		{"hard link", func(outside string) []entry {
			return []entry{{name: "package/h", typ: tar.TypeLink, linkname: filepath.ToSlash(filepath.Join(outside, "secret"))}}
		}, "package/h: a hard link"},
		{"device", func(string) []entry {
			return []entry{{name: "package/null", typ: tar.TypeChar}}
		}, "package/null: a character device"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			base := t.TempDir()
			outside := filepath.Join(base, "outside")
			dest := filepath.Join(base, "dest")
			for _, d := range []string{outside, dest} {
				if err := os.Mkdir(d, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			err := unpack(t.Context(), bytes.NewReader(tgz(t, tc.entries(outside)...)), dest)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("unpack: got %v, want an error with %q", err, tc.want)
			}
			if diff := cmp.Diff([]string{"dest", "outside"}, names(t, base)); diff != "" {
				t.Errorf("written beside dest (-want +got):\n%s", diff)
			}
			if got := tree(t, outside); len(got) != 0 {
				t.Errorf("written outside: %v", got)
			}
		})
	}
}

// TestUnpack unpacks a benign package whole, links inside it included.
func TestUnpack(t *testing.T) {
	dest := t.TempDir()
	err := unpack(t.Context(), bytes.NewReader(tgz(t,
		entry{name: "package/bin/tool", body: "#!/bin/sh\n"},
		entry{name: "package/lib/libx.so.1", body: "elf"},
		entry{name: "package/lib/libx.so", typ: tar.TypeSymlink, linkname: "libx.so.1"},
	)), dest)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"package", "package/bin", "package/bin/tool", "package/lib", "package/lib/libx.so -> libx.so.1", "package/lib/libx.so.1"}
	if diff := cmp.Diff(want, tree(t, dest)); diff != "" {
		t.Errorf("unpacked (-want +got):\n%s", diff)
	}
	if fi, err := os.Stat(filepath.Join(dest, "package/bin/tool")); err != nil || fi.Mode().Perm() != 0o755 {
		t.Errorf("tool: %v, %v; want mode 0755", fi, err)
	}
}

func TestParseIntegrity(t *testing.T) {
	digest := sha512.Sum512([]byte("x"))
	good := "sha512-" + base64.StdEncoding.EncodeToString(digest[:])
	tests := []struct {
		in   string
		want string // error text; "" for none
	}{
		{good, ""},
		{"sha1-" + base64.StdEncoding.EncodeToString(digest[:20]), "is not sha512"},
		{"sha512-" + base64.StdEncoding.EncodeToString(digest[:32]), "is not a sha512 digest"},
		{"sha512-!!!", "is not a sha512 digest"},
		{"", "is not sha512"},
	}
	for _, tc := range tests {
		_, err := parseIntegrity(tc.in)
		got := ""
		if err != nil {
			got = err.Error()
		}
		if tc.want == "" && got != "" || tc.want != "" && !strings.Contains(got, tc.want) {
			t.Errorf("parseIntegrity(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	for _, p := range defaultPins().all() {
		if _, err := parseIntegrity(p.Integrity); err != nil {
			t.Errorf("%s: %v", p.Name, err)
		}
	}
}

// registry serves tarballs on loopback and counts the requests for each.
type registry struct {
	srv   *httptest.Server
	mu    sync.Mutex
	files map[string][]byte
	gets  map[string]int
}

func newRegistry(t *testing.T, files map[string][]byte) *registry {
	r := &registry{files: files, gets: map[string]int{}}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		r.gets[req.URL.Path]++
		r.mu.Unlock()
		b, ok := r.files[req.URL.Path]
		if !ok {
			http.NotFound(w, req)
			return
		}
		w.Write(b)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *registry) counts() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return maps.Clone(r.gets)
}

func integrity(b []byte) string {
	d := sha512.Sum512(b)
	return "sha512-" + base64.StdEncoding.EncodeToString(d[:])
}

// testCache is a cache in a temporary directory whose pins are two small
// packages shaped like the real ones, served by reg.
func testCache(t *testing.T) (*Cache, *registry) {
	claude := tgz(t, entry{name: "package/claude", body: "claude-binary"}, entry{name: "package/package.json", body: "{}"})
	codex := tgz(t,
		entry{name: "package/vendor/" + codexTriple + "/bin/codex", body: "codex-binary"},
		entry{name: "package/vendor/" + codexTriple + "/codex-path/rg", body: "rg-binary"})
	reg := newRegistry(t, map[string][]byte{"/claude.tgz": claude, "/codex.tgz": codex})
	pins := Pins{
		Claude: Pin{Name: "claude", Version: "1", Tarball: reg.srv.URL + "/claude.tgz", Integrity: integrity(claude), Dir: "claude", Want: "claude"},
		Codex:  Pin{Name: "codex", Version: "1", Tarball: reg.srv.URL + "/codex.tgz", Integrity: integrity(codex), Dir: "codex", Want: "vendor/" + codexTriple + "/bin/codex"},
	}
	return &Cache{Dir: t.TempDir(), Pins: pins, Client: reg.srv.Client(), Runner: &runner.Runner{}}, reg
}

// TestFetch downloads each package once for concurrent callers, clears
// what a killed run and older keys left, and keeps what is not its own.
func TestFetch(t *testing.T) {
	c, reg := testCache(t)
	old := filepath.Join(c.Dir, strings.Repeat("ab", 32))
	for _, d := range []string{filepath.Join(old, "claude"), filepath.Join(c.keyDir(), tmpPrefix+"claude-killed")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(c.Dir, "notes"), nil, 0o644); err != nil {
		t.Fatal(err)
	}

	const callers = 4
	var wg sync.WaitGroup
	results := make([]Tools, callers)
	var failed atomic.Int32
	for i := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tools, err := c.Fetch(t.Context(), io.Discard)
			if err != nil {
				t.Error(err)
				failed.Add(1)
			}
			results[i] = tools
		}()
	}
	wg.Wait()
	if failed.Load() > 0 {
		t.FailNow()
	}
	if diff := cmp.Diff(map[string]int{"/claude.tgz": 1, "/codex.tgz": 1}, reg.counts()); diff != "" {
		t.Errorf("downloads (-want +got):\n%s", diff)
	}
	want := Tools{
		Claude:   filepath.Join(c.keyDir(), "claude", "package", "claude"),
		CodexDir: filepath.Join(c.keyDir(), "codex", "package", "vendor", codexTriple),
	}
	for i, got := range results {
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("caller %d: tools (-want +got):\n%s", i, diff)
		}
	}
	for path, content := range map[string]string{want.Claude: "claude-binary", filepath.Join(want.CodexDir, "codex-path", "rg"): "rg-binary"} {
		if b, err := os.ReadFile(path); err != nil || string(b) != content {
			t.Errorf("%s: %q, %v; want %q", path, b, err, content)
		}
	}
	if diff := cmp.Diff([]string{"claude", "codex"}, names(t, c.keyDir())); diff != "" {
		t.Errorf("the key's directory (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{c.Key(), "locks", "notes"}, names(t, c.Dir)); diff != "" {
		t.Errorf("the cache (-want +got):\n%s", diff)
	}
}

// names lists dir.
func names(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}

// TestFetchRefuses checks that a tarball that is not the pinned one, or
// not the package, is never put in the cache.
func TestFetchRefuses(t *testing.T) {
	tests := []struct {
		name  string
		setup func(c *Cache, reg *registry)
		want  string
	}{
		{"another digest", func(c *Cache, reg *registry) {
			reg.files["/codex.tgz"] = tgz(t, entry{name: "package/vendor/" + codexTriple + "/bin/codex", body: "tampered"})
		}, "sha512 is"},
		{"not found", func(c *Cache, reg *registry) {
			delete(reg.files, "/codex.tgz")
		}, "404 Not Found"},
		{"without the binary", func(c *Cache, reg *registry) {
			b := tgz(t, entry{name: "package/README.md", body: "no binary"})
			reg.files["/codex.tgz"] = b
			c.Pins.Codex.Integrity = integrity(b)
		}, "the package has no vendor/" + codexTriple + "/bin/codex"},
		{"hostile", func(c *Cache, reg *registry) {
			b := tgz(t, entry{name: "package/vendor/" + codexTriple + "/bin/codex", body: "x"}, entry{name: "../../escape", body: "x"})
			reg.files["/codex.tgz"] = b
			c.Pins.Codex.Integrity = integrity(b)
		}, "cannot be unpacked safely"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, reg := testCache(t)
			tc.setup(c, reg)
			_, err := c.Fetch(t.Context(), io.Discard)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Fetch: got %v, want an error with %q", err, tc.want)
			}
			// Claude came first and stays; nothing of Codex's is left.
			if diff := cmp.Diff([]string{"claude"}, names(t, c.keyDir())); diff != "" {
				t.Errorf("the key's directory (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff([]string{c.Key(), "locks"}, names(t, c.Dir)); diff != "" {
				t.Errorf("the cache (-want +got):\n%s", diff)
			}
		})
	}
}
