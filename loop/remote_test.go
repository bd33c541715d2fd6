//go:build unix

package loop

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sbxhq/sbx/driver"
	fx "github.com/sbxhq/sbx/internal/fixture"
	"github.com/sbxhq/sbx/internal/tarball"
	"github.com/sbxhq/sbx/spec"
)

// copyBinary is where sbx's binary is inside a copySandbox.
const copyBinary = "/.sbx/sbx"

// copySandbox works on its own copy of the workspace, as a kubernetes
// pod does: its commands run on the host in the copy, dir, and sbx's
// binary inside it is this package's ProgressMain, run in-process.
type copySandbox struct{ dir string }

func (c copySandbox) Exec(ctx context.Context, argv []string, o driver.ExecOptions) (int, error) {
	if len(argv) >= 2 && argv[0] == copyBinary && argv[1] == ProgressVerb {
		return ProgressMain(ctx, argv[2:], o.Stdout, o.Stderr), nil
	}
	o.Workdir = c.dir
	return hostSandbox{}.Exec(ctx, argv, o)
}

// TestProgressInSandbox: an agent that works on the sandbox's own copy of
// the workspace (issue 19) makes progress where it works, not on the
// host's untouched files: with the breaker at one idle iteration, the
// run completes on the second; each iteration changed one file there;
// commits there count; and the copy is pulled home once, after the last
// iteration, as the run says.
func TestProgressInSandbox(t *testing.T) {
	f := newFixture(t, false)
	l := spec.Loop{MaxIterations: 4, Breaker: spec.Breaker{NoProgress: 1}, Completion: spec.Completion{Promise: "DONE"}}
	p := &pulls{f: f, st: &tarball.Stats{Files: 2, Skipped: []string{"sandbox.yaml: protected"}}}
	script := `n=1; while [ -e iter-$n.txt ]; do n=$((n+1)); done; echo $n > iter-$n.txt
git add . && git commit -q -m "iteration $n"
[ $n -lt 2 ] || echo "<promise>DONE</promise>"`
	ag, copyDir := f.copyAgent(script, l, p)
	for _, args := range [][]string{{"init", "-q"}, {"config", "user.email", "a@b"}, {"config", "user.name", "a"}, {"commit", "-q", "--allow-empty", "-m", "init"}} {
		fx.Git(t, copyDir, args...)
	}
	res := f.begin(l, "box").Loop(context.Background(), Config{Workspace: f.ws, Loop: l, Agents: []Agent{ag}, Stdout: &f.out, Stderr: &f.out})
	if res.State != StateCompleted || res.Iterations != 2 {
		t.Fatalf("result %+v, want completed after 2\n%s", res, f.out.String())
	}
	type measured struct{ Progressed, Files, Commits any }
	var got []measured
	for _, r := range f.records(res) {
		got = append(got, measured{r.Progressed, r.Files, r.Commits})
	}
	if diff := cmp.Diff([]measured{{true, 1, 1}, {true, 1, 1}}, got); diff != "" {
		t.Errorf("records (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{PhasePulling}, p.calls); diff != "" {
		t.Errorf("pulls, by the run's phase (-want +got):\n%s", diff)
	}
	if !p.live {
		t.Error("the pull's context was done")
	}
	if !strings.Contains(f.out.String(), "\nsbx loop: pulled the sandbox's workspace home: 2 files; 1 entry skipped (sbx pull says which)\nsbx loop: completed: ") {
		t.Errorf("the run does not say it pulled the work home before its end:\n%s", f.out.String())
	}
	if names, _ := os.ReadDir(f.ws); len(names) > 0 {
		t.Errorf("the agent wrote the host's workspace: %v", names)
	}
}

// answer plays the agent in the measuring command's place inside the
// sandbox: it writes stdout (until the reader stops reading or ctx
// ends, when endless), stderr, and exits code; hang waits for ctx.
type answer struct {
	stdout  string
	endless bool
	stderr  string
	code    int
	hang    bool
	wrote   int64
	ran     bool
}

func (a *answer) Exec(ctx context.Context, argv []string, o driver.ExecOptions) (int, error) {
	a.ran = true
	io.WriteString(o.Stderr, a.stderr)
	n, err := io.WriteString(o.Stdout, a.stdout)
	a.wrote += int64(n)
	for a.endless && err == nil && ctx.Err() == nil {
		n, err = o.Stdout.Write([]byte(strings.Repeat("p", 32<<10)))
		a.wrote += int64(n)
	}
	if a.hang {
		<-ctx.Done()
		return -1, ctx.Err()
	}
	return a.code, nil
}

// TestSandboxProgressHostile: whatever the sandbox answers in place of
// sbx's measuring command, the host gets a snapshot or a count, or one
// error saying what was wrong (what the agent wrote escaped), promptly
// and reading no more than the bounds.
func TestSandboxProgressHostile(t *testing.T) {
	header := fmt.Sprintf("sbx-snapshot 1 1\n%s\n%s\n", testHead, testTree)
	tests := []struct {
		name    string
		commits bool // the commit count, not the snapshot
		a       answer
		want    string
	}{
		{"snapshot: a whole one", false, answer{stdout: header + "a\x00file 1\n"}, ""},
		{"snapshot: nothing, exit 0", false, answer{}, "snapshot header: unexpected EOF"},
		{"snapshot: garbage", false, answer{stdout: "\x1b[2J<html>\n"}, `not a snapshot: header "\x1b[2J<html>"`},
		{"snapshot: an endless path", false, answer{stdout: header, endless: true}, "snapshot path 1 of 1: a field longer than 131072 bytes: over the limit"},
		{"snapshot: the command fails", false, answer{code: 1, stderr: "sbx __progress: workspace /w: more than 1000000 paths\x1b[31m\n"}, `sbx __progress exited 1: "sbx __progress: workspace /w: more than 1000000 paths\x1b[31m"`},
		{"snapshot: a cut answer and a failure", false, answer{stdout: header, code: 137, stderr: "killed"}, "sbx __progress exited 137: killed"},
		{"snapshot: no answer", false, answer{hang: true}, "no answer within 50ms"},
		{"snapshot: a whole answer, then silence", false, answer{stdout: header + "a\x00file 1\n", hang: true}, "no answer within 50ms"},
		{"commits: a count", true, answer{stdout: "3\n"}, ""},
		{"commits: negative", true, answer{stdout: "-1\n"}, `not a count: "-1\n"`},
		{"commits: not a number", true, answer{stdout: "3 commits\n"}, `not a count: "3 commits\n"`},
		{"commits: endless digits", true, answer{stdout: "1", endless: true}, `not a count: "1` + strings.Repeat("p", maxCountAnswer) + `"`},
		{"commits: a cut count", true, answer{stdout: "3"}, "unexpected EOF"},
		{"commits: the command fails", true, answer{code: 1, stderr: "no such object"}, "git exited 1: no such object"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := tt.a
			p := &SandboxProgress{Exec: &a, Binary: copyBinary, Dir: "/w", Timeout: 50 * time.Millisecond}
			var err error
			fx.Promptly(t, func() {
				if tt.commits {
					_, err = CountCommits(context.Background(), &a, "/w", testHead, strings.Repeat("1", 40), 50*time.Millisecond)
				} else {
					_, err = p.Snapshot(context.Background())
				}
			})
			got := ""
			if err != nil {
				got = err.Error()
			}
			if tt.want != "" && tt.commits {
				tt.want = "counting commits inside the sandbox: " + tt.want
			} else if tt.want != "" {
				tt.want = "measuring the workspace inside the sandbox: " + tt.want
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("error (-want +got):\n%s", diff)
			}
			if a.wrote > 1<<20 {
				t.Errorf("the host read %d bytes of the answer", a.wrote)
			}
		})
	}
}

