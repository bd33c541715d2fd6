package session

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestFind: the nearest sandbox.yaml is the default file, unless another
// lies above it: then the nearer one sits in the outer sandbox's
// workspace, where its agent could have planted it, and is refused.
func TestFind(t *testing.T) {
	root := t.TempDir()
	mk := func(rel string) string {
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("version: 1\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	outer := mk("proj/sandbox.yaml")
	planted := mk("proj/sub/sandbox.yaml")
	if err := os.MkdirAll(filepath.Join(root, "proj/sub/deep"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(root, "elsewhere"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, dir string
		want      string
		wantErr   error
	}{
		{"in its directory", "proj", outer, nil},
		{"below it", "proj/sub/..", outer, nil},
		{"a nested file", "proj/sub", "", &NestedFileError{Found: planted, Outer: outer}},
		{"below a nested file", "proj/sub/deep", "", &NestedFileError{Found: planted, Outer: outer}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Find(filepath.Join(root, tc.dir))
			if diff := cmp.Diff(tc.wantErr, err); diff != "" {
				t.Errorf("error (-want +got):\n%s", diff)
			}
			if got != tc.want {
				t.Errorf("Find = %q, want %q", got, tc.want)
			}
		})
	}
	// No file up to the root: only when the temporary directory has no
	// sandbox.yaml above it, which a test cannot arrange.
	if _, err := Find(filepath.Join(root, "elsewhere")); err != nil {
		var nf *NoFileError
		if !errors.As(err, &nf) {
			t.Errorf("Find with no file: %v, want a NoFileError", err)
		}
	}
}
