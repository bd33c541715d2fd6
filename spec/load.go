package spec

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/sbxhq/sbx/internal/par"
	"github.com/sbxhq/sbx/internal/untrusted"
	"github.com/sbxhq/sbx/schema"
)

// Options control how files are loaded.
type Options struct {
	// Schema is the compiled schema; compile it once per process.
	Schema *schema.Schema
	// LookupEnv reads the host environment for interpolation and ~.
	LookupEnv func(string) (string, bool)
	// Offline reports unset required variables as Needed instead of
	// failing, and skips the checks that depend on their values.
	Offline bool
	// NoLocal skips the sandbox.local.yaml overlay.
	NoLocal bool
	// NoOrigins skips recording where every value came from
	// (Spec.Origins): planning needs it, a check that only reports
	// problems does not, and for a thousand files it is a fifth of the
	// time.
	NoOrigins bool
	// HostUser is the uid:gid of the user running sbx, for user: host
	// (default: this process's; an error where the OS has none).
	HostUser func() (string, error)
	// HostValue, when set, hears every value interpolation read from the
	// host, so that a caller can keep it out of everything it prints
	// (Redact), also when loading fails. Files load in parallel: it must
	// be safe to call concurrently.
	HostValue func(HostValue)
	// NoHostFiles loads files that are not this machine's (a git
	// revision's, LoadSources): the host paths they name are not looked
	// at, not even to check that they exist.
	NoHostFiles bool
}

// Result is what Load found.
type Result struct {
	Specs []*Spec
	// Needed lists, in offline mode, the variables that must be set before
	// the file can be applied, each at the value that uses it.
	Needed Diagnostics
}

// Load reads sandbox files. A file with a top-level "version" key starts a
// sandbox; a file without one is a layer merged over the sandbox before it.
// The base file's sandbox.local.yaml (api.sandbox.yaml →
// api.sandbox.local.yaml) is merged last when present. Naming a
// sandbox.local.yaml loads it over its base. All problems are returned at
// once as Diagnostics, sorted.
func Load(paths []string, opts Options) (*Result, error) {
	var ds Diagnostics
	seen := map[string]bool{}
	type read struct {
		path, dir string
		doc       *document
		problems  Diagnostics
	}
	var reads []*read
	abs, err := absFunc()
	if err != nil {
		return nil, err
	}
	for _, p := range expandLocal(paths) {
		abs, err := abs(p)
		if err != nil {
			return nil, err
		}
		if seen[abs] {
			continue
		}
		seen[abs] = true
		reads = append(reads, &read{path: p, dir: filepath.Dir(abs)})
	}
	// The files are independent until they are grouped: they are read and
	// parsed on every CPU, and their results taken in order. So are the
	// sandboxes: each one's overlay is read, and the sandbox resolved,
	// beside the others. Both go a batch of files at a time, each sandbox
	// resolved once its last layer is read: a parsed file is garbage once
	// its sandbox is resolved, so a pre-commit hook's thousand files never
	// hold a thousand parse trees at once (memory that a machine where a
	// fresh page is costly pays for in time: bench/validate.sh).
	type resolved struct {
		spec             *Spec
		needed, problems Diagnostics
	}
	var results []resolved
	var pending []*document // the layers of a sandbox the next batch may continue
	for first := 0; first < len(reads); first += loadBatch {
		batch := reads[first:min(first+loadBatch, len(reads))]
		par.Each(len(batch), func(i int) {
			r := batch[i]
			data, err := readFile(r.path)
			if err != nil {
				r.problems = Diagnostics{{File: r.path, Message: readError(err)}}
				return
			}
			r.doc, r.problems = readDocument(r.path, r.dir, data)
		})
		for _, r := range batch {
			ds = append(ds, r.problems...)
			if r.doc != nil {
				pending = append(pending, r.doc)
			}
			r.doc = nil
		}
		groups := group(pending)
		pending = nil
		if more := first+loadBatch < len(reads); more && len(groups) > 0 {
			pending, groups = groups[len(groups)-1], groups[:len(groups)-1]
		}
		out := make([]resolved, len(groups))
		par.Each(len(groups), func(i int) {
			g := groups[i]
			r := &out[i]
			if !opts.NoLocal {
				local := localPath(g[0].name)
				abs, _ := abs(local)
				if !seen[abs] {
					data, err := readFile(local)
					switch {
					case errors.Is(err, fs.ErrNotExist):
					case err != nil:
						r.problems = append(r.problems, Diagnostic{File: local, Message: readError(err)})
					case blank(data):
						// An overlay with nothing in it (comments at most) is
						// no overlay: the docker driver leaves one so that the
						// sandbox cannot create its own.
					default:
						doc, problems := readDocument(local, filepath.Dir(abs), data)
						r.problems = append(r.problems, problems...)
						if doc != nil {
							g = append(slices.Clip(g), doc)
						}
					}
				}
			}
			s, needed, problems := resolve(g, opts)
			r.spec, r.needed, r.problems = s, needed, append(r.problems, problems...)
		})
		results = append(results, out...)
	}
	res := &Result{}
	for _, r := range results {
		ds = append(ds, r.problems...)
		res.Needed = append(res.Needed, r.needed...)
		if r.spec != nil {
			res.Specs = append(res.Specs, r.spec)
		}
	}
	res.Needed = res.Needed.Sort()
	if len(ds) > 0 {
		return res, ds.Sort()
	}
	return res, nil
}

