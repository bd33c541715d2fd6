package sbx

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/sbxhq/sbx/driver/cliutil"
	"github.com/sbxhq/sbx/driver/runner"
)

// parserFor returns the parser the driver uses for a command of Docker's
// sbx (program and global flags left out), or nil for a command whose
// output sbx does not parse. Exit status 1 is an answer for `policy check`.
func parserFor(args []string) (parse func(src cliutil.Source, out []byte) error, okExit func(int) bool) {
	zero := func(code int) bool { return code == 0 }
	has := func(w ...string) bool { return len(args) >= len(w) && slices.Equal(args[:len(w)], w) }
	json := slices.Contains(args, "--json")
	switch {
	case slices.Equal(args, []string{"version"}):
		return func(_ cliutil.Source, out []byte) error {
			_, err := (&cliutil.CLI{Name: "sbx"}).ReadVersion(out)
			return err
		}, zero
	case slices.Equal(args, []string{"--help"}):
		return func(s cliutil.Source, out []byte) error { _, err := parseHelp(s, out); return err }, zero
	case has("ls") && json:
		return func(s cliutil.Source, out []byte) error {
			_, err := parseList(s, out, func(string) bool { return true })
			return err
		}, zero
	case has("policy", "ls") && json:
		return func(s cliutil.Source, out []byte) error { _, err := parsePolicy(s, out); return err }, zero
	case has("ports") && json && !slices.Contains(args, "--publish") && !slices.Contains(args, "--unpublish"):
		return func(s cliutil.Source, out []byte) error { _, err := parsePorts(s, out); return err }, zero
	case has("policy", "check", "network") && json:
		return func(s cliutil.Source, out []byte) error { _, err := parseCheck(s, out); return err },
			func(code int) bool { return code == 0 || code == 1 }
	case has("secret", "ls") && json:
		return func(s cliutil.Source, out []byte) error { _, err := parseSecrets(s, out); return err }, zero
	case has("policy", "log") && json:
		return func(s cliutil.Source, out []byte) error { _, err := parseLog(s, out); return err }, zero
	}
	return nil, nil
}

// TestTranscripts replays every fixture in testdata/transcripts: a `sbx
// doctor --probe` report or an SBX_TRACE transcript (docs/backend-fixtures.md).
// Each output the driver parses is parsed again and the verdict must be
// the one the fixture records ("# check: ok" or "# check: FAILED: ...";
// "ok" when it records none).
func TestTranscripts(t *testing.T) {
	files, err := filepath.Glob("testdata/transcripts/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no fixtures: %v", err)
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			f, err := os.Open(file)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			entries, err := runner.ReadTranscript(f)
			if err != nil {
				t.Fatal(err)
			}
			checked := 0
			for _, e := range entries {
				args := e.Args[1:] // the program
				for len(args) > 0 && args[0] == "--no-input" {
					args = args[1:]
				}
				parse, okExit := parserFor(args)
				if parse == nil || !okExit(e.Exit) {
					continue
				}
				checked++
				src := cliutil.Source{Command: "sbx " + strings.Join(args, " ")}
				got := "ok"
				if err := parse(src, []byte(e.Stdout)); err != nil {
					got = "FAILED: " + err.Error()
				}
				want := e.Check
				if want == "" {
					want = "ok"
				}
				// A report's verdict names the version in parentheses;
				// compare what follows the command.
				if strip(got) != strip(want) {
					t.Errorf("line %d: %s:\n got %s\nwant %s", e.Line, runner.Quote(e.Args), got, want)
				}
			}
			if checked == 0 {
				t.Error("the fixture has no output the driver parses")
			}
		})
	}
}

// versionNote is the "(sbx 0.47.0)" a verdict carries after the command.
var versionNote = regexp.MustCompile(` \(sbx [^)]*\): `)

// strip drops the version from a verdict: the replay does not know it.
func strip(v string) string { return versionNote.ReplaceAllString(v, ": ") }
