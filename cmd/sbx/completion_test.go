package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestCompletionShells loads each completion script into its real shell
// and completes as a user would, through sbx __complete: a verb, a flag, a
// flag's values, and files. PowerShell is not installable here; its script
// is checked only for calling __complete the same way.
func TestCompletionShells(t *testing.T) {
	sbxBin, err := exec.LookPath("sbx")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "sandbox.yaml"), []byte("version: 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(), "PATH="+filepath.Dir(sbxBin)+string(os.PathListSeparator)+os.Getenv("PATH"),
		"HOME="+dir, "SBX_STATE_DIR="+filepath.Join(dir, "state"))
	shell := func(t *testing.T, name string, args ...string) string {
		t.Helper()
		path, err := exec.LookPath(name)
		if err != nil {
			if os.Getenv("SBX_E2E") == "1" {
				t.Fatalf("%s is not installed (.ci/run installs it)", name)
			}
			t.Skipf("%s is not installed", name)
		}
		cmd := exec.Command(path, args...)
		cmd.Dir, cmd.Env = dir, env
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v\n%s", name, err, out)
		}
		return string(out)
	}
	tests := []struct {
		words string // the command line up to the cursor
		want  string // one candidate per line
	}{
		{"sbx va", "validate\n"},
		{"sbx plan --dr", "--driver\n"},
		{"sbx apply --driver docker-", "docker-sandbox\n"},
		{"sbx validate sand", "sandbox.yaml\n"},
	}
	t.Run("bash", func(t *testing.T) {
		for _, tt := range tests {
			words := strings.Fields(tt.words)
			script := `source <(sbx completion bash)
COMP_WORDS=(` + strings.Join(words, " ") + `); COMP_CWORD=` + strconv.Itoa(len(words)-1) + `
_sbx_complete
printf '%s\n' "${COMPREPLY[@]}"`
			if got := shell(t, "bash", "--noprofile", "--norc", "-c", script); got != tt.want {
				t.Errorf("%q: got %q, want %q", tt.words, got, tt.want)
			}
		}
	})
	t.Run("zsh", func(t *testing.T) {
		for _, tt := range tests {
			words := strings.Fields(tt.words)
			// compadd and _files stand in for the completion system's
			// own, printing what they are given.
			script := `compdef() { : }
compadd() { [[ $1 == -- ]] && shift; print -l -- "$@" }
_files() { print -l -- ${words[CURRENT]}*(N) }
source <(sbx completion zsh)
words=(` + strings.Join(words, " ") + `); CURRENT=` + strconv.Itoa(len(words)) + `
_sbx`
			got := shell(t, "zsh", "-f", "-c", script)
			// compadd filters by the typed prefix itself; the stand-in
			// does not, so filter here as zsh would.
			var kept []string
			for _, l := range strings.Split(strings.TrimSpace(got), "\n") {
				if strings.HasPrefix(l, words[len(words)-1]) {
					kept = append(kept, l)
				}
			}
			if got := strings.Join(kept, "\n") + "\n"; got != tt.want {
				t.Errorf("%q: got %q, want %q", tt.words, got, tt.want)
			}
		}
	})
	t.Run("fish", func(t *testing.T) {
		for _, tt := range tests {
			got := shell(t, "fish", "--no-config", "-c", "sbx completion fish | source; complete -C'"+tt.words+"'")
			// fish prints CANDIDATE<TAB>DESCRIPTION; files come as paths.
			var names []string
			for _, l := range strings.Split(strings.TrimSpace(got), "\n") {
				name, _, _ := strings.Cut(l, "\t")
				names = append(names, name)
			}
			if got := strings.Join(names, "\n") + "\n"; got != tt.want {
				t.Errorf("%q: got %q, want %q", tt.words, got, tt.want)
			}
		}
	})
	t.Run("powershell", func(t *testing.T) {
		s := completionScripts["powershell"]
		for _, want := range []string{"Register-ArgumentCompleter -Native -CommandName sbx", `& sbx __complete "=$wordToComplete" @words`, "'::files'"} {
			if !strings.Contains(s, want) {
				t.Errorf("the PowerShell script lacks %q", want)
			}
		}
	})
}