// TestProgressMain: the verb measures a workspace as the host's Scanner
// does, and CountCommits counts the sandbox copy's commits; anything else
// is a usage error.
func TestProgressMain(t *testing.T) {
	ws := t.TempDir()
	fx.Git(t, ws, "init", "-q")
	writeFile(t, filepath.Join(ws, "a.txt"), "a\n")
	fx.Git(t, ws, "add", ".")
	fx.Git(t, ws, "-c", "user.email=a@b", "-c", "user.name=a", "commit", "-q", "-m", "one")
	first := strings.TrimSpace(fx.Git(t, ws, "rev-parse", "HEAD"))
	fx.Git(t, ws, "-c", "user.email=a@b", "-c", "user.name=a", "commit", "-q", "--allow-empty", "-m", "two")
	fx.Git(t, ws, "-c", "user.email=a@b", "-c", "user.name=a", "commit", "-q", "--allow-empty", "-m", "three")
	head := strings.TrimSpace(fx.Git(t, ws, "rev-parse", "HEAD"))

	p := &SandboxProgress{Exec: copySandbox{ws}, Binary: copyBinary, Dir: ws}
	remote, err := p.Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	local, err := NewScanner(ws).Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(local, remote, cmp.AllowUnexported(Snapshot{})); diff != "" {
		t.Errorf("the sandbox's snapshot differs from the host's (-want +got):\n%s", diff)
	}
	if n, err := CountCommits(context.Background(), copySandbox{ws}, ws, first, head, 0); n != 2 || err != nil {
		t.Errorf("CountCommits = %d, %v; want 2", n, err)
	}
	var out, errOut strings.Builder
	if code := ProgressMain(context.Background(), []string{"snapshot"}, &out, &errOut); code != 2 || out.Len() > 0 || !strings.HasPrefix(errOut.String(), "usage: ") {
		t.Errorf("no DIR: exit %d, %q, %q", code, out.String(), errOut.String())
	}
}

// TestCountCommitsTakesOnlyObjectNames: HEADs come from snapshots the
// sandbox may have written; one that is not an object name (an option to
// git, a revision expression) is refused before anything runs.
func TestCountCommitsTakesOnlyObjectNames(t *testing.T) {
	name := strings.Repeat("1", 40)
	for _, tt := range []struct{ before, after string }{
		{"", "--output=/etc/passwd"},
		{"--all", name},
		{name, "HEAD~3"},
		{name, strings.Repeat("A", 40)},
		{strings.Repeat("1", 41), name},
	} {
		a := &answer{stdout: "3\n"}
		n, err := CountCommits(context.Background(), a, "/w", tt.before, tt.after, 50*time.Millisecond)
		if err == nil || n != 0 {
			t.Errorf("CountCommits(%q, %q) = %d, %v; want an error", tt.before, tt.after, n, err)
		}
		if a.ran {
			t.Errorf("CountCommits(%q, %q) ran a command", tt.before, tt.after)
		}
	}
}
