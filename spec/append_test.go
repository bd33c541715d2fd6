package spec_test

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sbxhq/sbx/spec"
)

// TestAppend: a list tagged !append in sandbox.local.yaml (or a later -f
// layer) adds to the team's list; untagged, it replaces it as before.
// Each appended item's origin is the layer and line that wrote it, so a
// widening it causes is reported as coming from that file (which the
// sandbox can write), exactly as when the layer replaces the list with
// the whole of it: appending gives a layer nothing replacing does not.
func TestAppend(t *testing.T) {
	sch := compile(t)
	base := "version: 1\nname: api\nagent: shell\nnetwork:\n  agentHosts: false\n  allow: [github.com, proxy.golang.org]\nloop:\n  prompt: P.md\n  maxIterations: 3\n  command: [sh, -c, 'true']\n"
	tests := []struct {
		name     string
		local    string
		layer    string // a second -f file, merged before the local one
		allow    []string
		command  []string
		originOf map[string]string // field path → file:line
		problem  string
	}{
		{
			name:     "append",
			local:    "network:\n  allow: !append [pypi.org, files.pythonhosted.org]\n",
			allow:    []string{"github.com", "proxy.golang.org", "pypi.org", "files.pythonhosted.org"},
			command:  []string{"sh", "-c", "true"},
			originOf: map[string]string{"network.allow[0]": "sandbox.yaml:6", "network.allow[1]": "sandbox.yaml:6", "network.allow[2]": "sandbox.local.yaml:2", "network.allow[3]": "sandbox.local.yaml:2"},
		},
		{
			name:     "block style",
			local:    "network:\n  allow: !append\n    - pypi.org\n",
			allow:    []string{"github.com", "proxy.golang.org", "pypi.org"},
			command:  []string{"sh", "-c", "true"},
			originOf: map[string]string{"network.allow[1]": "sandbox.yaml:6", "network.allow[2]": "sandbox.local.yaml:3"},
		},
		{
			name:     "replace, as before",
			local:    "network:\n  allow: [pypi.org]\n",
			allow:    []string{"pypi.org"},
			command:  []string{"sh", "-c", "true"},
			originOf: map[string]string{"network.allow[0]": "sandbox.local.yaml:2"},
		},
		{
			name:     "nothing before to add to: the list itself",
			local:    "network:\n  deny: !append [evil.example]\n",
			allow:    []string{"github.com", "proxy.golang.org"},
			command:  []string{"sh", "-c", "true"},
			originOf: map[string]string{"network.deny[0]": "sandbox.local.yaml:2"},
		},
		{
			name:     "after a layer that replaced the list",
			layer:    "network:\n  allow: [example.com]\n",
			local:    "network:\n  allow: !append [pypi.org]\nloop:\n  command: !append [--verbose]\n",
			allow:    []string{"example.com", "pypi.org"},
			command:  []string{"sh", "-c", "true", "--verbose"},
			originOf: map[string]string{"network.allow[0]": "layer.yaml:2", "network.allow[1]": "sandbox.local.yaml:2", "loop.command[3]": "sandbox.local.yaml:4"},
		},
		{
			name:    "only lists",
			local:   "env: !append {A: b}\n",
			problem: `sandbox.local.yaml:1:6: env: !append applies to a list only (a mapping merges by key without it)`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			os.WriteFile(filepath.Join(dir, "P.md"), []byte("do it\n"), 0o644)
			os.WriteFile(filepath.Join(dir, "sandbox.yaml"), []byte(base), 0o644)
			os.WriteFile(filepath.Join(dir, "sandbox.local.yaml"), []byte(tt.local), 0o644)
			files := []string{filepath.Join(dir, "sandbox.yaml")}
			if tt.layer != "" {
				os.WriteFile(filepath.Join(dir, "layer.yaml"), []byte(tt.layer), 0o644)
				files = append(files, filepath.Join(dir, "layer.yaml"))
			}
			res, err := spec.Load(files, spec.Options{Schema: sch, Offline: true})
			if tt.problem != "" {
				if err == nil || !strings.Contains(err.Error(), tt.problem) {
					t.Fatalf("error = %v, want %s", err, tt.problem)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			s := res.Specs[0]
			if diff := cmp.Diff(tt.allow, s.Network.Allow); diff != "" {
				t.Errorf("network.allow (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.command, s.Loop.Command); diff != "" {
				t.Errorf("loop.command (-want +got):\n%s", diff)
			}
			for path, want := range tt.originOf {
				o, ok := s.OriginOf(path)
				if got := filepath.Base(o.File) + ":" + strconv.Itoa(o.Line); !ok || got != want {
					t.Errorf("origin of %s = %s (%v), want %s", path, got, ok, want)
				}
			}
		})
	}
}

// TestAppendNotInBase: the sandbox's first file has no list before it to
// add to; !append there is a mistake, not a silent replace.
func TestAppendNotInBase(t *testing.T) {
	dir := t.TempDir()
	doc := "version: 1\nname: api\nagent: shell\nnetwork:\n  agentHosts: false\n  allow: !append [github.com]\n"
	_, err := spec.Parse("sandbox.yaml", dir, []byte(doc), spec.Options{Schema: compile(t), Offline: true})
	want := "sandbox.yaml:6:10: !append appends to a list of the files merged before this one; this file is the sandbox's first: write the list without it"
	if err == nil || err.Error() != want {
		t.Errorf("error = %v\nwant %s", err, want)
	}
}
