package spec_test

import (
	"path/filepath"
	"testing"

	"github.com/sbxhq/sbx/spec"
)

// TestExamples validates every example and the root sandbox.yaml.example
// with an empty environment, as a newcomer's machine would.
func TestExamples(t *testing.T) {
	files, err := filepath.Glob("../examples/*/sandbox.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 5 {
		t.Fatalf("found %d examples, want at least 5", len(files))
	}
	files = append(files, "../sandbox.yaml.example")
	sch := compile(t)
	for _, f := range files {
		t.Run(f, func(t *testing.T) {
			res, err := spec.Load([]string{f}, spec.Options{Schema: sch, LookupEnv: env(nil)})
			if err != nil {
				t.Fatalf("%s is invalid:\n%v", f, err)
			}
			if len(res.Specs) != 1 {
				t.Fatalf("%s: %d sandboxes, want 1", f, len(res.Specs))
			}
		})
	}
}
