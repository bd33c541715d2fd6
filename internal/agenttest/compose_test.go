package agenttest

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// baseEntry is one entry of a test base.
type baseEntry struct {
	name     string
	typ      byte
	mode     int64
	uid, gid int
	linkname string
	body     string
}

// testBase is a base shaped like debootstrap's in what a confined
// extraction would refuse or lose (a setuid binary, a group's file, a
// hard link, a device node, an absolute symlink) and with the
// directories the agents go into.
var testBase = []baseEntry{
	{name: "./", typ: tar.TypeDir, mode: 0o755},
	{name: "./dev/", typ: tar.TypeDir, mode: 0o755},
	{name: "./dev/null", typ: tar.TypeChar, mode: 0o666},
	{name: "./etc/", typ: tar.TypeDir, mode: 0o755},
	{name: "./etc/shadow", typ: tar.TypeReg, mode: 0o640, gid: 42, body: "root:*:20000:0:99999:7:::\n"},
	{name: "./etc/localtime", typ: tar.TypeSymlink, mode: 0o777, linkname: "/usr/share/zoneinfo/Etc/UTC"},
	{name: "./home/", typ: tar.TypeDir, mode: 0o755},
	{name: "./home/agent/", typ: tar.TypeDir, mode: 0o700, uid: agentID, gid: agentID},
	{name: "./opt/", typ: tar.TypeDir, mode: 0o755},
	{name: "./root/", typ: tar.TypeDir, mode: 0o700},
	{name: "./usr/", typ: tar.TypeDir, mode: 0o755},
	{name: "./usr/bin/", typ: tar.TypeDir, mode: 0o755},
	{name: "./usr/bin/passwd", typ: tar.TypeReg, mode: 0o4755, body: "passwd"},
	{name: "./usr/bin/uncompress", typ: tar.TypeReg, mode: 0o755, body: "gzip -d"},
	{name: "./usr/bin/gunzip", typ: tar.TypeLink, mode: 0o755, linkname: "./usr/bin/uncompress"},
	{name: "./usr/local/", typ: tar.TypeDir, mode: 0o755},
	{name: "./usr/local/bin/", typ: tar.TypeDir, mode: 0o755},
}

// baseTar is the tar of entries.
func baseTar(t *testing.T, entries []baseEntry) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Typeflag: e.typ, Mode: e.mode, Uid: e.uid, Gid: e.gid, Linkname: e.linkname, Size: int64(len(e.body))}
		if e.typ == tar.TypeChar {
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
	return buf.Bytes()
}

// listTar lists the tar file p, one line per entry: name, type, mode,
// owner, link or device, and content.
func listTar(t *testing.T, p string) []string {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var lines []string
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return lines
		}
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		line := fmt.Sprintf("%s %c %o %d:%d", h.Name, h.Typeflag, h.Mode, h.Uid, h.Gid)
		switch h.Typeflag {
		case tar.TypeSymlink, tar.TypeLink:
			line += " -> " + h.Linkname
		case tar.TypeChar:
			line += fmt.Sprintf(" %d,%d", h.Devmajor, h.Devminor)
		case tar.TypeReg:
			line += fmt.Sprintf(" %q", body)
		}
		lines = append(lines, line)
	}
}

// baseLines are the lines listTar gives for testBase.
func baseLines() []string {
	return []string{
		"./ 5 755 0:0", "./dev/ 5 755 0:0", "./dev/null 3 666 0:0 1,3",
		"./etc/ 5 755 0:0", `./etc/shadow 0 640 0:42 "root:*:20000:0:99999:7:::\n"`, "./etc/localtime 2 777 0:0 -> /usr/share/zoneinfo/Etc/UTC",
		"./home/ 5 755 0:0", "./home/agent/ 5 700 1000:1000", "./opt/ 5 755 0:0", "./root/ 5 700 0:0",
		"./usr/ 5 755 0:0", "./usr/bin/ 5 755 0:0", `./usr/bin/passwd 0 4755 0:0 "passwd"`, `./usr/bin/uncompress 0 755 0:0 "gzip -d"`,
		"./usr/bin/gunzip 1 755 0:0 -> ./usr/bin/uncompress", "./usr/local/ 5 755 0:0", "./usr/local/bin/ 5 755 0:0",
	}
}

