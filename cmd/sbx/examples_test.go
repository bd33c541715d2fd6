package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
)

// TestExamplesValidateWithoutBackends: every example passes the CLI's
// full `sbx validate --offline` (schema, values and the named driver's
// capability table) on a machine with no backend CLI installed, as on the
// CI runners the GitHub Action runs on: a driver's table is data, not
// something its program must be there to tell.
func TestExamplesValidateWithoutBackends(t *testing.T) {
	files, err := filepath.Glob("../../examples/*/sandbox.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no examples: %v", err)
	}
	dir := t.TempDir()
	env := []string{"PATH=" + dir, "HOME=" + dir, "SBX_STATE_DIR=" + filepath.Join(dir, "state")}
	for _, f := range files {
		t.Run(filepath.Base(filepath.Dir(f)), func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := Main(context.Background(), []string{"validate", "--offline", "-f", f}, strings.NewReader(""), &stdout, &stderr, env)
			if code != 0 || !strings.Contains(stdout.String(), ": valid") {
				t.Errorf("sbx validate --offline %s: exit %d\n%s%s", f, code, stdout.String(), stderr.String())
			}
		})
	}
}
