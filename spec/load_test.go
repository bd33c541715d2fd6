package spec_test

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/sbxhq/sbx/internal/golden"
	"github.com/sbxhq/sbx/schema"
	"github.com/sbxhq/sbx/spec"
)

func compile(t testing.TB) *schema.Schema {
	t.Helper()
	s, err := schema.Compile()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func env(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) {
		v, ok := m[k]
		return v, ok
	}
}

// TestInvalid checks the exact messages for every invalid file in
// testdata/invalid. Run with -update to rewrite the .golden files, then
// review the diff.
func TestInvalid(t *testing.T) {
	sch := compile(t)
	files, err := filepath.Glob("testdata/invalid/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	dir, err := filepath.Abs("testdata/invalid")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 40 {
		t.Fatalf("only %d invalid files", len(files))
	}
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".yaml")
		t.Run(name, func(t *testing.T) {
			_, err := spec.Load([]string{f}, spec.Options{Schema: sch, LookupEnv: env(map[string]string{"HOME": "/home/u"})})
			var ds spec.Diagnostics
			if !errors.As(err, &ds) || len(ds) == 0 {
				t.Fatalf("Load(%s) = %v, want diagnostics", f, err)
			}
			// Resolved paths are absolute; keep the golden files portable.
			got := strings.ReplaceAll(ds.Error()+"\n", dir, "$DIR")
			golden.Check(t, strings.TrimSuffix(f, ".yaml")+".golden", []byte(got))
		})
	}
}