// agentLines are the lines listTar gives for the agents testCache's
// packages hold, Claude's binary holding claude.
func agentLines(claude string) []string {
	wrapper := fmt.Sprintf("%q", codexWrapper)
	config := fmt.Sprintf("%q", codexConfig)
	return []string{
		fmt.Sprintf("./usr/local/bin/claude 0 755 0:0 %q", claude),
		"./opt/codex/ 5 755 0:0", "./opt/codex/bin/ 5 755 0:0", `./opt/codex/bin/codex 0 755 0:0 "codex-binary"`,
		"./opt/codex/codex-path/ 5 755 0:0", `./opt/codex/codex-path/rg 0 755 0:0 "rg-binary"`,
		"./usr/local/bin/codex 0 755 0:0 " + wrapper, "./usr/local/bin/rg 2 777 0:0 -> /opt/codex/codex-path/rg",
		"./root/.codex/ 5 700 0:0", "./root/.codex/config.toml 0 644 0:0 " + config,
		"./home/agent/.codex/ 5 700 1000:1000", "./home/agent/.codex/config.toml 0 644 1000:1000 " + config,
	}
}

// countingBase makes c's base builder write base and count its runs.
func countingBase(c *Cache, base []byte, builds *atomic.Int32) {
	c.buildBase = func(ctx context.Context, dst string, log io.Writer) error {
		builds.Add(1)
		return os.WriteFile(dst, base, 0o644)
	}
}

