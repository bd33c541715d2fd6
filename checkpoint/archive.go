package checkpoint

import (
	"archive/tar"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strings"
	"time"

	"github.com/sbxhq/sbx/internal/untrusted"
)

// Limits bound what an imported archive may hold. The zero value means the
// defaults.
type Limits struct {
	// MaxSize bounds the archive's bytes (default 32 GiB).
	MaxSize int64
	// MaxEntries bounds its entries (default 4096).
	MaxEntries int
	// MaxJSON bounds manifest.json and the image configuration, each
	// (default 4 MiB).
	MaxJSON int64
	// MaxLayers bounds the layers of the image (default 127, Docker's own
	// limit).
	MaxLayers int
}

// The default limits.
const (
	DefaultMaxSize    = 32 << 30
	DefaultMaxEntries = 4096
	DefaultMaxJSON    = 4 << 20
	DefaultMaxLayers  = 127
)

func (l Limits) withDefaults() Limits {
	if l.MaxSize <= 0 {
		l.MaxSize = DefaultMaxSize
	}
	if l.MaxEntries <= 0 {
		l.MaxEntries = DefaultMaxEntries
	}
	if l.MaxJSON <= 0 {
		l.MaxJSON = DefaultMaxJSON
	}
	if l.MaxLayers <= 0 {
		l.MaxLayers = DefaultMaxLayers
	}
	return l
}

// ErrInvalid is the cause of every refusal of an archive.
var ErrInvalid = errors.New("not an image archive sbx accepts")

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, args...))
}

// manifestEntry is one image of manifest.json, the index `docker image
// save` writes at the root of its archive (the legacy layout, and next to
// index.json in the OCI one): the configuration's path and the layers',
// base first.
type manifestEntry struct {
	Config   string
	RepoTags []string
	Layers   []string
}

// LabelPrefix starts every label sbx reads from images and containers; an
// imported image keeps none of its own.
const LabelPrefix = "dev.sbx."

// Sanitize reads the image archive at src, as `docker save` or `sbx
// template save -o` write it, checks it, and writes to w an archive that
// `docker load` and `sbx template load` read: manifest.json naming the one
// image as ref, a configuration rebuilt from only what sbx needs of the
// archive's (rebuild: the platform, the layers' digests, PATH, the working
// directory) with labels as its only labels, and the layers manifest.json
// names, as they were (the backend checks each against the
// configuration's digests). Nothing else of the archive is kept.
//
// The archive is attacker-controlled (an export the agent could rewrite
// in its workspace, a file from elsewhere): src is opened without
// blocking and must be a regular file; it is copied once, bounded, into a
// private file, so it cannot change between the checks and the copy out;
// entries must be regular files or directories with clean relative names
// (no "..", no absolute path, no links or devices, no duplicates); sizes
// and counts are bounded; the configuration's keys must not differ from
// the ones sbx reads only in case, as a case-insensitive decoder would
// merge them. Sanitize writes nothing from the archive to the host's file
// system but its private copy.
func Sanitize(src, ref string, labels map[string]string, lim Limits, w io.Writer) error {
	lim = lim.withDefaults()
	in, info, err := untrusted.OpenPath(src)
	if err != nil {
		return err
	}
	defer in.Close()
	if info.Size() > lim.MaxSize {
		return invalid("%s holds %d bytes, more than the limit of %d", src, info.Size(), lim.MaxSize)
	}
	dir, err := os.MkdirTemp("", "sbx-import-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	priv, err := os.OpenFile(dir+"/archive.tar", os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	defer priv.Close()
	n, err := io.Copy(priv, io.LimitReader(in, lim.MaxSize+1))
	if err != nil {
		return fmt.Errorf("reading %s: %w", src, err)
	}
	if n > lim.MaxSize {
		return invalid("%s holds more than the limit of %d bytes", src, lim.MaxSize)
	}
	if _, err := priv.Seek(0, io.SeekStart); err != nil {
		return err
	}
	m, files, err := scan(priv, lim)
	if err != nil {
		return err
	}
	if _, err := priv.Seek(0, io.SeekStart); err != nil {
		return err
	}
	return rewrite(priv, w, m, files, ref, labels, lim)
}

// scan checks every entry of the archive and reads its manifest.
func scan(r io.Reader, lim Limits) (*manifestEntry, map[string]int64, error) {
	tr := tar.NewReader(r)
	files := map[string]int64{}
	seen := map[string]bool{}
	var manifest []byte
	for count := 0; ; count++ {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, nil, invalid("%v", err)
		}
		if count >= lim.MaxEntries {
			return nil, nil, invalid("more than %d entries", lim.MaxEntries)
		}
		name, err := entryName(h.Name)
		if err != nil {
			return nil, nil, err
		}
		if seen[name] {
			return nil, nil, invalid("entry %q appears twice", name)
		}
		seen[name] = true
		switch h.Typeflag {
		case tar.TypeDir:
			continue
		case tar.TypeReg, tar.TypeRegA:
		default:
			return nil, nil, invalid("entry %q is a %s: an image archive holds only files and directories", name, typeName(h.Typeflag))
		}
		files[name] = h.Size
		if name == "manifest.json" {
			if manifest, err = readBounded(tr, h.Size, lim.MaxJSON, name); err != nil {
				return nil, nil, err
			}
		}
	}
	if manifest == nil {
		return nil, nil, invalid("no manifest.json (write it with docker save, or sbx checkpoint export)")
	}
	var ms []manifestEntry
	if err := json.Unmarshal(manifest, &ms); err != nil {
		return nil, nil, invalid("manifest.json: %v", err)
	}
	if len(ms) != 1 {
		return nil, nil, invalid("manifest.json lists %d images; a checkpoint is one", len(ms))
	}
	m := &ms[0]
	if len(m.Layers) > lim.MaxLayers {
		return nil, nil, invalid("%d layers, more than the limit of %d", len(m.Layers), lim.MaxLayers)
	}
	for _, p := range append([]string{m.Config}, m.Layers...) {
		name, err := entryName(p)
		if err != nil {
			return nil, nil, err
		}
		if _, ok := files[name]; !ok || name != p {
			return nil, nil, invalid("manifest.json names %q, which is not a file of the archive", p)
		}
	}
	if files[m.Config] > lim.MaxJSON {
		return nil, nil, invalid("the image configuration %s holds %d bytes, more than the limit of %d", m.Config, files[m.Config], lim.MaxJSON)
	}
	if m.Config == "manifest.json" {
		return nil, nil, invalid("manifest.json names itself as the configuration")
	}
	return m, files, nil
}