func TestTooLarge(t *testing.T) {
	f := filepath.Join(t.TempDir(), "sandbox.yaml")
	data := []byte("version: 1\nagent: claude\n#" + strings.Repeat("x", spec.MaxFileSize) + "\n")
	if err := os.WriteFile(f, data, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := spec.Load([]string{f}, spec.Options{Schema: compile(t)})
	want := f + ": file is larger than 1048576 bytes (1 MiB); sandbox files are small, is this the right file?"
	if err == nil || err.Error() != want {
		t.Errorf("Load = %v, want %s", err, want)
	}
}

// TestAliasBombBounded checks that a billion-laughs document is rejected
// without expanding it: the allocation bound is far below what expansion
// (9^9 strings) would need.
func TestAliasBombBounded(t *testing.T) {
	sch := compile(t)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, err := spec.Load([]string{"testdata/invalid/alias-bomb.yaml"}, spec.Options{Schema: sch})
	runtime.ReadMemStats(&after)
	if err == nil || !strings.Contains(err.Error(), "too many values") {
		t.Fatalf("Load = %v, want the alias bomb rejected", err)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 32<<20 {
		t.Errorf("rejecting the alias bomb allocated %d bytes, want under 32 MiB", alloc)
	}
}

// TestPromptRoot: the prompt is read within the workspace when it is
// there, else within the sandbox file's directory; elsewhere it is an
// error, since a symlink in its place could lead anywhere.
func TestPromptRoot(t *testing.T) {
	dir := t.TempDir()
	ws := filepath.Join(dir, "ws")
	other := t.TempDir()
	for _, p := range []string{filepath.Join(dir, "PROMPT.md"), filepath.Join(ws, "task", "PROMPT.md"), filepath.Join(other, "PROMPT.md")} {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("do it\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		workspace, prompt string
		wantRoot, wantErr string
	}{
		{workspace: "ws", prompt: "ws/task/PROMPT.md", wantRoot: ws},
		{workspace: "ws", prompt: "PROMPT.md", wantRoot: dir},
		{workspace: ".", prompt: "ws/task/PROMPT.md", wantRoot: dir},
		{workspace: "ws", prompt: filepath.Join(other, "PROMPT.md"),
			wantErr: "sandbox.yaml:4:16: loop.prompt: prompt file " + filepath.Join(other, "PROMPT.md") + " is outside the workspace and the sandbox file's directory: sbx reads it within one of them, so that a symlink put in its place cannot lead to other files"},
	}
	for _, tt := range tests {
		t.Run(tt.prompt, func(t *testing.T) {
			f := filepath.Join(dir, "sandbox.yaml")
			data := "version: 1\nagent: claude\nworkspace: " + tt.workspace + "\nloop: {prompt: " + tt.prompt + ", maxIterations: 1, completion: {promise: X}}\n"
			if err := os.WriteFile(f, []byte(data), 0o644); err != nil {
				t.Fatal(err)
			}
			res, err := spec.Load([]string{f}, spec.Options{Schema: compile(t), NoLocal: true})
			if tt.wantErr != "" {
				if err == nil || strings.TrimPrefix(err.Error(), dir+string(filepath.Separator)) != tt.wantErr {
					t.Errorf("Load = %v, want %s", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := res.Specs[0].Loop.PromptRoot; got != tt.wantRoot {
				t.Errorf("PromptRoot = %s, want %s", got, tt.wantRoot)
			}
		})
	}
}

// TestUserHost: user: host is the uid:gid running sbx, resolved on load;
// where the system has none, a diagnostic at the field says what to do.
func TestUserHost(t *testing.T) {
	dir := t.TempDir()
	doc := []byte("version: 1\nagent: shell\nuser: host\nnetwork: {agentHosts: false}\n")
	res, err := spec.Parse("sandbox.yaml", dir, doc, spec.Options{Schema: compile(t), Offline: true,
		HostUser: func() (string, error) { return "1000:1001", nil }})
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Specs[0].User; got != "1000:1001" {
		t.Errorf("user = %q, want the host's 1000:1001", got)
	}
	_, err = spec.Parse("sandbox.yaml", dir, doc, spec.Options{Schema: compile(t), Offline: true,
		HostUser: func() (string, error) { return "", errors.New("this system has no uid and gid") }})
	if err == nil || err.Error() != "sandbox.yaml:3:7: user: host: this system has no uid and gid; name the user or uid:gid instead" {
		t.Errorf("error = %v", err)
	}
	_, err = spec.Parse("sandbox.yaml", dir, []byte("version: 1\nagent: shell\nuser: \"root; rm\"\nnetwork: {agentHosts: false}\n"), spec.Options{Schema: compile(t), Offline: true})
	if err == nil || err.Error() != `sandbox.yaml:3:7: user: invalid value "root; rm": must be host, NAME, UID, NAME:GROUP or UID:GID` {
		t.Errorf("error = %v", err)
	}
}

// TestLoadManyAsOne: files loaded together (read and resolved
// concurrently) give what loading each sandbox alone gives, in the order
// of the files: sandboxes, overlays, layers, and problems in each.
func TestLoadManyAsOne(t *testing.T) {
	sch := compile(t)
	dir := t.TempDir()
	write := func(path, data string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var all [][]string // the files of each sandbox, base first
	for i := range 40 {
		d := filepath.Join(dir, fmt.Sprintf("s%02d", i))
		base := filepath.Join(d, "sandbox.yaml")
		body := fmt.Sprintf("version: 1\nname: s%02d\nagent: claude\n", i)
		switch i % 4 {
		case 1:
			body += "resources: {cpus: -1}\n" // a problem of its own
		case 2:
			write(filepath.Join(d, "sandbox.local.yaml"), "env: {LOCAL: \"yes\"}\n")
		case 3:
			body += "bogus: 1\n"
		}
		write(base, body)
		files := []string{base}
		if i%5 == 0 {
			layer := filepath.Join(d, "ci.yaml")
			write(layer, "env: {CI: \"1\"}\n")
			files = append(files, layer)
		}
		all = append(all, files)
	}
	opts := spec.Options{Schema: sch, LookupEnv: env(nil)}
	var wantSpecs []*spec.Spec
	var wantDiags spec.Diagnostics
	var paths []string
	for _, files := range all {
		paths = append(paths, files...)
		res, err := spec.Load(files, opts)
		var ds spec.Diagnostics
		if err != nil && !errors.As(err, &ds) {
			t.Fatal(err)
		}
		wantSpecs = append(wantSpecs, res.Specs...)
		wantDiags = append(wantDiags, ds...)
	}
	res, err := spec.Load(paths, opts)
	var gotDiags spec.Diagnostics
	if err != nil && !errors.As(err, &gotDiags) {
		t.Fatal(err)
	}
	if len(wantSpecs) < 20 || len(wantDiags) < 20 {
		t.Fatalf("%d sandboxes, %d problems alone: the files do not test what they should", len(wantSpecs), len(wantDiags))
	}
	if diff := cmp.Diff(wantSpecs, res.Specs, cmpopts.EquateComparable(netip.Prefix{})); diff != "" {
		t.Errorf("sandboxes loaded together (-alone +together):\n%s", diff)
	}
	if diff := cmp.Diff(wantDiags.Sort(), gotDiags); diff != "" {
		t.Errorf("problems loaded together (-alone +together):\n%s", diff)
	}
}

// TestLoadManyFiles: Load parses files a batch at a time and resolves a
// sandbox once its last layer is read; a sandbox whose layer is the first
// file of the next batch still gets it, every sandbox comes out in the
// order of its file, and with NoOrigins none records where its values came
// from.
func TestLoadManyFiles(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "PROMPT.md", "Do the task.\n")
	var files []string
	for i := range 150 {
		name := fmt.Sprintf("f%03d.yaml", i)
		content := fmt.Sprintf("version: 1\nname: s%03d\nagent: claude\nworkspace: .\n", i)
		if i%64 == 0 && i > 0 {
			// A layer, the first file of a batch, over the sandbox before.
			content = fmt.Sprintf("env:\n  LAYER: %q\n", name)
		}
		files = append(files, write(t, dir, name, content))
	}
	for _, noOrigins := range []bool{false, true} {
		res, err := spec.Load(files, spec.Options{Schema: compile(t), NoLocal: true, NoOrigins: noOrigins})
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		layered := map[string]string{}
		for _, s := range res.Specs {
			names = append(names, s.Name)
			if v, ok := s.Env["LAYER"]; ok {
				layered[s.Name] = v
			}
			if (s.Origins == nil) != noOrigins {
				t.Errorf("NoOrigins %v: sandbox %s has %d origins", noOrigins, s.Name, len(s.Origins))
			}
		}
		var want []string
		for i := range 150 {
			if i%64 != 0 || i == 0 {
				want = append(want, fmt.Sprintf("s%03d", i))
			}
		}
		if diff := cmp.Diff(want, names); diff != "" {
			t.Errorf("sandboxes (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff(map[string]string{"s063": "f064.yaml", "s127": "f128.yaml"}, layered); diff != "" {
			t.Errorf("layers (-want +got):\n%s", diff)
		}
	}
}

// TestSecretHosts: a secret's hosts are read as written, a host reached
// through the agent's hosts or a preset counts as allowed, and under
// policy allow any named host does.
func TestSecretHosts(t *testing.T) {
	dir := t.TempDir()
	f := write(t, dir, "sandbox.yaml", `version: 1
agent: claude
network: {presets: [github]}
secrets:
  ANTHROPIC_API_KEY: {env: ANTHROPIC_API_KEY, hosts: [api.anthropic.com]}
  GITHUB_TOKEN: {command: [gh, auth, token], hosts: [github.com, "api.github.com:443"]}
  PLAIN: {env: PLAIN}
`)
	res, err := spec.Load([]string{f}, spec.Options{Schema: compile(t), NoLocal: true})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]spec.Secret{
		"ANTHROPIC_API_KEY": {Env: "ANTHROPIC_API_KEY", Hosts: []string{"api.anthropic.com"}},
		"GITHUB_TOKEN":      {Command: []string{"gh", "auth", "token"}, Hosts: []string{"github.com", "api.github.com:443"}},
		"PLAIN":             {Env: "PLAIN"},
	}
	if diff := cmp.Diff(want, res.Specs[0].Secrets); diff != "" {
		t.Errorf("secrets (-want +got):\n%s", diff)
	}
	g := write(t, dir, "open.yaml", "version: 1\nname: open\nagent: shell\nnetwork: {policy: allow}\nsecrets:\n  K: {env: K, hosts: [api.example.com]}\n")
	if _, err := spec.Load([]string{g}, spec.Options{Schema: compile(t), NoLocal: true}); err != nil {
		t.Errorf("under policy allow: %v", err)
	}
}

// TestDockerdService: a dockerd service gets the daemon's readiness check
// unless the file gives one, and the sandbox names it.
func TestDockerdService(t *testing.T) {
	dir := t.TempDir()
	doc := []byte("version: 1\nagent: shell\ndriver: docker\ndocker: {runtime: runsc}\nnetwork: {agentHosts: false}\n" +
		"services:\n  db: {image: postgres:16, ports: [5432]}\n  docker:\n    image: docker:28-dind\n    dockerd: true\n    ports: [2375]\n")
	res, err := spec.Parse("sandbox.yaml", dir, doc, spec.Options{Schema: compile(t), Offline: true})
	if err != nil {
		t.Fatal(err)
	}
	sp := res.Specs[0]
	if got := sp.Dockerd(); got != "docker" {
		t.Errorf("Dockerd() = %q, want docker", got)
	}
	want := spec.Ready{Command: spec.DockerdReady, Timeout: spec.DefaultReadyTimeout}
	if r := sp.Services["docker"].Ready; r == nil || !slices.Equal(r.Command, want.Command) || r.Timeout != want.Timeout {
		t.Errorf("ready = %+v, want %+v", r, want)
	}
	if sp.Services["db"].Dockerd || sp.Services["db"].Ready != nil {
		t.Errorf("the other service: %+v", sp.Services["db"])
	}
	doc = append(doc, "    ready: {command: [docker, info], timeout: 2m}\n"...)
	res, err = spec.Parse("sandbox.yaml", dir, doc, spec.Options{Schema: compile(t), Offline: true})
	if err != nil {
		t.Fatal(err)
	}
	if r := res.Specs[0].Services["docker"].Ready; r == nil || !slices.Equal(r.Command, []string{"docker", "info"}) || r.Timeout != 2*time.Minute {
		t.Errorf("the file's ready = %+v", r)
	}
}
