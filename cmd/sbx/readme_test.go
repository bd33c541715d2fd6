package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sbxhq/sbx/spec"
)

// TestReadmePresets keeps the README's preset table equal to the presets
// sbx enforces.
func TestReadmePresets(t *testing.T) {
	data, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := string(data)
	_, readme, _ = strings.Cut(readme, "\n### Network presets\n")
	for _, name := range spec.PresetNames() {
		row := "| `" + name + "`"
		i := strings.Index(readme, row)
		if i < 0 {
			t.Errorf("README has no row for preset %s", name)
			continue
		}
		line := readme[i : i+strings.Index(readme[i:], "\n")]
		cells := strings.Split(line, "|")
		want := strings.Join(spec.PresetHosts(name), ", ")
		if got := strings.TrimSpace(cells[2]); got != want {
			t.Errorf("README preset %s:\n got %s\nwant %s", name, got, want)
		}
	}
}

// TestReadmeAgents keeps the README's table of what sbx runs and sets for
// each agent equal to spec.Agent: the default command, the variables sbx
// sets in its commands, the key variable.
func TestReadmeAgents(t *testing.T) {
	data, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, loop, _ := strings.Cut(string(data), "\n## The agent loop\n")
	loop, _, _ = strings.Cut(loop, "\n## ")
	rows := 0
	for _, name := range spec.Agents {
		i := strings.Index(loop, "\n| `"+name+"` |")
		ag := spec.AgentOf(name)
		if i < 0 {
			if len(ag.Command) > 0 || len(ag.Env) > 0 {
				t.Errorf("the README's agent table has no row for %s, which has a default command", name)
			}
			continue
		}
		rows++
		line := loop[i+1 : i+1+strings.Index(loop[i+1:], "\n")]
		cells := strings.Split(line, "|")
		if got, want := strings.TrimSpace(cells[2]), "`"+strings.Join(ag.Command, " ")+"`"; got != want {
			t.Errorf("README: %s's default command is %s, sbx runs %s", name, got, want)
		}
		for k, v := range ag.Env {
			if !strings.Contains(cells[3], "`"+k+"="+v+"`") {
				t.Errorf("README: the %s row does not say sbx sets %s=%s", name, k, v)
			}
		}
		if len(ag.Env) == 0 && strings.TrimSpace(cells[3]) != "nothing" {
			t.Errorf("README: the %s row says sbx sets %s; it sets nothing", name, cells[3])
		}
		if ag.Key != "" && !strings.HasPrefix(strings.TrimSpace(cells[4]), "`"+ag.Key+"`") {
			t.Errorf("README: %s's key variable is %s, the agent reads %s", name, cells[4], ag.Key)
		}
	}
	if rows == 0 {
		t.Error("the README's loop section has no agent table")
	}
}

// TestReadmeInstall: the README's first command builds the binary every
// driver accepts (static: the docker driver refuses a dynamic one) and
// names the Go version go.mod needs.
func TestReadmeInstall(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	mod, err := os.ReadFile("../../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	goVersion := regexp.MustCompile(`(?m)^go (\d+\.\d+)`).FindSubmatch(mod)
	if goVersion == nil {
		t.Fatal("go.mod has no go directive")
	}
	intro := regexp.MustCompile(`(?s)Install and run it on a real example \((.*?)\):\n\n    ([^\n]*)\n`).FindSubmatch(readme)
	if intro == nil {
		t.Fatal("README has no install line")
	}
	if want := "Go " + string(goVersion[1]) + "+"; !strings.Contains(string(intro[1]), want) {
		t.Errorf("README's install line says %q; go.mod needs %s", intro[1], want)
	}
	if cmd := string(intro[2]); !strings.HasPrefix(cmd, "CGO_ENABLED=0 go install ") {
		t.Errorf("README's install command %q does not build the static binary the docker driver needs", cmd)
	}
}

// TestReadmeTour: the tour's first commands print what the README shows.
func TestReadmeTour(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?s)    \$ cd my-project\n    \$ sbx init --agent claude +#[^\n]*\n(.*?)    \$ sbx validate\n(    [^\n]*\n)`).FindSubmatch(readme)
	if m == nil {
		t.Fatal("README has no tour starting with sbx init --agent claude")
	}
	unindent := func(b []byte) string { return strings.ReplaceAll(string(b), "    ", "") }
	dir := filepath.Join(t.TempDir(), "my-project")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Chdir(dir)
	env := []string{"HOME=" + dir, "SBX_STATE_DIR=" + filepath.Join(dir, ".state")}
	for _, step := range []struct {
		args []string
		want string
	}{
		{[]string{"init", "--agent", "claude"}, unindent(m[1])},
		{[]string{"validate"}, unindent(m[2])},
	} {
		var out bytes.Buffer
		if code := Main(context.Background(), step.args, strings.NewReader(""), &out, &out, env); code != 0 {
			t.Fatalf("sbx %s: exit %d\n%s", strings.Join(step.args, " "), code, out.String())
		}
		if diff := cmp.Diff(step.want, out.String()); diff != "" {
			t.Errorf("sbx %s: README's tour (-) vs what it prints (+):\n%s", strings.Join(step.args, " "), diff)
		}
	}
}
