package spec_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/sbxhq/sbx/spec"
)

// FuzzParse feeds arbitrary bytes to the loader. It must never panic, must
// answer either specs or positioned diagnostics, and every spec it accepts
// must satisfy the invariants the planner relies on. As a normal test it
// runs the seed corpus: every example and every testdata file. Fuzz longer
// with: go test ./spec -run '^$' -fuzz FuzzParse -fuzztime 10m
func FuzzParse(f *testing.F) {
	var seeds []string
	for _, pattern := range []string{"testdata/*/*.yaml", "../examples/*/sandbox.yaml", "../sandbox.yaml.example"} {
		m, err := filepath.Glob(pattern)
		if err != nil {
			f.Fatal(err)
		}
		seeds = append(seeds, m...)
	}
	if len(seeds) < 40 {
		f.Fatalf("only %d seed files", len(seeds))
	}
	for _, p := range seeds {
		data, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	sch := compile(f)
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		res, err := spec.Parse("sandbox.yaml", dir, data, spec.Options{Schema: sch, Offline: true})
		if err != nil {
			var ds spec.Diagnostics
			if !errors.As(err, &ds) || len(ds) == 0 {
				t.Fatalf("error is not diagnostics: %v", err)
			}
			for _, d := range ds {
				if d.File != "sandbox.yaml" || d.Message == "" {
					t.Fatalf("malformed diagnostic %+v", d)
				}
			}
			return
		}
		for _, s := range res.Specs {
			if err := spec.CheckName(s.Name); err != nil {
				t.Fatalf("accepted spec has an invalid name: %v", err)
			}
			if s.Agent == "" || s.Template.Image == "" && s.Template.Build == nil {
				t.Fatalf("accepted spec lacks agent or template: %+v", s)
			}
			if s.Loop != nil && s.Loop.MaxIterations <= 0 {
				t.Fatalf("accepted loop with maxIterations %d", s.Loop.MaxIterations)
			}
			for _, h := range append(append([]string{}, s.Network.Allow...), s.Network.Deny...) {
				if _, err := spec.ParseHost(h); err != nil {
					t.Fatalf("accepted host %q: %v", h, err)
				}
			}
		}
	})
}
