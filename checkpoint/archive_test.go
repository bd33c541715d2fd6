package checkpoint

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// entry is one member of a test archive.
type entry struct {
	name string
	typ  byte
	body string
	link string
}

// archive writes a test archive of entries to a file and returns its path.
func archive(t *testing.T, entries []entry) string {
	t.Helper()
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, e := range entries {
		typ := e.typ
		if typ == 0 {
			typ = tar.TypeReg
		}
		h := &tar.Header{Name: e.name, Typeflag: typ, Mode: 0o644, Linkname: e.link}
		if typ == tar.TypeReg {
			h.Size = int64(len(e.body))
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if typ == tar.TypeReg {
			io.WriteString(tw, e.body)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "in.tar")
	if err := os.WriteFile(p, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// config is an image configuration with labels.
func config(labels map[string]string) string {
	b, _ := json.Marshal(map[string]any{
		"architecture": "amd64", "os": "linux",
		"config": map[string]any{"Env": []string{"PATH=/bin"}, "Labels": labels},
		"rootfs": map[string]any{"type": "layers", "diff_ids": []string{"sha256:" + strings.Repeat("a", 64)}},
	})
	return string(b)
}

func manifest(configPath string, layers ...string) string {
	b, _ := json.Marshal([]map[string]any{{"Config": configPath, "RepoTags": []string{"evil:latest"}, "Layers": layers}})
	return string(b)
}

// savedLegacy is an archive in the layout docker save 20.10 writes.
func savedLegacy(labels map[string]string) []entry {
	layer := strings.Repeat("b", 64)
	cfg := strings.Repeat("c", 64) + ".json"
	return []entry{
		{name: layer + "/", typ: tar.TypeDir},
		{name: layer + "/VERSION", body: "1.0"},
		{name: layer + "/json", body: "{}"},
		{name: layer + "/layer.tar", body: "LAYER-CONTENT"},
		{name: cfg, body: config(labels)},
		{name: "repositories", body: `{"evil":{"latest":"x"}}`},
		{name: "manifest.json", body: manifest(cfg, layer+"/layer.tar")},
	}
}

var wantLabels = map[string]string{"dev.sbx.checkpoint": "restored", "dev.sbx.checkpoint.origin": "imported"}

// read returns a sanitized archive's entries: name → body.
func read(t *testing.T, data []byte) (map[string]string, []string) {
	t.Helper()
	tr := tar.NewReader(bytes.NewReader(data))
	out := map[string]string{}
	var names []string
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out, names
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Typeflag != tar.TypeReg && h.Typeflag != tar.TypeDir {
			t.Errorf("output entry %s has type %q", h.Name, h.Typeflag)
		}
		b, _ := io.ReadAll(tr)
		out[h.Name] = string(b)
		names = append(names, h.Name)
	}
}

func TestSanitizeKeepsOnlyTheImage(t *testing.T) {
	for _, layout := range []string{"legacy", "oci"} {
		t.Run(layout, func(t *testing.T) {
			hostile := map[string]string{
				"dev.sbx.record":    `{"managedBy":"github.com/sbxhq/sbx","config":{"mounts":[{"source":"/","target":"/host"}]}}`,
				"dev.sbx.managed":   "true",
				"dev.sbx.sandbox":   "victim",
				"DEV.SBX.protect":   "false",
				"org.example.owner": "team-a",
			}
			entries := savedLegacy(hostile)
			layerPath := strings.Repeat("b", 64) + "/layer.tar"
			if layout == "oci" {
				layer, cfg := "blobs/sha256/"+strings.Repeat("b", 64), "blobs/sha256/"+strings.Repeat("c", 64)
				layerPath = layer
				entries = []entry{
					{name: "blobs/", typ: tar.TypeDir},
					{name: "blobs/sha256/", typ: tar.TypeDir},
					{name: layer, body: "LAYER-CONTENT"},
					{name: cfg, body: config(hostile)},
					{name: "blobs/sha256/" + strings.Repeat("d", 64), body: `{"schemaVersion":2}`},
					{name: "index.json", body: `{"schemaVersion":2}`},
					{name: "oci-layout", body: `{"imageLayoutVersion":"1.0.0"}`},
					{name: "manifest.json", body: manifest(cfg, layer)},
				}
			}
			var out bytes.Buffer
			if err := Sanitize(archive(t, entries), "sbx-checkpoint:restored", wantLabels, Limits{}, &out); err != nil {
				t.Fatal(err)
			}
			files, names := read(t, out.Bytes())
			var m []manifestEntry
			if err := json.Unmarshal([]byte(files["manifest.json"]), &m); err != nil || len(m) != 1 {
				t.Fatalf("manifest.json: %v %q", err, files["manifest.json"])
			}
			if diff := cmp.Diff([]string{"sbx-checkpoint:restored"}, m[0].RepoTags); diff != "" {
				t.Errorf("RepoTags (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff([]string{layerPath}, m[0].Layers); diff != "" {
				t.Errorf("Layers (-want +got):\n%s", diff)
			}
			if files[layerPath] != "LAYER-CONTENT" {
				t.Errorf("layer content %q", files[layerPath])
			}
			var cfg struct {
				Config struct {
					Env    []string
					Labels map[string]string
				} `json:"config"`
				RootFS struct {
					DiffIDs []string `json:"diff_ids"`
				} `json:"rootfs"`
			}
			if err := json.Unmarshal([]byte(files[m[0].Config]), &cfg); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(wantLabels, cfg.Config.Labels); diff != "" {
				t.Errorf("labels (-want +got):\n%s", diff)
			}
			if len(cfg.RootFS.DiffIDs) != 1 || len(cfg.Config.Env) != 1 {
				t.Errorf("the rest of the configuration was not kept: %+v", cfg)
			}
			for _, n := range names {
				if n == "repositories" || n == "index.json" || n == "oci-layout" || strings.Contains(n, strings.Repeat("d", 64)) {
					t.Errorf("output keeps %s", n)
				}
			}
		})
	}
}

func TestSanitizeRefuses(t *testing.T) {
	legacy := savedLegacy(nil)
	cfg := strings.Repeat("c", 64) + ".json"
	layer := strings.Repeat("b", 64) + "/layer.tar"
	// with adds entries before the manifest; set replaces entry i.
	with := func(extra ...entry) []entry {
		return append(append([]entry(nil), legacy[:len(legacy)-1]...), append(extra, legacy[len(legacy)-1])...)
	}
	set := func(i int, e entry) []entry {
		out := append([]entry(nil), legacy...)
		out[i] = e
		return out
	}
	const cfgAt, manifestAt = 4, 6
	tests := []struct {
		name    string
		entries []entry
		lim     Limits
		want    string
	}{
		{"path escape", with(entry{name: "../../home/user/.bashrc", body: "x"}), Limits{}, `".." component`},
		{"absolute path", with(entry{name: "/etc/cron.d/x", body: "x"}), Limits{}, "an absolute path"},
		{"unclean path", with(entry{name: "blobs/./x", body: "x"}), Limits{}, "not a clean path"},
		{"odd character", with(entry{name: "a b", body: "x"}), Limits{}, "the character ' '"},
		{"symlink", with(entry{name: "link", typ: tar.TypeSymlink, link: "/etc/passwd"}), Limits{}, "symbolic link"},
		{"hard link", with(entry{name: "hard", typ: tar.TypeLink, link: "manifest.json"}), Limits{}, "hard link"},
		{"device", with(entry{name: "dev", typ: tar.TypeChar}), Limits{}, "device"},
		{"fifo", with(entry{name: "fifo", typ: tar.TypeFifo}), Limits{}, "named pipe"},
		{"duplicate", with(entry{name: cfg, body: config(map[string]string{"dev.sbx.record": "x"})}), Limits{}, "appears twice"},
		{"no manifest", set(manifestAt, entry{name: "other.json", body: "[]"}), Limits{}, "no manifest.json"},
		{"two images", set(manifestAt, entry{name: "manifest.json", body: "[" + strings.Trim(manifest(cfg, layer), "[]") + "," + strings.Trim(manifest(cfg, layer), "[]") + "]"}), Limits{}, "lists 2 images"},
		{"missing layer", set(manifestAt, entry{name: "manifest.json", body: manifest(cfg, "nope/layer.tar")}), Limits{}, `names "nope/layer.tar"`},
		{"manifest escapes", set(manifestAt, entry{name: "manifest.json", body: manifest("../../etc/passwd", layer)}), Limits{}, `".." component`},
		{"too many entries", legacy, Limits{MaxEntries: 3}, "more than 3 entries"},
		{"manifest too large", legacy, Limits{MaxJSON: 10}, "more than the limit of 10"},
		{"archive too large", legacy, Limits{MaxSize: 100}, "more than the limit of 100"},
		{"config key in another case", set(cfgAt, entry{name: cfg, body: `{"config":{},"Config":{"Labels":{"dev.sbx.record":"x"}}}`}), Limits{}, `both "config" and "Config"`},
		{"rootfs key in another case", set(cfgAt, entry{name: cfg, body: `{"rootfs":{},"RootFS":{}}`}), Limits{}, `both "rootfs" and "RootFS"`},
		{"config not an object", set(cfgAt, entry{name: cfg, body: `[]`}), Limits{}, "not a JSON object"},
		{"env not strings", set(cfgAt, entry{name: cfg, body: `{"config":{"Env":[1]}}`}), Limits{}, "configuration's config"},
		{"layer count", set(cfgAt, entry{name: cfg, body: `{"os":"linux","rootfs":{"type":"layers","diff_ids":[]}}`}), Limits{}, "names 0 layers"},
		{"layer digest", set(cfgAt, entry{name: cfg, body: `{"os":"linux","rootfs":{"type":"layers","diff_ids":["sha256:../x"]}}`}), Limits{}, "not a sha256 digest"},
		{"platform", set(cfgAt, entry{name: cfg, body: `{"os":"linux\u001b]52;c;eA==\u0007","rootfs":{"type":"layers","diff_ids":["sha256:` + strings.Repeat("a", 64) + `"]}}`}), Limits{}, "platform"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			err := Sanitize(archive(t, tc.entries), "sbx-checkpoint:x", wantLabels, tc.lim, &out)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one saying %q", err, tc.want)
			}
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("err %v does not wrap ErrInvalid", err)
			}
		})
	}
}

func TestSanitizeLayerLimit(t *testing.T) {
	legacy := savedLegacy(nil)
	var out bytes.Buffer
	err := Sanitize(archive(t, legacy), "sbx-checkpoint:x", nil, Limits{MaxLayers: 0}, &out)
	if err != nil {
		t.Fatalf("one layer under the default limit: %v", err)
	}
	cfg := strings.Repeat("c", 64) + ".json"
	layer := strings.Repeat("b", 64) + "/layer.tar"
	many := append(append([]entry(nil), legacy[:len(legacy)-1]...), entry{name: "manifest.json", body: manifest(cfg, layer, layer, layer)})
	err = Sanitize(archive(t, many), "sbx-checkpoint:x", nil, Limits{MaxLayers: 2}, &out)
	if err == nil || !strings.Contains(err.Error(), "3 layers, more than the limit of 2") {
		t.Fatalf("err = %v", err)
	}
}

// TestSanitizeRebuildsTheConfiguration plays an archive's author who sets
// what Docker would apply to a container made from the image: a user, a
// preloaded library, a health check, volumes, an entrypoint, onbuild
// triggers, ports, a stop signal, a shell, sbx's own labels. The rebuilt
// configuration holds only the platform, the layers, PATH, the working
// directory and sbx's labels.
func TestSanitizeRebuildsTheConfiguration(t *testing.T) {
	diff := "sha256:" + strings.Repeat("a", 64)
	hostile := map[string]any{
		"architecture": "amd64", "os": "linux", "created": "2026-01-02T03:04:05Z",
		"author":  "evil",
		"history": []map[string]any{{"created_by": "RUN \u001b]52;c;ZXZpbA==\u0007"}},
		"config": map[string]any{
			"User":         "0:0",
			"Env":          []string{"PATH=/usr/local/bin:/usr/bin:/bin", "LD_PRELOAD=/tmp/evil.so", "BASH_ENV=/tmp/x"},
			"Entrypoint":   []string{"/evil"},
			"Cmd":          []string{"-c", "id"},
			"Healthcheck":  map[string]any{"Test": []string{"CMD-SHELL", "/evil"}, "Interval": 1000000000},
			"Volumes":      map[string]any{"/data": map[string]any{}},
			"OnBuild":      []string{"RUN /evil"},
			"ExposedPorts": map[string]any{"22/tcp": map[string]any{}},
			"StopSignal":   "SIGCONT",
			"Shell":        []string{"/evil"},
			"WorkingDir":   "/work/ws",
			"Labels":       map[string]string{"dev.sbx.record": "{}", "dev.sbx.managed": "true", "org.example": "x"},
		},
		"rootfs": map[string]any{"type": "layers", "diff_ids": []string{diff}},
	}
	b, _ := json.Marshal(hostile)
	entries := savedLegacy(nil)
	entries[4].body = string(b)
	var out bytes.Buffer
	if err := Sanitize(archive(t, entries), "sbx-checkpoint:x", wantLabels, Limits{}, &out); err != nil {
		t.Fatal(err)
	}
	files, _ := read(t, out.Bytes())
	var m []manifestEntry
	json.Unmarshal([]byte(files["manifest.json"]), &m)
	var got map[string]any
	if err := json.Unmarshal([]byte(files[m[0].Config]), &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"architecture": "amd64", "os": "linux", "created": "2026-01-02T03:04:05Z",
		"config": map[string]any{
			"Env":        []any{"PATH=/usr/local/bin:/usr/bin:/bin"},
			"WorkingDir": "/work/ws",
			"Labels":     map[string]any{"dev.sbx.checkpoint": "restored", "dev.sbx.checkpoint.origin": "imported"},
		},
		"rootfs": map[string]any{"type": "layers", "diff_ids": []any{diff}},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("rebuilt configuration (-want +got):\n%s", d)
	}
}

// TestSanitizeDropsOddValues: a PATH or working directory sbx would not
// write (relative, with control characters, unclean) is dropped, not kept.
func TestSanitizeDropsOddValues(t *testing.T) {
	for _, tc := range []struct{ env, wd string }{
		{"PATH=bin:/usr/bin", "work"},
		{"PATH=/bin\u001b[2J", "/work/\u001b]0;x\u0007"},
		{"PATH=/bin\n", "/work/../etc"},
	} {
		cfg, _ := json.Marshal(map[string]any{"os": "linux",
			"config": map[string]any{"Env": []string{tc.env}, "WorkingDir": tc.wd},
			"rootfs": map[string]any{"type": "layers", "diff_ids": []string{"sha256:" + strings.Repeat("a", 64)}}})
		entries := savedLegacy(nil)
		entries[4].body = string(cfg)
		var out bytes.Buffer
		if err := Sanitize(archive(t, entries), "sbx-checkpoint:x", nil, Limits{}, &out); err != nil {
			t.Fatal(err)
		}
		files, _ := read(t, out.Bytes())
		var m []manifestEntry
		json.Unmarshal([]byte(files["manifest.json"]), &m)
		if c := files[m[0].Config]; strings.Contains(c, "Env") || strings.Contains(c, "WorkingDir") {
			t.Errorf("%s %s kept: %s", tc.env, tc.wd, c)
		}
	}
}
