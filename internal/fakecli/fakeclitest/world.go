// Package fakeclitest runs a fake CLI of internal/fakecli in a temporary
// world (state file, argv log, HOME, workspace) for the fakes' own tests:
// each step is one invocation with what it must print and its exit status.
package fakeclitest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sbxhq/sbx/internal/fakecli/fakestate"
)

// Main is a fake's entry point (fakesbx.Main, fakedocker.Main).
type Main func(args []string, stdin io.Reader, stdout, stderr io.Writer, getenv func(string) string) int

// World is a temp state, log, HOME and workspace for one test.
type World struct {
	Dir, State, Log, Home, WS string
	// Env is the environment every step sees, under its own Env.
	Env  map[string]string
	main Main
	// Name prefixes the fake's name in failure messages ("sbx", "docker").
	name string
}

// New makes a world for the fake whose knobs start with prefix
// ("FAKE_SBX").
func New(t *testing.T, name, prefix string, main Main) *World {
	t.Helper()
	dir := t.TempDir()
	w := &World{Dir: dir, State: filepath.Join(dir, "state.json"), Log: filepath.Join(dir, "argv.log"),
		Home: filepath.Join(dir, "home"), WS: filepath.Join(dir, "home", "proj"), main: main, name: name}
	if err := os.MkdirAll(w.WS, 0o755); err != nil {
		t.Fatal(err)
	}
	w.Env = map[string]string{prefix + "_STATE": w.State, prefix + "_LOG": w.Log, "HOME": w.Home,
		"PATH": os.Getenv("PATH")}
	return w
}

// Step is one invocation and what it must print. $WS, $HOME and $DIR in
// args, stdout and stderr are replaced by the world's paths; args split on
// spaces not escaped with a backslash.
type Step struct {
	Args           string
	Stdin          string
	Env            map[string]string
	Code           int
	Stdout, Stderr string
	// Fields compares stdout line by line with runs of spaces collapsed,
	// for tables whose column widths depend on temp-dir path lengths.
	Fields bool
}

// Expand replaces $WS, $HOME and $DIR with the world's paths.
func (w *World) Expand(s string) string {
	return strings.NewReplacer("$WS", w.WS, "$HOME", w.Home, "$DIR", w.Dir).Replace(s)
}

// Run runs one step and returns what it did.
func (w *World) Run(t *testing.T, s Step) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	getenv := func(k string) string {
		if v, ok := s.Env[k]; ok {
			return v
		}
		return w.Env[k]
	}
	code = w.main(splitArgs(w.Expand(s.Args)), strings.NewReader(s.Stdin), &out, &errb, getenv)
	return code, out.String(), errb.String()
}

// Steps runs steps in order and reports every difference.
func (w *World) Steps(t *testing.T, steps []Step) {
	t.Helper()
	for i, s := range steps {
		code, stdout, stderr := w.Run(t, s)
		want := w.Expand(s.Stdout)
		if s.Fields {
			want, stdout = collapse(want), collapse(stdout)
		}
		if diff := cmp.Diff(want, stdout); diff != "" {
			t.Errorf("step %d (%s %s): stdout (-want +got):\n%s", i, w.name, s.Args, diff)
		}
		if diff := cmp.Diff(w.Expand(s.Stderr), stderr); diff != "" {
			t.Errorf("step %d (%s %s): stderr (-want +got):\n%s", i, w.name, s.Args, diff)
		}
		if code != s.Code {
			t.Errorf("step %d (%s %s): exit %d, want %d", i, w.name, s.Args, code, s.Code)
		}
	}
}

// Load reads the fake's state file.
func (w *World) Load(t *testing.T) *fakestate.State {
	t.Helper()
	b, err := os.ReadFile(w.State)
	if err != nil {
		t.Fatal(err)
	}
	st := fakestate.New()
	if err := json.Unmarshal(b, st); err != nil {
		t.Fatal(err)
	}
	return st
}

// Argv reads the fake's argv log.
func (w *World) Argv(t *testing.T) [][]string {
	t.Helper()
	f, err := os.Open(w.Log)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out [][]string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var a []string
		if err := json.Unmarshal(sc.Bytes(), &a); err != nil {
			t.Fatal(err)
		}
		out = append(out, a)
	}
	return out
}

func collapse(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = strings.Join(strings.Fields(l), " ")
	}
	return strings.Join(lines, "\n")
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
