package kubernetes

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sbxhq/sbx/internal/tarball"
)

// TestReportEscapesNames: the entries a pull skipped are named by the
// agent (a file under .git/hooks, a symlink's text); the report shows them
// escaped, so a name cannot clear the terminal or forge a line of sbx's.
func TestReportEscapesNames(t *testing.T) {
	st := &tarball.Stats{Files: 1, Bytes: 1536, ProtectedSame: 2, Skipped: []string{
		"sandbox.yaml: protected",
		".git/hooks/\x1b[2Jx: protected",
		"a\nsbx: pulled everything: a named pipe",
		"\u202eevil: protected",
	}}
	var out strings.Builder
	report(&out, "pulled", "/w", st)
	want := `pulled 1 files, 0 directories and 0 links (1.5 KiB) into /w
skipped 4 entries:
  sandbox.yaml: protected
  ".git/hooks/\x1b[2Jx: protected"
  "a\nsbx: pulled everything: a named pipe"
  "\u202eevil: protected"
left 2 protected files and links as they are (the sandbox's copies are the same)
`
	if diff := cmp.Diff(want, out.String()); diff != "" {
		t.Errorf("report (-want +got):\n%s", diff)
	}
}