// rewrite writes the sanitized archive: the layers, then the new
// configuration and manifest.json.
func rewrite(r io.Reader, w io.Writer, m *manifestEntry, files map[string]int64, ref string, labels map[string]string, lim Limits) error {
	layers := map[string]bool{}
	for _, l := range m.Layers {
		layers[l] = true
	}
	tw := tar.NewWriter(w)
	dirs := map[string]bool{}
	epoch := time.Unix(0, 0)
	var config []byte
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return invalid("%v", err)
		}
		name, err := entryName(h.Name)
		if err != nil {
			return err
		}
		if h.Typeflag == tar.TypeDir {
			continue
		}
		if files[name] != h.Size {
			return invalid("entry %q changed while it was read", name)
		}
		switch {
		case name == m.Config:
			if config, err = readBounded(tr, h.Size, lim.MaxJSON, name); err != nil {
				return err
			}
		case layers[name]:
			if err := writeDirs(tw, name, dirs, epoch); err != nil {
				return err
			}
			if err := tw.WriteHeader(&tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o644, Size: h.Size, ModTime: epoch, Format: tar.FormatPAX}); err != nil {
				return err
			}
			if _, err := io.CopyN(tw, tr, h.Size); err != nil {
				return invalid("entry %q: %v", name, err)
			}
			delete(layers, name)
		}
	}
	if config == nil || len(layers) > 0 {
		return invalid("the archive changed while it was read")
	}
	cfg, err := rebuild(config, len(m.Layers), labels)
	if err != nil {
		return err
	}
	sum := sha256.Sum256(cfg)
	cfgName := hex.EncodeToString(sum[:]) + ".json"
	man, err := json.Marshal([]manifestEntry{{Config: cfgName, RepoTags: []string{ref}, Layers: m.Layers}})
	if err != nil {
		return err
	}
	for _, f := range []struct {
		name string
		data []byte
	}{{cfgName, cfg}, {"manifest.json", man}} {
		if err := tw.WriteHeader(&tar.Header{Name: f.name, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(f.data)), ModTime: epoch, Format: tar.FormatPAX}); err != nil {
			return err
		}
		if _, err := tw.Write(f.data); err != nil {
			return err
		}
	}
	return tw.Close()
}

