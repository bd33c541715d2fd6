//go:build unix

package loop

import (
	"bytes"
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	fx "github.com/sbxhq/sbx/internal/fixture"
	"github.com/sbxhq/sbx/spec"
)

// TestPromptHostile plays an agent that replaces the prompt file in its
// workspace during the first iteration, hoping the next one feeds it a
// host file or stalls sbx: the next read fails, naming loop.prompt, and
// the agent never sees the content.
func TestPromptHostile(t *testing.T) {
	secret := filepath.Join(t.TempDir(), "secret")
	const secretText = "host-only secret text"
	if err := os.WriteFile(secret, []byte(secretText), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		replace string // shell run by the agent in its workspace
		want    string // in the error; "" for none
	}{
		{"symlink to a host file", "ln -sf " + secret + " PROMPT.md", "path escapes from parent"},
		{"symlink out through ..", "ln -sf ../" + filepath.Base(filepath.Dir(secret)) + "/secret PROMPT.md", "path escapes from parent"},
		{"FIFO", "rm PROMPT.md; mkfifo PROMPT.md", "not a regular file (named pipe)"},
		{"symlink to a FIFO", "mkfifo p; ln -sf p PROMPT.md", "not a regular file (named pipe)"},
		{"too large", "truncate -s 2M PROMPT.md", "file too large: more than 1048576 bytes"},
		{"symlink within the workspace", "echo other task > other.md; ln -sf other.md PROMPT.md", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, false)
			prompt := filepath.Join(f.ws, "PROMPT.md")
			if err := os.WriteFile(prompt, []byte("do it\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			script := `n=$(( $(cat n 2>/dev/null || echo 0) + 1 )); echo $n > n; cat > in-$n
if [ $n -eq 1 ]; then ` + tt.replace + `; fi`
			var res *Result
			fx.Promptly(t, func() {
				res = f.run(context.Background(), script, spec.Loop{Prompt: prompt, PromptRoot: f.ws, MaxIterations: 2, Completion: spec.Completion{Promise: "X"}}, nil)
			})
			if tt.want == "" {
				if res.State != StateMaxIterations {
					t.Fatalf("result = %+v\n%s", res, f.out.String())
				}
				if in2, _ := os.ReadFile(filepath.Join(f.ws, "in-2")); !strings.HasSuffix(string(in2), "\nother task\n") {
					t.Errorf("iteration 2 read %q", in2)
				}
				return
			}
			if res.State != StateError || !strings.Contains(res.Detail, "loop.prompt "+prompt+": ") || !strings.Contains(res.Detail, tt.want) {
				t.Fatalf("result = %+v, want an error on loop.prompt with %q", res, tt.want)
			}
			if _, err := os.Stat(filepath.Join(f.ws, "in-2")); err == nil {
				t.Error("the agent ran a second iteration")
			}
			// Nothing sbx wrote holds the host file.
			for _, dir := range []string{f.ws, string(f.control.Dir)} {
				filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
					if err == nil && d.Type().IsRegular() {
						if data, _ := os.ReadFile(p); bytes.Contains(data, []byte(secretText)) {
							t.Errorf("%s holds the host file's content", p)
						}
					}
					return nil
				})
			}
			if strings.Contains(f.out.String(), secretText) {
				t.Error("the output holds the host file's content")
			}
		})
	}
}

func TestReadPromptOutsideItsRoot(t *testing.T) {
	ws := t.TempDir()
	other := filepath.Join(t.TempDir(), "PROMPT.md")
	if err := os.WriteFile(other, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := ReadPrompt(ws, spec.Loop{Prompt: other})
	if want := "loop.prompt " + other + ": outside " + ws + ", the directory it must be read within"; err == nil || err.Error() != want {
		t.Errorf("ReadPrompt = %v, want %s", err, want)
	}
}
