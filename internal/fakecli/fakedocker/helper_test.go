package fakedocker

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// world is a temp state, log, HOME and workspace for one test.
type world struct {
	dir, state, log, home, ws string
	env                       map[string]string
}

func newWorld(t *testing.T) *world {
	t.Helper()
	dir := t.TempDir()
	w := &world{dir: dir, state: filepath.Join(dir, "state.json"), log: filepath.Join(dir, "argv.log"),
		home: filepath.Join(dir, "home"), ws: filepath.Join(dir, "home", "proj")}
	if err := os.MkdirAll(w.ws, 0o755); err != nil {
		t.Fatal(err)
	}
	w.env = map[string]string{"FAKE_DOCKER_STATE": w.state, "FAKE_DOCKER_LOG": w.log, "HOME": w.home,
		"PATH": os.Getenv("PATH")}
	return w
}

// step is one invocation and what it must print. $WS, $HOME and $DIR in
// args, stdout and stderr are replaced by the world's paths.
type step struct {
	args           string
	stdin          string
	env            map[string]string
	code           int
	stdout, stderr string
	// fields compares stdout line by line with runs of spaces collapsed,
	// for tables whose column widths depend on temp-dir path lengths.
	fields bool
}

func collapse(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = strings.Join(strings.Fields(l), " ")
	}
	return strings.Join(lines, "\n")
}

func (w *world) expand(s string) string {
	return strings.NewReplacer("$WS", w.ws, "$HOME", w.home, "$DIR", w.dir).Replace(s)
}

func (w *world) run(t *testing.T, s step) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	getenv := func(k string) string {
		if v, ok := s.env[k]; ok {
			return v
		}
		return w.env[k]
	}
	args := splitArgs(w.expand(s.args))
	code = Main(args, strings.NewReader(s.stdin), &out, &errb, getenv)
	return code, out.String(), errb.String()
}

func (w *world) steps(t *testing.T, steps []step) {
	t.Helper()
	for i, s := range steps {
		code, stdout, stderr := w.run(t, s)
		want := w.expand(s.stdout)
		if s.fields {
			want, stdout = collapse(want), collapse(stdout)
		}
		if diff := cmp.Diff(want, stdout); diff != "" {
			t.Errorf("step %d (docker %s): stdout (-want +got):\n%s", i, s.args, diff)
		}
		if diff := cmp.Diff(w.expand(s.stderr), stderr); diff != "" {
			t.Errorf("step %d (docker %s): stderr (-want +got):\n%s", i, s.args, diff)
		}
		if code != s.code {
			t.Errorf("step %d (docker %s): exit %d, want %d", i, s.args, code, s.code)
		}
	}
}

// splitArgs splits on spaces, except those escaped with a backslash.
func splitArgs(s string) []string {
	var out []string
	var cur strings.Builder
	in := false
	for i := 0; i < len(s); i++ {
		switch {
		case s[i] == '\\' && i+1 < len(s) && s[i+1] == ' ':
			cur.WriteByte(' ')
			i++
			in = true
		case s[i] == ' ':
			if in {
				out = append(out, cur.String())
				cur.Reset()
				in = false
			}
		default:
			cur.WriteByte(s[i])
			in = true
		}
	}
	if in {
		out = append(out, cur.String())
	}
	return out
}