// writeDirs writes the parent directories of name not yet written.
func writeDirs(tw *tar.Writer, name string, done map[string]bool, mtime time.Time) error {
	var parents []string
	for d := path.Dir(name); d != "." && d != "/"; d = path.Dir(d) {
		parents = append([]string{d}, parents...)
	}
	for _, d := range parents {
		if done[d] {
			continue
		}
		done[d] = true
		if err := tw.WriteHeader(&tar.Header{Name: d + "/", Typeflag: tar.TypeDir, Mode: 0o755, ModTime: mtime, Format: tar.FormatPAX}); err != nil {
			return err
		}
	}
	return nil
}

// imageConfig is the whole of an imported image's configuration: what sbx
// needs of an image to make a sandbox from it, the fields of the OCI image
// configuration (https://github.com/opencontainers/image-spec/blob/v1.1.0/config.md)
// that a checkpoint sbx saves has. A sandbox is sbx's container, not the
// image's: sbx sets its entrypoint, command, user, env and working
// directory itself (driver/docker's sandboxContainer), so everything else
// an archive's author wrote (User, Entrypoint, Cmd, Healthcheck, Volumes,
// OnBuild, ExposedPorts, StopSignal, Shell, env such as LD_PRELOAD, labels,
// history) is dropped: Docker would otherwise apply it to the container
// made from the image (a health check running commands, anonymous volumes
// on the host, a user that is not sbx's).
type imageConfig struct {
	Architecture string       `json:"architecture"`
	OS           string       `json:"os"`
	Variant      string       `json:"variant,omitempty"`
	Created      *time.Time   `json:"created,omitempty"`
	Config       runConfig    `json:"config"`
	RootFS       rootFSConfig `json:"rootfs"`
}

// runConfig is the part of an image's run configuration sbx keeps: PATH
// (where the checkpoint's programs are; sbx gives the rest of the env from
// sandbox.yaml), the working directory, and sbx's own labels.
type runConfig struct {
	Env        []string          `json:"Env,omitempty"`
	WorkingDir string            `json:"WorkingDir,omitempty"`
	Labels     map[string]string `json:"Labels"`
}

// rootFSConfig names the layers' uncompressed digests, base first.
type rootFSConfig struct {
	Type    string   `json:"type"`
	DiffIDs []string `json:"diff_ids"`
}

// rebuild returns a new image configuration made from the archive's of
// only the fields of imageConfig, checked, with labels as its only labels.
// A field sbx keeps but whose value is not plainly one it would write
// (a PATH or working directory with odd characters) is dropped too; the
// layers' digests must be layers of them, one per layer of the manifest.
func rebuild(data []byte, layers int, labels map[string]string) ([]byte, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(data, &top); err != nil || top == nil {
		return nil, invalid("the image configuration is not a JSON object")
	}
	var in struct {
		Architecture, OS, Variant, Created string
		Config                             struct {
			Env        []string
			WorkingDir string
		}
		RootFS rootFSConfig
	}
	fields := []struct {
		key string
		dst any
	}{
		{"architecture", &in.Architecture}, {"os", &in.OS}, {"variant", &in.Variant},
		{"created", &in.Created}, {"config", &in.Config}, {"rootfs", &in.RootFS},
	}
	for _, f := range fields {
		if err := exactKey(top, f.key); err != nil {
			return nil, err
		}
		raw, ok := top[f.key]
		if !ok || string(raw) == "null" {
			continue
		}
		if err := json.Unmarshal(raw, f.dst); err != nil {
			return nil, invalid("the image configuration's %s: %v", f.key, err)
		}
	}
	out := imageConfig{Architecture: in.Architecture, OS: in.OS, Variant: in.Variant,
		Config: runConfig{Labels: map[string]string{}}, RootFS: in.RootFS}
	for _, v := range []string{in.Architecture, in.OS, in.Variant} {
		if !platformOK(v) {
			return nil, invalid("the image's platform %q is not one sbx knows the form of", v)
		}
	}
	if in.RootFS.Type != "layers" || len(in.RootFS.DiffIDs) != layers {
		return nil, invalid("the image configuration's rootfs names %d layers of type %q; the manifest names %d", len(in.RootFS.DiffIDs), in.RootFS.Type, layers)
	}
	for _, d := range in.RootFS.DiffIDs {
		if !diffIDOK(d) {
			return nil, invalid("the layer digest %q is not a sha256 digest", d)
		}
	}
	if t, err := time.Parse(time.RFC3339Nano, in.Created); err == nil {
		out.Created = &t
	}
	for _, e := range in.Config.Env {
		if v, ok := strings.CutPrefix(e, "PATH="); ok && pathListOK(v) {
			out.Config.Env = []string{e}
		}
	}
	if dirOK(in.Config.WorkingDir) {
		out.Config.WorkingDir = in.Config.WorkingDir
	}
	for k, v := range labels {
		out.Config.Labels[k] = v
	}
	return json.Marshal(out)
}