// Parse loads one file from memory, without overlays; the fuzz test and
// tools that read from stdin use it. dir resolves relative paths.
func Parse(name, dir string, data []byte, opts Options) (*Result, error) {
	doc, ds := readDocument(name, dir, data)
	res := &Result{}
	if doc != nil {
		s, needed, problems := resolve([]*document{doc}, opts)
		ds = append(ds, problems...)
		res.Needed = needed.Sort()
		if s != nil {
			res.Specs = append(res.Specs, s)
		}
	}
	if len(ds) > 0 {
		return res, ds.Sort()
	}
	return res, nil
}

// Source is a sandbox file read from elsewhere than this machine's files
// (a git revision). Name is how positions name it, Dir the directory its
// relative paths resolve in.
type Source struct {
	Name, Dir string
	Data      []byte
}

// LoadSources loads sandbox files from memory as Load does from disk,
// grouping layers the same way, but merges no sandbox.local.yaml: nothing
// is read from disk.
func LoadSources(srcs []Source, opts Options) (*Result, error) {
	var ds Diagnostics
	var docs []*document
	for _, src := range srcs {
		doc, problems := readDocument(src.Name, src.Dir, src.Data)
		ds = append(ds, problems...)
		if doc != nil {
			docs = append(docs, doc)
		}
	}
	res := &Result{}
	for _, g := range group(docs) {
		s, needed, problems := resolve(g, opts)
		ds = append(ds, problems...)
		res.Needed = append(res.Needed, needed...)
		if s != nil {
			res.Specs = append(res.Specs, s)
		}
	}
	res.Needed = res.Needed.Sort()
	if len(ds) > 0 {
		return res, ds.Sort()
	}
	return res, nil
}

// absFunc returns filepath.Abs with the working directory read once, not
// once a file (on Unix, Abs asks the kernel twice each time).
func absFunc() (func(string) (string, error), error) {
	if runtime.GOOS == "windows" {
		return filepath.Abs, nil
	}
	wd, err := os.Getwd()
	if err != nil {
		return nil, err
	}
	return func(p string) (string, error) {
		if filepath.IsAbs(p) {
			return filepath.Clean(p), nil
		}
		return filepath.Join(wd, p), nil
	}, nil
}

// loadBatch is how many files Load parses before it resolves the
// sandboxes they complete: enough to keep every CPU busy, few enough that
// their parse trees stay small.
const loadBatch = 64

func readError(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	if errors.Is(err, fs.ErrNotExist) {
		return "no such file"
	}
	if errors.Is(err, untrusted.ErrTooLarge) {
		return tooLarge()
	}
	return "cannot read: " + err.Error()
}

