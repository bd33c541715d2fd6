package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// action is the part of action.yml a composite action's runner reads.
type action struct {
	Inputs map[string]struct {
		Default string `yaml:"default"`
	} `yaml:"inputs"`
	Runs struct {
		Using string `yaml:"using"`
		Steps []struct {
			Name             string            `yaml:"name"`
			ID               string            `yaml:"id"`
			If               string            `yaml:"if"`
			Uses             string            `yaml:"uses"`
			Shell            string            `yaml:"shell"`
			Run              string            `yaml:"run"`
			Env              map[string]string `yaml:"env"`
			WorkingDirectory string            `yaml:"working-directory"`
		} `yaml:"steps"`
	} `yaml:"runs"`
}

// runAction runs action.yml's steps as GitHub's runner does a composite
// action (bash -e -o pipefail, inputs through ${{ inputs.X }}, the github
// context's values from gh, the GITHUB_* files, ws as GITHUB_WORKSPACE),
// until a step fails. It returns the runner's log (stdout and stderr), the
// step summary, the outputs file and whether every step passed. The
// action must leave the caller's environment as it found it: it uses no
// other action (actions/setup-go would put its Go first in PATH and set
// GOROOT for the rest of the job) and writes nothing to GITHUB_ENV or
// GITHUB_PATH, the files through which a step changes the environment of
// the job's later steps.
func runAction(t *testing.T, ws string, inputs, gh map[string]string, env []string) (log, summary, outputs string, ok bool) {
	t.Helper()
	data, err := os.ReadFile("../../action.yml")
	if err != nil {
		t.Fatal(err)
	}
	var a action
	if err := yaml.Unmarshal(data, &a); err != nil {
		t.Fatal(err)
	}
	if a.Runs.Using != "composite" {
		t.Fatalf("action.yml runs.using = %q, want composite", a.Runs.Using)
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	in := map[string]string{}
	for k, v := range a.Inputs {
		in[k] = v.Default
	}
	for k, v := range inputs {
		if _, ok := a.Inputs[k]; !ok {
			t.Fatalf("action.yml has no input %q", k)
		}
		in[k] = v
	}
	expr := regexp.MustCompile(`\$\{\{\s*([a-z_.-]+)\s*\}\}`)
	subst := func(s string) string {
		return expr.ReplaceAllStringFunc(s, func(m string) string {
			name := expr.FindStringSubmatch(m)[1]
			if k, ok := strings.CutPrefix(name, "inputs."); ok {
				return in[k]
			}
			if name == "github.action_path" {
				return root
			}
			if v, ok := gh[name]; ok {
				return v
			}
			if strings.HasPrefix(name, "github.event.") {
				return "" // not this event's
			}
			t.Fatalf("action.yml uses %s, which this test does not provide", m)
			return ""
		})
	}
	cond := regexp.MustCompile(`^inputs\.([a-z-]+) (==|!=) '([^']*)'$`)
	tmp := t.TempDir()
	summaryFile, outputFile := filepath.Join(tmp, "summary"), filepath.Join(tmp, "output")
	envFile, pathFile := filepath.Join(tmp, "env"), filepath.Join(tmp, "path")
	for _, f := range []string{envFile, pathFile} {
		if err := os.WriteFile(f, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	runnerTemp := filepath.Join(tmp, "runner")
	var out strings.Builder
	for _, st := range a.Runs.Steps {
		if st.Uses != "" {
			t.Fatalf("action.yml uses %s: another action may change the caller's toolchain or environment for the job's later steps", st.Uses)
		}
		if st.If != "" {
			m := cond.FindStringSubmatch(st.If)
			if m == nil {
				t.Fatalf("step %q: condition %q is not one this test evaluates", st.Name, st.If)
			}
			if (in[m[1]] == m[3]) != (m[2] == "==") {
				continue
			}
		}
		if st.Shell != "bash" {
			t.Fatalf("step %q: shell %q, want bash (the runner's bash -e -o pipefail)", st.Name, st.Shell)
		}
		script := filepath.Join(tmp, "step.sh")
		if err := os.WriteFile(script, []byte(st.Run), 0o600); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command("bash", "--noprofile", "--norc", "-e", "-o", "pipefail", script)
		cmd.Dir = ws
		if wd := subst(st.WorkingDirectory); wd != "" {
			cmd.Dir = filepath.Join(ws, wd)
		}
		cmd.Env = append(append([]string(nil), env...), "GITHUB_ACTION_PATH="+root, "RUNNER_TEMP="+runnerTemp,
			"GITHUB_STEP_SUMMARY="+summaryFile, "GITHUB_OUTPUT="+outputFile, "GITHUB_WORKSPACE="+ws,
			"GITHUB_ENV="+envFile, "GITHUB_PATH="+pathFile)
		for k, v := range st.Env {
			cmd.Env = append(cmd.Env, k+"="+subst(v))
		}
		b, err := cmd.CombinedOutput()
		out.Write(b)
		if err != nil {
			ok = false
			break
		}
		ok = true
	}
	for _, f := range []string{envFile, pathFile} {
		if b, err := os.ReadFile(f); err != nil || len(b) > 0 {
			t.Errorf("the action changed the environment of the job's later steps (%s): %v %q", filepath.Base(f), err, b)
		}
	}
	s, _ := os.ReadFile(summaryFile)
	o, _ := os.ReadFile(outputFile)
	return out.String(), string(s), string(o), ok
}

// TestGitHubAction runs action.yml's steps on a pull request's files: a
// valid file gets its plan in the step summary and changes=true; a broken
// one fails with each problem annotated at its line; what the files say
// reaches neither the runner's workflow commands nor the summary's HTML.
func TestGitHubAction(t *testing.T) {
	// The build step uses this machine's Go caches, not the test HOME's.
	caches, err := exec.Command("go", "env", "GOCACHE", "GOMODCACHE").Output()
	if err != nil {
		t.Fatal(err)
	}
	goEnv := strings.Fields(string(caches))
	if len(goEnv) != 2 {
		t.Fatalf("go env GOCACHE GOMODCACHE: %q", caches)
	}
	dir := t.TempDir()
	env, _, fake := fakeWorld(t, dir)
	// The action runs sbx with only the variables it needs: the fake's
	// own (its state file) reach it through a wrapper, as a real
	// backend's configuration would through its files.
	wrapper := filepath.Join(dir, "docker-sbx")
	script := "#!/bin/sh\nFAKE_SBX_STATE=" + filepath.Join(dir, "fake.json") + " exec " + fake + " \"$@\"\n"
	if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	// RUNNER_SECRET is a secret the workflow put in the job's environment.
	env = append(env, "GOCACHE="+goEnv[0], "GOMODCACHE="+goEnv[1], "SBX_DOCKER_SBX="+wrapper,
		"RUNNER_SECRET=HuNtEr2SeCrEt", "PLAN_VAR=public-value")
	write := func(name, text string) string {
		ws := filepath.Join(dir, name)
		if err := os.MkdirAll(ws, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(ws, "sandbox.yaml"), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return ws
	}

	t.Run("plan", func(t *testing.T) {
		ws := write("good", "version: 1\nname: api\nagent: shell\ndriver: sbx\nenv: {NOTE: \"<img src=x onerror=alert(1)>\"}\nnetwork:\n  agentHosts: false\n  allow: [a.example.com]\n")
		log, summary, outputs, ok := runAction(t, ws, map[string]string{"mode": "live"}, nil, env)
		if !ok {
			t.Fatalf("the action failed on a valid file:\n%s", log)
		}
		for _, want := range []string{"### sbx plan: changes pending", `# sandbox "api" will be created`, "&lt;img src=x onerror=alert(1)&gt;"} {
			if !strings.Contains(summary, want) {
				t.Errorf("step summary lacks %q:\n%s", want, summary)
			}
		}
		if strings.Contains(summary, "<img") {
			t.Errorf("the file's text reached the summary as HTML:\n%s", summary)
		}
		if !strings.Contains(outputs, "changes=true\n") {
			t.Errorf("outputs %q, want changes=true", outputs)
		}
	})

	// A pull request's file reads the job's secret: the action runs sbx
	// with an environment holding only what sbx needs and the variables
	// the workflow passes (inputs.env), so the secret is unset for it,
	// not even redacted into "(from $RUNNER_SECRET)".
	t.Run("environment", func(t *testing.T) {
		ws := write("secret", "version: 1\nname: api\nagent: shell\ndriver: sbx\nnetwork:\n  agentHosts: false\n  allow: [\"${RUNNER_SECRET:-unset}.example.com\", \"${PLAN_VAR}.example.org\"]\n")
		log, summary, _, ok := runAction(t, ws, map[string]string{"mode": "live", "env": "PLAN_VAR"}, nil, env)
		if !ok {
			t.Fatalf("the action failed:\n%s", log)
		}
		for _, want := range []string{`+ network.allow: "unset.example.com"`, `+ network.allow: "(from $PLAN_VAR).example.org"`} {
			if !strings.Contains(summary, want) {
				t.Errorf("step summary lacks %q:\n%s", want, summary)
			}
		}
		if strings.Contains(summary, "RUNNER_SECRET)") || strings.Contains(strings.ToLower(log+summary), "hunter2secret") {
			t.Errorf("the job's secret reached sbx:\n%s\n%s", log, summary)
		}
		_, _, _, ok = runAction(t, ws, map[string]string{"mode": "live", "env": "PLAN_VAR $(touch x)"}, nil, env)
		if ok {
			t.Errorf("the action accepted a name that is not a variable's in inputs.env")
		}
	})

	t.Run("validate", func(t *testing.T) {
		ws := write("broken", "version: 1\nagent: shell\ntempalte: x\n\"::set-env name=X::y\": 1\n")
		log, summary, _, ok := runAction(t, ws, map[string]string{"plan": "false"}, nil, env)
		if ok {
			t.Fatalf("the action passed a broken file:\n%s", log)
		}
		want := `::error file=sandbox.yaml,line=3,col=1,title=sbx validate::tempalte: unknown key "tempalte" (did you mean "template"?)`
		if !strings.Contains(log, want+"\n") {
			t.Errorf("log lacks the annotation %q:\n%s", want, log)
		}
		if !strings.Contains(summary, "### sbx validate found problems") || !strings.Contains(summary, "tempalte") {
			t.Errorf("step summary:\n%s", summary)
		}
		// Every line the file's text is on sits between stop-commands and
		// its token, where the runner reads no command.
		stop := regexp.MustCompile(`(?m)^::stop-commands::([0-9a-f]{32})$`).FindStringSubmatch(log)
		if stop == nil {
			t.Fatalf("the output is not fenced by ::stop-commands:::\n%s", log)
		}
		start, end := strings.Index(log, stop[0]), strings.Index(log, "::"+stop[1]+"::")
		if end < start {
			t.Fatalf("the stop-commands fence is never closed:\n%s", log)
		}
		if i := strings.Index(log, "set-env"); i < start || i > end {
			t.Errorf("the file's ::set-env text is outside the fence:\n%s", log)
		}
	})
}

// TestGitLabSnippet runs the script of docs/ci.md's GitLab job (its
// before_script installs sbx from the network, which is this build here)
// as GitLab's runner does, one shell failing on the first failing line:
// a plan with changes passes and is kept in sbx-plan.txt; a broken file
// fails the job.
func TestGitLabSnippet(t *testing.T) {
	doc, err := os.ReadFile("../../docs/ci.md")
	if err != nil {
		t.Fatal(err)
	}
	_, gitlab, ok := strings.Cut(string(doc), "## GitLab CI")
	if !ok {
		t.Fatal("docs/ci.md has no GitLab CI section")
	}
	m := regexp.MustCompile("(?s)```yaml\n(.*?)```").FindStringSubmatch(gitlab)
	if m == nil {
		t.Fatal("docs/ci.md's GitLab section has no yaml block")
	}
	var jobs map[string]struct {
		Variables map[string]string `yaml:"variables"`
		Script    []string          `yaml:"script"`
	}
	if err := yaml.Unmarshal([]byte(m[1]), &jobs); err != nil {
		t.Fatalf("docs/ci.md's GitLab job: %v", err)
	}
	job, ok := jobs["sbx-plan"]
	if !ok || len(job.Script) == 0 {
		t.Fatalf("docs/ci.md's GitLab block has no sbx-plan job with a script: %+v", jobs)
	}
	dir := t.TempDir()
	env, _, _ := fakeWorld(t, dir)
	for k, v := range job.Variables {
		env = append(env, k+"="+v)
	}
	env = append(env, "SBX_DRIVER=sbx") // the fake of Docker's sbx, not a Docker service
	run := func(name, sandbox string) (string, error) {
		ws := filepath.Join(dir, name)
		if err := os.MkdirAll(ws, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(ws, "sandbox.yaml"), []byte(sandbox), 0o644); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command("bash", "--noprofile", "--norc", "-e", "-c", strings.Join(job.Script, "\n"))
		cmd.Dir, cmd.Env = ws, env
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	out, err := run("good", "version: 1\nname: api\nagent: shell\nnetwork: {agentHosts: false, allow: [a.example.com]}\n")
	if err != nil {
		t.Fatalf("the job failed on a valid file with changes: %v\n%s", err, out)
	}
	plan, err := os.ReadFile(filepath.Join(dir, "good", "sbx-plan.txt"))
	if err != nil || !strings.Contains(string(plan), `# sandbox "api" will be created`) {
		t.Errorf("sbx-plan.txt: %v\n%s", err, plan)
	}
	if out, err := run("broken", "version: 1\nagent: shell\ntempalte: x\n"); err == nil || !strings.Contains(out, "unknown key") {
		t.Errorf("the job passed a broken file: %v\n%s", err, out)
	}
}