// The forms of the values rebuild keeps, checked by hand rather than by
// package-level regular expressions, which every sbx run would compile at
// start-up.

// platformOK reports whether v is a platform word: at most 32 lower-case
// letters, digits, periods, underscores and hyphens.
func platformOK(v string) bool {
	return len(v) <= 32 && strings.IndexFunc(v, func(r rune) bool {
		return !('a' <= r && r <= 'z' || '0' <= r && r <= '9' || r == '.' || r == '_' || r == '-')
	}) < 0
}

// diffIDOK reports whether d is a sha256 digest as rootfs.diff_ids hold
// them.
func diffIDOK(d string) bool {
	hexPart, ok := strings.CutPrefix(d, "sha256:")
	return ok && len(hexPart) == 64 && strings.IndexFunc(hexPart, func(r rune) bool {
		return !('0' <= r && r <= '9' || 'a' <= r && r <= 'f')
	}) < 0
}

// dirOK reports whether p is an absolute, clean path of at most 256 plain
// characters (letters, digits, . _ + @ - /).
func dirOK(p string) bool {
	return strings.HasPrefix(p, "/") && len(p) <= 256 && path.Clean(p) == p && strings.IndexFunc(p, func(r rune) bool {
		return !('a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' || strings.ContainsRune("._+@-/", r))
	}) < 0
}

// pathListOK reports whether v is a PATH of at most 32 directories, each
// absolute and plain (dirOK once cleaned: cleaning only drops characters).
func pathListOK(v string) bool {
	dirs := strings.Split(v, ":")
	if len(dirs) > 32 {
		return false
	}
	for _, d := range dirs {
		if !dirOK(path.Clean(d)) {
			return false
		}
	}
	return true
}

// exactKey refuses a key that is key in another case.
func exactKey(m map[string]json.RawMessage, key string) error {
	for k := range m {
		if k != key && strings.EqualFold(k, key) {
			return invalid("the image configuration has both %q and %q", key, k)
		}
	}
	return nil
}

// entryName checks an entry's name: relative, clean, at most four levels
// deep, of the characters image archives use. It returns it without a
// trailing slash.
func entryName(n string) (string, error) {
	name := strings.TrimSuffix(n, "/")
	bad := func(why string) (string, error) { return "", invalid("entry %q: %s", n, why) }
	for _, part := range strings.Split(name, "/") {
		if part == ".." {
			return bad(`a ".." component`)
		}
	}
	switch {
	case name == "" || len(n) > 256:
		return bad("empty or longer than 256 characters")
	case path.IsAbs(name):
		return bad("an absolute path")
	case path.Clean(name) != name || name == ".":
		return bad("not a clean path")
	case strings.Count(name, "/") > 3:
		return bad("more than four levels deep")
	}
	for _, r := range name {
		if !(r == '.' || r == '_' || r == '-' || r == '/' || r == ':' || r == '+' ||
			('a' <= r && r <= 'z') || ('A' <= r && r <= 'Z') || ('0' <= r && r <= '9')) {
			return bad(fmt.Sprintf("the character %q", r))
		}
	}
	return name, nil
}

func readBounded(r io.Reader, size, max int64, name string) ([]byte, error) {
	if size > max {
		return nil, invalid("%s holds %d bytes, more than the limit of %d", name, size, max)
	}
	b, err := io.ReadAll(io.LimitReader(r, max+1))
	if err != nil {
		return nil, invalid("%s: %v", name, err)
	}
	if int64(len(b)) > max {
		return nil, invalid("%s holds more than %d bytes", name, max)
	}
	return b, nil
}

func typeName(t byte) string {
	switch t {
	case tar.TypeSymlink:
		return "symbolic link"
	case tar.TypeLink:
		return "hard link"
	case tar.TypeChar, tar.TypeBlock:
		return "device"
	case tar.TypeFifo:
		return "named pipe"
	}
	return fmt.Sprintf("entry of type %q", t)
}