// expandLocal replaces a named X.local.yaml by its base X.yaml when that
// exists, since the overlay is merged over it anyway.
func expandLocal(paths []string) []string {
	out := make([]string, 0, len(paths))
	for _, p := range paths {
		for _, ext := range []string{".yaml", ".yml"} {
			if stem, ok := strings.CutSuffix(p, ".local"+ext); ok {
				if _, err := os.Stat(stem + ext); err == nil {
					p = stem + ext
				}
				break
			}
		}
		out = append(out, p)
	}
	return out
}

// blank reports whether a file holds nothing but whitespace and comments.
func blank(data []byte) bool {
	for _, line := range bytes.Split(data, []byte("\n")) {
		t := bytes.TrimSpace(line)
		if len(t) > 0 && t[0] != '#' {
			return false
		}
	}
	return true
}

// LocalPath names the personal overlay of a base file:
// sandbox.yaml → sandbox.local.yaml.
func LocalPath(base string) string { return localPath(base) }

// localPath names the personal overlay of a base file.
func localPath(base string) string {
	ext := filepath.Ext(base)
	return strings.TrimSuffix(base, ext) + ".local" + ext
}

// group splits documents into sandboxes: a document with a version key
// starts one, the others layer over the one before.
func group(docs []*document) [][]*document {
	var groups [][]*document
	for _, d := range docs {
		if k, _ := lookupKey(d.root, "version"); k != nil || len(groups) == 0 {
			groups = append(groups, []*document{d})
			continue
		}
		groups[len(groups)-1] = append(groups[len(groups)-1], d)
	}
	return groups
}

// state is what the loader knows about nodes while resolving one sandbox.
type state struct {
	opts       Options
	base       *document
	origin     map[*yaml.Node]*document
	sensitive  map[*yaml.Node]bool
	vars       map[*yaml.Node][]string
	unresolved map[*yaml.Node]bool
	diags      Diagnostics
	needed     Diagnostics
	// hostValues are the values read from the host environment, which
	// no diagnostic may quote.
	hostValues []HostValue
	// secretHosts are the nodes of every secret's hosts, for their checks
	// once the network is read.
	secretHosts []pathNode
}

func (st *state) fileOf(n *yaml.Node) *document {
	if d := st.origin[n]; d != nil {
		return d
	}
	return st.base
}

func (st *state) errorf(n *yaml.Node, path, format string, args ...any) {
	d := Diagnostic{File: st.base.name, Path: path, Message: fmt.Sprintf(format, args...)}
	if n != nil {
		d.File = st.fileOf(n).name
		d.Line, d.Col = n.Line, n.Column
	}
	st.diags = append(st.diags, d)
}

// resolve turns the layers of one sandbox into a Spec.
func resolve(layers []*document, opts Options) (*Spec, Diagnostics, Diagnostics) {
	st := &state{
		opts:       opts,
		base:       layers[0],
		origin:     map[*yaml.Node]*document{},
		sensitive:  map[*yaml.Node]bool{},
		vars:       map[*yaml.Node][]string{},
		unresolved: map[*yaml.Node]bool{},
	}
	if st.opts.LookupEnv == nil {
		st.opts.LookupEnv = func(string) (string, bool) { return "", false }
	}
	if len(layers) > 1 { // fileOf is the base file for a node not marked
		for _, d := range layers {
			markOrigin(d.root, d, st.origin)
		}
	}
	for _, d := range layers {
		st.interpolate(d.root, &fieldPath{})
	}
	root := layers[0].root
	if n := findAppend(root); n != nil {
		st.errorf(n, "", "%s appends to a list of the files merged before this one; this file is the sandbox's first: write the list without it", AppendTag)
	}
	for _, d := range layers[1:] {
		root = merge(root, d.root)
	}
	clearAppend(root)
	v, err := newConverter(root).value(root)
	if err != nil {
		st.errorf(root, "", "%v", err)
		return nil, st.redact(st.needed), st.redact(st.diags)
	}
	var schemaDiags Diagnostics
	if opts.Schema != nil {
		for _, e := range opts.Schema.Validate(v) {
			n, path := locate(root, e.Location, e.Anchor)
			if st.unresolved[n] {
				continue
			}
			st.errorf(n, path, "%s", e.Message)
		}
		schemaDiags, st.diags = st.diags, nil
	}
	s := st.decode(root)
	// Where the semantic checks found a problem, their message is the more
	// specific one; drop the schema's message at the same place.
	at := map[[3]any]bool{}
	for _, d := range st.diags {
		at[[3]any{d.File, d.Line, d.Col}] = true
	}
	for _, d := range schemaDiags {
		if !at[[3]any{d.File, d.Line, d.Col}] {
			st.diags = append(st.diags, d)
		}
	}
	for _, d := range layers {
		s.Files = append(s.Files, d.name)
		s.Declarations = append(s.Declarations, Declaration{Path: d.abs, SHA256: d.digest})
	}
	// Where every value came from is for planning, which a sandbox with
	// problems never reaches; only a valid document is known to nest no
	// deeper than the schema (a hostile one may nest as deep as go-yaml
	// takes, 10,000 levels, and every value's path spelled out costs the
	// square of that: TestHostileOverlayBounded).
	if len(st.diags) == 0 && !opts.NoOrigins {
		s.Origins = make(map[string]Origin, countNodes(root))
		st.provenance(root, "", s)
	}
	s.HostValues = st.hostValues
	return s, st.redact(st.needed), st.redact(st.diags)
}