// rootfs is c.rootfs under the lock, as Template runs it.
func rootfs(t *testing.T, c *Cache) (string, error) {
	t.Helper()
	l, err := c.lock(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release()
	return c.rootfs(t.Context(), io.Discard)
}

// TestBaseReused builds the image's filesystem for a key, then for a
// second key (other agent releases) in the same cache: the base is built
// once, each key's tar is the base's entries as they are (owners, setuid,
// hard link, device, absolute link) and then its own agents, and a key
// whose tar is there is not made again.
func TestBaseReused(t *testing.T) {
	first, reg := testCache(t)
	claude2 := tgz(t, entry{name: "package/claude", body: "claude-binary-2"})
	reg.files["/claude2.tgz"] = claude2
	second := *first
	second.Pins.Claude.Version, second.Pins.Claude.Release = "2", "2"
	second.Pins.Claude.Tarball, second.Pins.Claude.Integrity = reg.srv.URL+"/claude2.tgz", integrity(claude2)
	var builds atomic.Int32
	base := baseTar(t, testBase)
	countingBase(first, base, &builds)
	countingBase(&second, base, &builds)
	if first.Key() == second.Key() || baseKey() == first.Key() {
		t.Fatalf("the keys do not differ: %s, %s, base %s", first.Key(), second.Key(), baseKey())
	}

	for _, tc := range []struct {
		name   string
		c      *Cache
		claude string
		builds int32
	}{
		{"first key", first, "claude-binary", 1},
		{"second key", &second, "claude-binary-2", 1},
		{"first key again", first, "claude-binary", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := rootfs(t, tc.c)
			if err != nil {
				t.Fatal(err)
			}
			if p != filepath.Join(tc.c.Dir, tc.c.Key(), "rootfs.tar") {
				t.Errorf("rootfs at %s", p)
			}
			if got := builds.Load(); got != tc.builds {
				t.Errorf("the base was built %d times, want %d", got, tc.builds)
			}
			if diff := cmp.Diff(append(baseLines(), agentLines(tc.claude)...), listTar(t, p)); diff != "" {
				t.Errorf("rootfs.tar (-want +got):\n%s", diff)
			}
		})
	}
	if diff := cmp.Diff(map[string]int{"/claude.tgz": 1, "/claude2.tgz": 1, "/codex.tgz": 2}, reg.counts()); diff != "" {
		t.Errorf("downloads (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(sorted([]string{basePrefix + baseKey(), first.Key(), second.Key(), "locks"}), names(t, first.Dir)); diff != "" {
		t.Errorf("the cache (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"rootfs.tar"}, names(t, first.baseDir())); diff != "" {
		t.Errorf("the base's directory (-want +got):\n%s", diff)
	}
}

// TestComposeRefuses: a base the agents cannot be added to as they are
// makes no rootfs.tar and leaves no work behind.
func TestComposeRefuses(t *testing.T) {
	without := func(name string) []byte {
		var out []baseEntry
		for _, e := range testBase {
			if e.name != name {
				out = append(out, e)
			}
		}
		return baseTar(t, out)
	}
	tests := []struct {
		name string
		base func() []byte
		want string
	}{
		{"no /opt", func() []byte { return without("./opt/") }, "the base has no directory /opt for /opt/codex"},
		{"no agent home", func() []byte { return without("./home/agent/") }, "the base has no directory /home/agent for /home/agent/.codex"},
		{"/usr/local/bin a link", func() []byte {
			entries := append([]baseEntry(nil), testBase...)
			entries[len(entries)-1] = baseEntry{name: "./usr/local/bin", typ: tar.TypeSymlink, linkname: "/tmp"}
			return baseTar(t, entries)
		}, "the base has no directory /usr/local/bin for /usr/local/bin/claude"},
		{"claude there already", func() []byte {
			return baseTar(t, append(append([]baseEntry(nil), testBase...), baseEntry{name: "./usr/local/bin/claude", typ: tar.TypeReg, mode: 0o755, body: "old"}))
		}, "the base already has /usr/local/bin/claude, which the agents add"},
		{"codex config there already", func() []byte {
			return baseTar(t, append(append([]baseEntry(nil), testBase...), baseEntry{name: "./root/.codex/", typ: tar.TypeDir, mode: 0o700}))
		}, "the base already has /root/.codex"},
		{"not a tar", func() []byte { return bytes.Repeat([]byte("not a tar "), 100) }, "reading the base"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, _ := testCache(t)
			var builds atomic.Int32
			countingBase(c, tc.base(), &builds)
			_, err := rootfs(t, c)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error with %q", err, tc.want)
			}
			if diff := cmp.Diff([]string{"claude", "codex"}, names(t, c.keyDir())); diff != "" {
				t.Errorf("the key's directory (-want +got):\n%s", diff)
			}
		})
	}
}

// TestBaseBuildFails: when the base's build or the agents' download
// fails, that failure is the one reported, not the other's cancellation,
// and nothing is left but what completed.
func TestBaseBuildFails(t *testing.T) {
	broken := errors.New("debootstrap failed")
	tests := []struct {
		name  string
		build func(ctx context.Context, dst string, log io.Writer) error
		setup func(reg *registry)
		want  string
	}{
		{"the base", func(context.Context, string, io.Writer) error { return broken }, func(*registry) {}, "debootstrap failed"},
		{"the download", func(ctx context.Context, dst string, log io.Writer) error {
			// A long debootstrap: it ends when it is cancelled.
			<-ctx.Done()
			return ctx.Err()
		}, func(reg *registry) { delete(reg.files, "/codex.tgz") }, "404 Not Found"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, reg := testCache(t)
			tc.setup(reg)
			c.buildBase = tc.build
			_, err := rootfs(t, c)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error with %q", err, tc.want)
			}
			if exists(c.baseTar()) || exists(c.rootfsTar()) {
				t.Error("a tar was left")
			}
		})
	}
}

