// Package golden compares a test's output with a file kept in the
// repository (a golden file, or generated source or docs), and rewrites
// the file instead under `go test -update`. Only tests import it, so the
// -update flag exists only in test binaries.
package golden

import (
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite golden files and generated sources from the current output")

// Check fails t, with a diff, when the file at path does not hold got.
// Under -update it writes got there instead (making its directory).
func Check(t testing.TB, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test -update makes it)", err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("%s is stale; rerun the test with -update and review the change (-want +got):\n%s", path, diff)
	}
}