// seeHostValue notes a value read from the host.
func (st *state) seeHostValue(h HostValue) {
	st.hostValues = addHostValue(st.hostValues, h)
	if st.opts.HostValue != nil {
		st.opts.HostValue(h)
	}
}

// redact replaces in each message every value read from the host by
// "(from $VAR)": the schema's and the semantic checks' messages quote the
// value they reject, and validate prints them where CI logs them.
func (st *state) redact(ds Diagnostics) Diagnostics {
	for i := range ds {
		ds[i].Message = Redact(ds[i].Message, st.hostValues)
	}
	return ds
}

// provenance records, for every field path of the merged tree, the file
// and position that wrote it, and the host variables each value refers
// to. The merged tree keeps the layers' own nodes, so each node still
// knows its file.
func (st *state) provenance(n *yaml.Node, path string, s *Spec) {
	n = deref(n)
	if n == nil {
		return
	}
	d := st.fileOf(n)
	o := Origin{File: d.name, Path: d.abs, Line: n.Line, Col: n.Column}
	if n.Kind == yaml.ScalarNode {
		o.Value = n.Value
	}
	if path != "" {
		s.Origins[path] = o
	}
	switch n.Kind {
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			st.provenance(n.Content[i+1], joinKey(path, n.Content[i].Value), s)
		}
	case yaml.SequenceNode:
		for i, c := range n.Content {
			st.provenance(c, path+"["+strconv.Itoa(i)+"]", s)
		}
	case yaml.ScalarNode:
		if vs := st.vars[n]; len(vs) > 0 {
			if s.HostVars == nil {
				s.HostVars = map[string][]string{}
			}
			vs = append([]string(nil), vs...)
			sort.Strings(vs)
			s.HostVars[path] = slices.Compact(vs)
		}
	}
}

func markOrigin(n *yaml.Node, d *document, origin map[*yaml.Node]*document) {
	if n == nil || origin[n] != nil {
		return
	}
	origin[n] = d
	for _, c := range n.Content {
		markOrigin(c, d, origin)
	}
}

// interpolate expands variables in every string value (never in keys).
// path is where n is.
func (st *state) interpolate(n *yaml.Node, path *fieldPath) {
	switch n.Kind {
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			*path = append(*path, pathStep{key: n.Content[i].Value, index: -1})
			st.interpolate(n.Content[i+1], path)
			*path = (*path)[:len(*path)-1]
		}
	case yaml.SequenceNode:
		for i, c := range n.Content {
			*path = append(*path, pathStep{index: i})
			st.interpolate(c, path)
			*path = (*path)[:len(*path)-1]
		}
	case yaml.ScalarNode:
		if !strings.Contains(n.Value, "$") || (n.ShortTag() != "!!str" && n.Style == 0) {
			return
		}
		ip := &interpolator{lookup: st.opts.LookupEnv, offline: st.opts.Offline,
			seen: st.seeHostValue}
		e, err := ip.expand(n.Value)
		if err != nil {
			st.errorf(n, path.String(), "%v", err)
			st.unresolved[n] = true
			return
		}
		for _, name := range e.needed {
			d := st.fileOf(n)
			st.needed = append(st.needed, Diagnostic{File: d.name, Line: n.Line, Col: n.Column, Path: path.String(), Message: fmt.Sprintf("variable %q must be set", name)})
			st.unresolved[n] = true
		}
		n.Value = e.value
		retag(n)
		if e.sensitive {
			st.sensitive[n] = true
		}
		if len(e.vars) > 0 {
			st.vars[n] = e.vars
		}
	}
}

