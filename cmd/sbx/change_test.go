package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// changeRepo makes a git repository in a new directory with base's files
// committed, then head's, and returns it with the environment to run sbx
// and git in (no global or system git config).
func changeRepo(t *testing.T, base, head map[string]string) (dir string, env []string) {
	t.Helper()
	dir = t.TempDir()
	env = append(os.Environ(), "HOME="+dir, "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL="+os.DevNull,
		"SBX_STATE_DIR="+filepath.Join(dir, ".state"))
	gitIn(t, dir, env, "init", "-q")
	commit := func(files map[string]string, msg string) {
		for name, text := range files {
			p := filepath.Join(dir, name)
			os.Remove(p)
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			var err error
			if target, ok := strings.CutPrefix(text, "symlink:"); ok {
				err = os.Symlink(target, p)
			} else {
				err = os.WriteFile(p, []byte(text), 0o644)
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		gitIn(t, dir, env, "add", "-A")
		gitIn(t, dir, env, "commit", "-q", "--allow-empty", "-m", msg)
	}
	commit(base, "base")
	commit(head, "head")
	return dir, env
}

// sbxIn runs sbx in-process in dir.
func sbxIn(t *testing.T, dir string, env []string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	t.Chdir(dir)
	var o, e bytes.Buffer
	code = Main(context.Background(), args, strings.NewReader(""), &o, &e, env)
	return o.String(), e.String(), code
}

const apiBase = "version: 1\nname: api\nagent: shell\ndriver: docker\nnetwork:\n  agentHosts: false\n  allow: [a.example.com]\n"

func TestPlanChange(t *testing.T) {
	head := "version: 1\nname: api\nagent: shell\ndriver: docker\nnetwork:\n  agentHosts: false\n  allow: [a.example.com, b.example.com]\nenv: {MODE: prod}\n"
	dir, env := changeRepo(t, map[string]string{"svc/sandbox.yaml": apiBase}, map[string]string{"svc/sandbox.yaml": head})
	sub := filepath.Join(dir, "svc")

	out, errOut, code := sbxIn(t, sub, env, "plan", "--base", "HEAD~1", "--head", "HEAD", "--detailed-exitcode")
	if code != exitChanges {
		t.Fatalf("exit %d, want 2:\n%s%s", code, out, errOut)
	}
	for _, want := range []string{
		`# sandbox "api" must be replaced`,
		`+ env.MODE: "prod"`,
		`+ network.allow: "b.example.com"`,
		"! egress to b.example.com (from svc/sandbox.yaml:7:26)",
		"Change: 0 to create, 0 to update, 1 to replace, 0 to destroy.",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("plan lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "a.example.com") {
		t.Errorf("an unchanged value is shown:\n%s", out)
	}

	// No change: exit 0. The working tree is head's.
	if out, errOut, code := sbxIn(t, sub, env, "plan", "--base", "HEAD", "--detailed-exitcode"); code != exitOK || !strings.Contains(out, "No changes.") {
		t.Errorf("exit %d:\n%s%s", code, out, errOut)
	}

	// JSON: kind change, the revisions, the widening's origin.
	out, errOut, code = sbxIn(t, sub, env, "plan", "--base", "HEAD~1", "--head", "HEAD", "--json")
	if code != exitOK {
		t.Fatalf("--json: exit %d: %s", code, errOut)
	}
	for _, want := range []string{`"kind": "change"`, `"base": "HEAD~1"`, `"head": "HEAD"`, `"origin": "svc/sandbox.yaml:7:26"`, `"applyable": false`, `"steps": []`} {
		if !strings.Contains(out, want) {
			t.Errorf("--json lacks %s:\n%s", want, out)
		}
	}

	// Errors: exit 1.
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"plan", "--base", "no-such-rev", "--detailed-exitcode"}, `revision "no-such-rev" is not a commit`},
		{[]string{"plan", "--base=--output=x", "--detailed-exitcode"}, `invalid revision "--output=x"`},
		{[]string{"plan", "--head", "HEAD"}, "--head needs --base"},
		{[]string{"plan", "--base", "HEAD", "--out", "p.json"}, "cannot be applied"},
		{[]string{"plan", "--base", "HEAD", "-f", "../../outside.yaml"}, "is outside the repository"},
	} {
		if out, errOut, code := sbxIn(t, sub, env, tc.args...); code != exitError || !strings.Contains(errOut, tc.want) {
			t.Errorf("sbx %s: exit %d, want 1 and %q:\n%s%s", strings.Join(tc.args, " "), code, tc.want, out, errOut)
		}
	}
	if _, err := os.Stat(filepath.Join(sub, "x")); err == nil {
		t.Error("a revision starting with - reached git as an option")
	}
}

