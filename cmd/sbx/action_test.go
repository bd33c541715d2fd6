package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
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

// gitIn runs git in dir for a test, as a user with a name.
func gitIn(t *testing.T, dir string, env []string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "init.defaultBranch=main"}, args...)...)
	cmd.Dir, cmd.Env = dir, env
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// TestGitHubActionPullRequest is the action on a pull request as GitHub
// runs it: a repository whose base commit declares services/api's sandbox
// and whose head widens its egress and adds a mount, checked out shallow
// (actions/checkout's default, without the base commit). The action in
// its default mode fetches the base commit and shows exactly those two
// changes, each widening at its file and line in the log, as an
// annotation on services/api/sandbox.yaml (the path from the
// repository's top, wherever sbx ran) and in the step summary; no backend
// is asked (there is none on PATH). The job's Go settings (GOFLAGS,
// GOOS) do not reach the build, and the job's environment is left as it
// was (runAction).
func TestGitHubActionPullRequest(t *testing.T) {
	caches, err := exec.Command("go", "env", "GOCACHE", "GOMODCACHE").Output()
	if err != nil {
		t.Fatal(err)
	}
	goEnv := strings.Fields(string(caches))
	dir := t.TempDir()
	// Nothing of a backend: no docker-sbx, no docker; git and go only.
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir, "SBX_STATE_DIR=" + filepath.Join(dir, "state"),
		"SBX_DOCKER_SBX=" + filepath.Join(dir, "no-docker-sbx"), "SBX_DOCKER=" + filepath.Join(dir, "no-docker"),
		"GOCACHE=" + goEnv[0], "GOMODCACHE=" + goEnv[1], "GOPROXY=off", "GOFLAGS=-mod=vendor", "GOOS=windows",
		"GIT_CONFIG_NOSYSTEM=1"}
	origin := filepath.Join(dir, "origin.git")
	gitIn(t, dir, env, "init", "-q", "--bare", origin)
	author := filepath.Join(dir, "author")
	gitIn(t, dir, env, "init", "-q", author)
	api := filepath.Join(author, "services", "api")
	if err := os.MkdirAll(api, 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(text string) {
		if err := os.WriteFile(filepath.Join(api, "sandbox.yaml"), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("version: 1\nname: api\nagent: shell\ndriver: docker\nenv: {MODE: test}\nnetwork:\n  agentHosts: false\n  allow:\n    - registry.npmjs.org\n")
	gitIn(t, author, env, "add", "-A")
	gitIn(t, author, env, "commit", "-q", "-m", "base")
	base := gitIn(t, author, env, "rev-parse", "HEAD")
	write("version: 1\nname: api\nagent: shell\ndriver: docker\nenv: {MODE: test}\nnetwork:\n  agentHosts: false\n  allow:\n    - registry.npmjs.org\n    - api.example.com\nmounts:\n  - ./fixtures:/fixtures:ro\n")
	if err := os.MkdirAll(filepath.Join(api, "fixtures"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(api, "fixtures", "a.json"), []byte("{}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	gitIn(t, author, env, "add", "-A")
	gitIn(t, author, env, "commit", "-q", "-m", "widen")
	gitIn(t, author, env, "push", "-q", origin, "HEAD:refs/heads/main")
	ws := filepath.Join(dir, "ws")
	gitIn(t, dir, env, "clone", "-q", "--depth=1", "file://"+origin, ws)
	if exec.Command("git", "-C", ws, "cat-file", "-e", base+"^{commit}").Run() == nil {
		t.Fatal("the shallow clone has the base commit; the test would not show that the action fetches it")
	}
	gh := map[string]string{"github.event.pull_request.base.sha": base}

	for _, tc := range []struct{ name, wd, files string }{
		{"subdirectory", "services/api", ""},
		{"top", ".", "services/api/sandbox.yaml"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			log, summary, outputs, ok := runAction(t, ws, map[string]string{"working-directory": tc.wd, "files": tc.files}, gh, env)
			if !ok {
				t.Fatalf("the action failed:\n%s", log)
			}
			if !strings.Contains(outputs, "changes=true\n") {
				t.Errorf("outputs %q, want changes=true", outputs)
			}
			// Exactly the two changes, in the log and in the summary.
			diff := regexp.MustCompile(`(?m)^ {6}[-+~] .*$`)
			wantDiffs := []string{
				`+ mounts: "` + filepath.Join(ws, "services", "api", "fixtures") + `:/fixtures:ro" # forces replacement`,
				`+ network.allow: "api.example.com" # widens egress`,
			}
			space := regexp.MustCompile(`\s+`)
			wantWidens := []string{
				"    ! host path " + filepath.Join(ws, "services", "api", "fixtures") + " mounted at /fixtures, read-only (from services/api/sandbox.yaml:12:5)",
				"    ! egress to api.example.com (from services/api/sandbox.yaml:10:7)",
			}
			for name, text := range map[string]string{"log": log, "summary": summary} {
				got := diff.FindAllString(text, -1)
				for i := range got {
					got[i] = space.ReplaceAllString(strings.TrimSpace(got[i]), " ")
				}
				if !slices.Equal(got, wantDiffs) {
					t.Errorf("%s: diff lines\n%s\nwant\n%s\n%s", name, strings.Join(got, "\n"), strings.Join(wantDiffs, "\n"), text)
				}
				for _, w := range wantWidens {
					if !strings.Contains(text, w+"\n") {
						t.Errorf("%s lacks %q:\n%s", name, w, text)
					}
				}
				if !strings.Contains(text, "Change: 0 to create, 0 to update, 1 to replace, 0 to destroy.") {
					t.Errorf("%s lacks the change's count:\n%s", name, text)
				}
			}
			gotAnn := regexp.MustCompile(`(?m)^::(warning|error|notice) .*$`).FindAllString(log, -1)
			wantAnn := []string{
				"::warning file=services/api/sandbox.yaml,line=12,col=5,title=sbx plan%3A widens what the sandbox may do::host path " + filepath.Join(ws, "services", "api", "fixtures") + " mounted at /fixtures, read-only",
				"::warning file=services/api/sandbox.yaml,line=10,col=7,title=sbx plan%3A widens what the sandbox may do::egress to api.example.com",
			}
			if !slices.Equal(gotAnn, wantAnn) {
				t.Errorf("annotations\n%s\nwant\n%s", strings.Join(gotAnn, "\n"), strings.Join(wantAnn, "\n"))
			}
		})
	}

	// A broken file in the subdirectory: each problem annotated on
	// services/api/sandbox.yaml, one without a column at its line.
	t.Run("validate", func(t *testing.T) {
		if err := os.WriteFile(filepath.Join(ws, "services", "api", "sandbox.yaml"), []byte("version: 1\nagent: shell\nnetwork: [\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		log, _, _, ok := runAction(t, ws, map[string]string{"working-directory": "services/api"}, gh, env)
		if ok {
			t.Fatalf("the action passed a broken file:\n%s", log)
		}
		ann := regexp.MustCompile(`(?m)^::error file=services/api/sandbox.yaml,line=\d+,title=sbx validate::YAML syntax error.*$`)
		if !ann.MatchString(log) {
			t.Errorf("no line annotation for a problem without a column:\n%s", log)
		}
		// A problem of the whole file (no line) is annotated on the file.
		big := "version: 1\nagent: shell\n" + strings.Repeat("# padding\n", 120_000)
		if err := os.WriteFile(filepath.Join(ws, "services", "api", "sandbox.yaml"), []byte(big), 0o644); err != nil {
			t.Fatal(err)
		}
		log, _, _, ok = runAction(t, ws, map[string]string{"working-directory": "services/api"}, gh, env)
		want := "::error file=services/api/sandbox.yaml,title=sbx validate::file is larger than"
		if ok || !strings.Contains(log, want) {
			t.Errorf("no file annotation (%q) for a problem without a line:\n%s", want, log)
		}
	})
}