// TestPrune keeps the pinned key's entries, the newest releases' (the
// latest file) and the cache's own, and the cache's base; other keys and
// bases go, and what is not shaped like either stays.
func TestPrune(t *testing.T) {
	pinned := key(defaultPins())
	other := strings.Repeat("ab", 32)
	newest := strings.Repeat("cd", 32)
	oldBase := basePrefix + strings.Repeat("ef", 32)
	tests := []struct {
		name   string
		latest string // the latest file's content; "" for none
		want   func(own string) []string
		kept   []string // besides own and pinned
	}{
		{"no latest", "", func(own string) []string {
			return []string{basePrefix + baseKey(), "base-notes", own, "locks", "notes", pinned}
		}, nil},
		{"latest", newest + "\n", func(own string) []string {
			return []string{basePrefix + baseKey(), "base-notes", own, newest, "latest", "locks", "notes", pinned}
		}, []string{newest}},
		{"latest not a key", "../" + newest + "\n", func(own string) []string {
			return []string{basePrefix + baseKey(), "base-notes", own, "latest", "locks", "notes", pinned}
		}, nil},
		{"latest short", "ab\n", func(own string) []string {
			return []string{basePrefix + baseKey(), "base-notes", own, "latest", "locks", "notes", pinned}
		}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, _ := testCache(t)
			for _, d := range []string{pinned, other, newest, c.Key(), oldBase, basePrefix + baseKey(), "base-notes", "notes", "locks"} {
				if err := os.MkdirAll(filepath.Join(c.Dir, d, "x"), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			if tc.latest != "" {
				if err := os.WriteFile(filepath.Join(c.Dir, latestFile), []byte(tc.latest), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if err := c.pruneKeys(); err != nil {
				t.Fatal(err)
			}
			want := tc.want(c.Key())
			if diff := cmp.Diff(sorted(want), names(t, c.Dir)); diff != "" {
				t.Errorf("the cache (-want +got):\n%s", diff)
			}
			// pruneImages names the images of these keys (image(k)).
			kept := slices.Sorted(maps.Keys(c.kept()))
			if diff := cmp.Diff(sorted(append([]string{c.Key(), pinned}, tc.kept...)), kept); diff != "" {
				t.Errorf("kept (-want +got):\n%s", diff)
			}
		})
	}
}

// TestLatestMarked: a cache of the newest releases records its key when
// it takes the lock, so that a pinned run's pruning keeps its entries;
// and a killed run's work in the cache, the key's and the base's
// directories is removed.
func TestLatestMarked(t *testing.T) {
	newest, _ := testCache(t)
	newest.Latest = true
	killed := []string{
		filepath.Join(newest.Dir, tmpPrefix+latestFile),
		filepath.Join(newest.keyDir(), tmpPrefix+"rootfs.tar"),
		filepath.Join(newest.baseDir(), tmpPrefix+"rootfs-1234"),
	}
	for _, p := range killed {
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := newest.Fetch(t.Context(), io.Discard); err != nil {
		t.Fatal(err)
	}
	for _, p := range killed {
		if exists(p) {
			t.Errorf("%s is left", p)
		}
	}
	b, err := os.ReadFile(filepath.Join(newest.Dir, latestFile))
	if err != nil || string(b) != newest.Key()+"\n" {
		t.Fatalf("latest: %q, %v; want the key", b, err)
	}
	pinned := *newest
	pinned.Latest = false
	pinned.Pins.Codex.Version = "0"
	if _, err := pinned.Fetch(t.Context(), io.Discard); err != nil {
		t.Fatal(err)
	}
	if !exists(filepath.Join(newest.keyDir(), "claude", "package", "claude")) {
		t.Error("a pinned run's pruning removed the newest releases' agents")
	}
	if diff := cmp.Diff(sorted([]string{newest.Key(), pinned.Key(), basePrefix + baseKey(), latestFile, "locks"}), names(t, newest.Dir)); diff != "" {
		t.Errorf("the cache (-want +got):\n%s", diff)
	}
}

// sorted is s in order, as os.ReadDir lists.
func sorted(s []string) []string { return slices.Sorted(slices.Values(s)) }