// TestPlanChangeNewFile: a file the base revision does not have is all
// new, and everything it lets the sandbox do is a widening, the agent's
// own hosts, mounts and secrets included.
func TestPlanChangeNewFile(t *testing.T) {
	head := "version: 1\nname: api\nagent: claude\ndriver: docker\nmounts: [\"./data:/data\"]\nsecrets:\n  GH_TOKEN: {env: GH_TOKEN}\n"
	dir, env := changeRepo(t, map[string]string{"README": "x\n"}, map[string]string{"sandbox.yaml": head, "data/.keep": ""})
	out, errOut, code := sbxIn(t, dir, env, "plan", "--base", "HEAD~1", "--head", "HEAD", "--detailed-exitcode")
	if code != exitChanges {
		t.Fatalf("exit %d:\n%s%s", code, out, errOut)
	}
	for _, want := range []string{`# sandbox "api" will be created`, "! egress to api.anthropic.com (agent claude) (from sandbox.yaml:3:8)",
		"! host path " + filepath.Join(dir, "data") + " mounted at /data, read-write (from sandbox.yaml:5:10)",
		"! secret GH_TOKEN passes host environment variable GH_TOKEN into the sandbox (from sandbox.yaml:7:13)"} {
		if !strings.Contains(out, want) {
			t.Errorf("plan lacks %q:\n%s", want, out)
		}
	}
}

// TestPlanChangeHostile: both revisions are a pull request's, attacker
// input. The repository's config names programs git would run for other
// commands (fsmonitor, diff, textconv, filters, pager, hooks); a symlinked
// sandbox.yaml points at a host file; a file names a secret command and a
// template build; a value reads a job secret; the personal
// sandbox.local.yaml adds a host. None of it runs, is read, or is shown.
func TestPlanChangeHostile(t *testing.T) {
	dir := t.TempDir()
	marker := filepath.Join(dir, "ran")
	hostFile := filepath.Join(dir, "host.yaml")
	if err := os.WriteFile(hostFile, []byte("version: 1\nname: hostsecret\nagent: shell\nenv: {K: host-file-content}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	evil := filepath.Join(dir, "evil.sh")
	if err := os.WriteFile(evil, []byte("#!/bin/sh\necho \"$0 $*\" >>"+marker+"\ncat\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	head := "version: 1\nname: api\nagent: shell\ndriver: docker\nnetwork:\n  agentHosts: false\n  allow: [\"${JOB_SECRET}.example.com\"]\n" +
		"secrets:\n  T: {command: [\"" + evil + "\", secret]}\ntemplate:\n  build: {context: ./img}\n"
	repo, env := changeRepo(t, map[string]string{"sandbox.yaml": apiBase, ".gitattributes": "* diff=evil filter=evil\n"},
		map[string]string{"sandbox.yaml": head, "img/Dockerfile": "FROM scratch\nRUN " + evil + "\n",
			"linked/sandbox.yaml": "symlink:" + hostFile})
	for _, kv := range [][2]string{
		{"core.fsmonitor", evil}, {"diff.external", evil}, {"diff.evil.textconv", evil},
		{"filter.evil.smudge", evil}, {"filter.evil.clean", evil}, {"core.pager", evil},
		{"core.hooksPath", dir}, {"core.sshCommand", evil}, {"core.editor", evil},
	} {
		gitIn(t, repo, env, "config", kv[0], kv[1])
	}
	for _, hook := range []string{"post-checkout", "post-index-change", "reference-transaction", "pre-auto-gc"} {
		if err := os.Symlink(evil, filepath.Join(dir, hook)); err != nil {
			t.Fatal(err)
		}
	}
	// The personal overlay, present in the working tree and never merged.
	if err := os.WriteFile(filepath.Join(repo, "sandbox.local.yaml"), []byte("network:\n  allow: [local.example.com]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	os.Remove(marker) // the commits ran the filter: what counts is what sbx runs
	env = append(env, "JOB_SECRET=hunter2", "GIT_PAGER=", "PAGER=")

	out, errOut, code := sbxIn(t, repo, env, "plan", "--base", "HEAD~1")
	if code != exitOK {
		t.Fatalf("exit %d:\n%s%s", code, out, errOut)
	}
	for _, want := range []string{"! egress to (from $JOB_SECRET).example.com", "! secret T runs a command on this machine: " + evil + " secret", "! template built from " + filepath.Join(repo, "img")} {
		if !strings.Contains(out, want) {
			t.Errorf("plan lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out+errOut, "hunter2") || strings.Contains(out, "local.example.com") {
		t.Errorf("a job secret or the personal overlay reached the plan:\n%s%s", out, errOut)
	}
	// The symlinked sandbox.yaml, in a revision and in the working tree.
	for _, args := range [][]string{
		{"plan", "--base", "HEAD~1", "--head", "HEAD", "-f", "linked/sandbox.yaml"},
		{"plan", "--base", "HEAD~1", "-f", "linked/sandbox.yaml"},
	} {
		out, errOut, code := sbxIn(t, repo, env, args...)
		if code != exitError || !strings.Contains(errOut, "symlink") && !strings.Contains(errOut, "not a regular file") {
			t.Errorf("sbx %s: exit %d:\n%s%s", strings.Join(args, " "), code, out, errOut)
		}
		if strings.Contains(out+errOut, "host-file-content") || strings.Contains(out+errOut, "hostsecret") {
			t.Errorf("the host file behind a symlink was read:\n%s%s", out, errOut)
		}
	}
	if b, err := os.ReadFile(marker); err == nil {
		t.Errorf("sbx ran a program the repository or a file names: %s", b)
	}
	// The config is live: git status runs the fsmonitor it names, so
	// the check above could fail.
	gitIn(t, repo, env, "status", "--short")
	if _, err := os.Stat(marker); err != nil {
		t.Errorf("the hostile config ran nothing for git status either; the test proves nothing: %v", err)
	}
}