// AppendTag marks a list in a layer (sandbox.local.yaml, a later -f file)
// that adds to the list of the files before it instead of replacing it:
// network: {allow: !append [pypi.org]}. Each added item keeps the layer as
// its origin, so a widening it causes names that file and line, exactly
// as if the layer had replaced the list with the whole of it.
const AppendTag = "!append"

// merge lays over on top of base: mappings merge by key, a list tagged
// !append is added to base's list, anything else is replaced. base is
// modified and returned.
func merge(base, over *yaml.Node) *yaml.Node {
	base, over = deref(base), deref(over)
	if base != nil && base.Kind == yaml.SequenceNode && over.Kind == yaml.SequenceNode && over.Tag == AppendTag {
		// A new node: base's own stays as the file has it. The list is
		// the base file's (its origin), every item its own file's.
		joined := *base
		joined.Content = append(slices.Clip(base.Content), over.Content...)
		return &joined
	}
	if base == nil || base.Kind != yaml.MappingNode || over.Kind != yaml.MappingNode {
		return over
	}
	for i := 0; i+1 < len(over.Content); i += 2 {
		k, v := over.Content[i], over.Content[i+1]
		replaced := false
		for j := 0; j+1 < len(base.Content); j += 2 {
			if base.Content[j].Value == k.Value {
				base.Content[j+1] = merge(base.Content[j+1], v)
				replaced = true
				break
			}
		}
		if !replaced {
			base.Content = append(base.Content, k, v)
		}
	}
	return base
}

// findAppend is the first list under n tagged !append, or nil.
func findAppend(n *yaml.Node) *yaml.Node {
	if n == nil || n.Kind == yaml.AliasNode {
		return nil
	}
	if n.Kind == yaml.SequenceNode && n.Tag == AppendTag {
		return n
	}
	for _, c := range n.Content {
		if f := findAppend(c); f != nil {
			return f
		}
	}
	return nil
}

// clearAppend makes every list still tagged !append after merging (one
// with nothing before it to add to: the list is then just itself) a plain
// list. A tag anywhere but on a list is left for the converter to refuse.
func clearAppend(n *yaml.Node) {
	if n == nil || n.Kind == yaml.AliasNode {
		return
	}
	if n.Kind == yaml.SequenceNode && n.Tag == AppendTag {
		n.Tag = "!!seq"
	}
	for _, c := range n.Content {
		clearAppend(c)
	}
}

// locate finds the node a schema error points at, and its field path.
func locate(root *yaml.Node, loc []string, anchor schema.Anchor) (*yaml.Node, string) {
	n, key := deref(root), (*yaml.Node)(nil)
	path := ""
	steps := loc
	if anchor == schema.AtParent && len(loc) > 0 {
		steps = loc[:len(loc)-1]
	}
	for _, tok := range steps {
		switch n.Kind {
		case yaml.MappingNode:
			k, v := lookupKey(n, tok)
			if k == nil {
				return n, joinKey(path, tok)
			}
			key, n = k, v
			path = joinKey(path, tok)
		case yaml.SequenceNode:
			i, err := strconv.Atoi(tok)
			if err != nil || i >= len(n.Content) {
				return n, path
			}
			key, n = nil, deref(n.Content[i])
			path += "[" + tok + "]"
		default:
			return n, path
		}
	}
	switch anchor {
	case schema.AtKey:
		if key != nil {
			return key, path
		}
	case schema.AtParent:
		if len(loc) > 0 {
			path = joinKey(path, loc[len(loc)-1])
		}
		if key != nil {
			return key, path
		}
	}
	return n, path
}
