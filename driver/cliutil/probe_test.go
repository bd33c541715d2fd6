package cliutil

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sbxhq/sbx/driver/runner"
)

// TestProbe runs a fake CLI (a shell script written by the test) and checks
// the report: every call, its verdict, and this machine's values replaced
// by stable placeholders where they stand on their own.
func TestProbe(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "fakecli")
	script := `#!/bin/sh
case "$1" in
version) echo "v1.2.3 abc" ;;
ls) echo '{"sandboxes":[{"name":"api","workspaces":["` + dir + `/work/api"]}],"note":"api.example.com and api-2 and sandbox:api"}' ;;
bad) echo 'not json'; echo 'api failed' >&2; exit 3 ;;
esac
`
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	c := &CLI{Runner: &runner.Runner{}, Argv: []string{bin}, Name: "x"}
	p := NewProbe(c)
	p.Run(context.Background(), func(out []byte, exit int) error {
		_, err := c.ReadVersion(out)
		return err
	}, "version")
	out, ok := p.Run(context.Background(), func([]byte, int) error { return nil }, "ls", "--json")
	if !ok || !bytes.Contains(out, []byte(`"api"`)) {
		t.Fatalf("ls: ok %v, out %s", ok, out)
	}
	p.Redact(Sandbox, "api")
	p.Redact(Path, dir)
	p.Redact(Sandbox, "api") // the same value keeps its placeholder
	if _, ok := p.Run(context.Background(), func(_ []byte, exit int) error { return errors.New("not json") }, "bad", "api"); ok {
		t.Error("a failed check reported ok")
	}
	var b bytes.Buffer
	if err := p.Write(&b, "xdriver"); err != nil {
		t.Fatal(err)
	}
	want := `# sbx doctor --probe: driver xdriver, x 1.2.3
# Values of this machine are replaced: sandbox names by sandbox-N, host names of
# your rules and logs by host-N.example, paths by /redacted/path-N. No secret was read.
$ x version
# stdout:
| v1.2.3 abc
# exit 0
# check: ok
$ x ls --json
# stdout:
| {"sandboxes":[{"name":"sandbox-1","workspaces":["/redacted/path-1/work/sandbox-1"]}],"note":"api.example.com and api-2 and sandbox:sandbox-1"}
# exit 0
# check: ok
$ x bad sandbox-1
# stdout:
| not json
# stderr:
| sandbox-1 failed
# exit 3
# check: FAILED: not json
`
	if diff := cmp.Diff(want, b.String()); diff != "" {
		t.Errorf("report (-want +got):\n%s", diff)
	}
	if err := p.Err(); err == nil || !strings.Contains(err.Error(), "1 of 3 outputs of x") {
		t.Errorf("Err() = %v", err)
	}
	// The report reads back as a transcript.
	entries, err := runner.ReadTranscript(&b)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 3 || entries[2].Exit != 3 || entries[2].Check != "FAILED: not json" || entries[2].Stderr != "sandbox-1 failed\n" {
		t.Errorf("read back: %+v", entries)
	}
}
