package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/sbxhq/sbx/checkpoint"
	"github.com/sbxhq/sbx/driver"
	"github.com/sbxhq/sbx/driver/docker"
)

// The lifecycle verbs and checkpoints end to end: the static sbx binary as
// a user runs it (loopEnv), the docker driver on a real daemon.

// lifecycleFile writes sandbox.yaml; template is a YAML value.
func (e *loopEnv) lifecycleFile(template string) {
	e.t.Helper()
	doc := fmt.Sprintf(`version: 1
name: %s
agent: shell
driver: docker
template: %s
secrets:
  GITHUB_TOKEN: {env: GH_TOKEN}
network: {agentHosts: false, allow: [allowed.invalid]}
`, e.name, template)
	if err := os.WriteFile(filepath.Join(e.ws, "sandbox.yaml"), []byte(doc), 0o644); err != nil {
		e.t.Fatal(err)
	}
}

// must runs sbx and fails the test unless it exits 0.
func (e *loopEnv) must(args ...string) string {
	e.t.Helper()
	out, code := e.sbx(args...)
	if code != 0 {
		e.t.Fatalf("sbx %s: exit %d\n%s", strings.Join(args, " "), code, out)
	}
	return out
}

// restore applies a file that names a checkpoint where another template
// was approved: a widening (another filesystem than the template's), so
// apply -y alone refuses it.
func (e *loopEnv) restore() {
	e.t.Helper()
	if out, code := e.sbx("apply", "-y"); code == 0 || !strings.Contains(out, "! template from checkpoint") {
		e.t.Fatalf("apply -y of a restore without approval: exit %d\n%s", code, out)
	}
	e.must("apply", "-y", "--approve-widening")
}

// running reports whether a container runs, per docker inspect.
func running(t *testing.T, name string) bool {
	t.Helper()
	out, err := exec.Command("docker", "inspect", "-f", "{{.State.Running}}", name).Output()
	if err != nil {
		t.Fatalf("docker inspect %s: %v", name, err)
	}
	return strings.TrimSpace(string(out)) == "true"
}

// checkpointName names a checkpoint for this run and removes its image
// when the test ends.
func checkpointName(t *testing.T, base string) string {
	name := env.Uniq(base)
	t.Cleanup(func() { exec.Command("docker", "rmi", "-f", checkpoint.Ref(name)).Run() })
	return name
}

// TestStopStart: stop stops both containers and keeps what is inside; a
// stopped sandbox is a change (plan shows its status) that apply undoes;
// shell and netlog say it is stopped; start starts it; ls shows each state.
func TestStopStart(t *testing.T) {
	e := newLoopEnv(t, "e2e-stop")
	e.lifecycleFile(env.Image)
	e.must("apply", "-y")
	e.must("shell", "--", "sh", "-c", "echo kept > /inside")

	out := e.must("stop", "-v")
	for _, want := range []string{`[1/1] stop sandbox "` + e.name + `"`, `Stopped sandbox "` + e.name + `"; its containers are stopped, their filesystems kept: what was installed inside stays.`, "'sbx plan' shows it as a change"} {
		if !strings.Contains(out, want) {
			t.Errorf("stop output lacks %q:\n%s", want, out)
		}
	}
	for _, c := range []string{docker.ContainerName(e.name), docker.EgressName(e.name)} {
		if running(t, c) {
			t.Errorf("%s still runs after sbx stop", c)
		}
	}
	if out := e.must("stop"); !strings.Contains(out, "is already stopped") {
		t.Errorf("second stop: %s", out)
	}

	out, code := e.sbx("plan", "--detailed-exitcode")
	if code != 2 || !strings.Contains(out, "status:") || !strings.Contains(out, `→ "running"`) {
		t.Errorf("plan of a stopped sandbox: exit %d, want 2 and a status change:\n%s", code, out)
	}
	out, code = e.sbx("shell", "--", "true")
	if code == 0 || !strings.Contains(out, "is stopped") || !strings.Contains(out, "sbx start") || strings.Contains(out, "is not running") {
		t.Errorf("shell in a stopped sandbox: exit %d:\n%s", code, out)
	}
	out, code = e.sbx("netlog", "--follow")
	if code == 0 || !strings.Contains(out, "is stopped") {
		t.Errorf("netlog --follow of a stopped sandbox: exit %d:\n%s", code, out)
	}
	ls := e.lsJSON()
	if got := ls[e.name]; got["state"] != "changes-pending" || got["status"] != "exited" {
		t.Errorf("ls of the stopped sandbox: %v", got)
	}

	// apply starts it again, as it was.
	e.must("apply", "-y")
	if !running(t, docker.ContainerName(e.name)) || !running(t, docker.EgressName(e.name)) {
		t.Fatal("apply did not start the stopped sandbox")
	}
	if out := e.must("shell", "--", "cat", "/inside"); strings.TrimSpace(out) != "kept" {
		t.Errorf("after stop and apply /inside = %q", out)
	}
	if out, code := e.sbx("plan", "--detailed-exitcode"); code != 0 {
		t.Errorf("plan after apply: exit %d\n%s", code, out)
	}

	// start does the same without planning anything else.
	e.must("stop")
	out = e.must("start", "-v")
	if !strings.Contains(out, `[1/1] start sandbox "`+e.name+`"`) || !strings.Contains(out, "Started sandbox") {
		t.Errorf("start output:\n%s", out)
	}
	if !running(t, docker.ContainerName(e.name)) || !running(t, docker.EgressName(e.name)) {
		t.Fatal("start did not start both containers")
	}
	if out := e.must("start"); !strings.Contains(out, "is already running") {
		t.Errorf("second start: %s", out)
	}
	if got := e.lsJSON()[e.name]; got["state"] != "in-sync" || got["status"] != "running" {
		t.Errorf("ls of the started sandbox: %v", got)
	}
	// The allow-list still holds after a restart of the proxy.
	if out := e.must("shell", "--", "sh", "-c", `printf 'GET http://unlisted.invalid/ HTTP/1.0\r\n\r\n' | nc -w 5 127.0.0.1 3128`); !strings.Contains(out, "403") {
		t.Errorf("egress after start: %q", out)
	}
	e.must("destroy", "-y")
}

// lsJSON runs sbx ls --json --driver docker and returns this state
// directory's sandboxes by name.
func (e *loopEnv) lsJSON() map[string]map[string]any {
	e.t.Helper()
	c := e.cmd("ls", "--json", "--driver", "docker")
	var stderr bytes.Buffer
	c.Stderr = &stderr
	out, err := c.Output()
	if err != nil {
		e.t.Fatalf("sbx ls --json: %v\n%s%s", err, out, stderr.String())
	}
	var doc struct {
		FormatVersion string           `json:"format_version"`
		Sandboxes     []map[string]any `json:"sandboxes"`
	}
	if err := json.Unmarshal(out, &doc); err != nil || doc.FormatVersion != "1" {
		e.t.Fatalf("sbx ls --json: %v: %s", err, out)
	}
	m := map[string]map[string]any{}
	for _, s := range doc.Sandboxes {
		m[s["name"].(string)] = s
	}
	return m
}

// TestCheckpointRestore: a checkpoint keeps what was written inside the
// sandbox and not the workspace or the secrets; destroy, then a file that
// names the checkpoint, brings the sandbox back with that content; an
// export imported on a fresh state directory does the same there.
func TestCheckpointRestore(t *testing.T) {
	e := newLoopEnv(t, "e2e-cp")
	e.lifecycleFile(env.Image)
	e.must("apply", "-y")
	const secret = "ghp_loop_e2e_Secret77" // GH_TOKEN of loopEnv.cmd
	// A secret reaches an exec only: the process may hold it while the
	// checkpoint is taken, and it is still in no layer.
	e.must("shell", "--", "sh", "-c", `echo before > /inside && test "$GITHUB_TOKEN" = `+secret)
	os.WriteFile(filepath.Join(e.ws, "workspace-file"), []byte("host side\n"), 0o644)
	holder := e.cmd("shell", "--", "sh", "-c", `echo ready; exec sleep 300`)
	stdout, err := holder.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { holder.Process.Kill(); holder.Wait() })
	buf := make([]byte, 6)
	if _, err := stdout.Read(buf); err != nil || string(buf) != "ready\n" {
		t.Fatalf("the process holding the secret did not start: %q %v", buf, err)
	}

	name := checkpointName(t, "e2e-before")
	archive := filepath.Join(t.TempDir(), "before.tar")
	out := e.must("checkpoint", "create", name, "-o", archive, "-v")
	if !strings.Contains(out, `Saved checkpoint "`+name+`"`) {
		t.Errorf("create:\n%s", out)
	}
	holder.Process.Kill()
	holder.Wait()
	data, err := os.ReadFile(archive)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(data, []byte(secret)) {
		t.Error("the checkpoint's archive holds the secret")
	}
	if bytes.Contains(data, []byte("host side")) {
		t.Error("the checkpoint's archive holds the workspace")
	}
	if !bytes.Contains(data, []byte("before\n")) {
		t.Error("the checkpoint's archive lacks what was written inside (layers are uncompressed tars)")
	}
	if img, _ := exec.Command("docker", "image", "inspect", checkpoint.Ref(name)).Output(); bytes.Contains(img, []byte(secret)) {
		t.Error("docker image inspect of the checkpoint shows the secret")
	}
	out = e.must("checkpoint", "ls", "--json")
	if !strings.Contains(out, `"name": "`+name+`"`) || !strings.Contains(out, `"present": true`) {
		t.Errorf("checkpoint ls --json:\n%s", out)
	}
	// The size: exact bytes in JSON, human units in the table.
	if !regexp.MustCompile(`"size": [0-9]{4,}`).MatchString(out) {
		t.Errorf("checkpoint ls --json has no size in bytes:\n%s", out)
	}
	out = e.must("checkpoint", "ls")
	if !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + ` .* yes +[0-9]+(\.[0-9])? (KiB|MiB|GiB)$`).MatchString(out) {
		t.Errorf("checkpoint ls shows no size in human units:\n%s", out)
	}

	// Destroy, then restore declaratively.
	e.must("shell", "--", "sh", "-c", "echo after > /inside")
	e.must("destroy", "-y")
	e.lifecycleFile("{checkpoint: " + name + "}")
	out, code := e.sbx("plan", "--detailed-exitcode")
	if code != 2 || !strings.Contains(out, `will be created from checkpoint "`+name+`"`) || !strings.Contains(out, `was saved from sandbox "`+e.name+`"`) {
		t.Errorf("plan of a restore: exit %d\n%s", code, out)
	}
	e.restore()
	if out := e.must("shell", "--", "cat", "/inside"); strings.TrimSpace(out) != "before" {
		t.Errorf("restored /inside = %q, want the content at the checkpoint", out)
	}
	if out := e.must("shell", "--", "sh", "-c", `echo "[$GITHUB_TOKEN]"`); strings.TrimSpace(out) != "["+secret+"]" {
		t.Errorf("the restored sandbox's secret comes from sandbox.yaml: %q", out)
	}
	if out, code := e.sbx("plan", "--detailed-exitcode"); code != 0 {
		t.Errorf("plan after the restore: exit %d\n%s", code, out)
	}
	if out, code := e.sbx("checkpoint", "rm", name); code == 0 || !strings.Contains(out, "in use") {
		t.Errorf("rm of the checkpoint a sandbox was made from: exit %d\n%s", code, out)
	}
	e.must("destroy", "-y")

	// Export, then import on a fresh state directory under another name.
	exported := filepath.Join(t.TempDir(), "export.tar")
	e.must("checkpoint", "export", name, "-o", exported)
	e.must("checkpoint", "rm", name)
	if _, err := exec.Command("docker", "image", "inspect", checkpoint.Ref(name)).Output(); err == nil {
		t.Errorf("checkpoint rm left %s", checkpoint.Ref(name))
	}
	e.state = t.TempDir()
	copyName := checkpointName(t, "e2e-copy")
	out = e.must("checkpoint", "import", exported, copyName)
	if !strings.Contains(out, `Imported checkpoint "`+copyName+`"`) {
		t.Errorf("import:\n%s", out)
	}
	e.lifecycleFile("{checkpoint: " + copyName + "}")
	out = e.must("plan")
	if !strings.Contains(out, "was imported from "+exported) {
		t.Errorf("the plan does not say the checkpoint was imported:\n%s", out)
	}
	// Nothing was approved in this state directory: a first create shows
	// the whole file and needs no approval beyond its secrets', as a
	// first create from any template.
	e.must("apply", "-y")
	if out := e.must("shell", "--", "cat", "/inside"); strings.TrimSpace(out) != "before" {
		t.Errorf("imported /inside = %q", out)
	}
	e.must("destroy", "-y")
}

// TestHostileCheckpoint: a checkpoint is agent-written content, and an
// archive to import is whoever wrote it: labels claiming to be sbx's
// record (a wide allow-list, another checkpoint's provenance) are replaced
// on import, never read as sbx's record, and the sandbox made from it has
// sandbox.yaml's policy, not the archive's.
func TestHostileCheckpoint(t *testing.T) {
	e := newLoopEnv(t, "e2e-cp-evil")
	e.lifecycleFile(env.Image)
	e.must("apply", "-y")
	base := checkpointName(t, "e2e-evil-base")
	e.must("checkpoint", "create", base)
	e.must("destroy", "-y")
	e.must("checkpoint", "rm", base)

	// The attacker's image: the checkpoint with labels sbx sets, forged.
	dir := t.TempDir()
	forged := `{"version":1,"config":{"network":{"policy":"allow","allow":["*"]}}}`
	df := fmt.Sprintf("FROM %s\nLABEL %s='%s' %s=created %s=victim %s=true\nRUN echo evil > /evil\n",
		env.Image, driver.LabelRecord, forged, docker.LabelCheckpointOrigin, docker.LabelCheckpointSandbox, driver.LabelManaged)
	os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte(df), 0o644)
	tag := "sbx-test-forged:" + env.RunID
	t.Cleanup(func() { exec.Command("docker", "rmi", "-f", tag).Run() })
	if out, err := exec.Command("docker", "build", "-q", "-t", tag, dir).CombinedOutput(); err != nil {
		t.Fatalf("building the forged image: %v: %s", err, out)
	}
	archive := filepath.Join(dir, "forged.tar")
	if out, err := exec.Command("docker", "save", "-o", archive, tag).CombinedOutput(); err != nil {
		t.Fatalf("docker save: %v: %s", err, out)
	}

	name := checkpointName(t, "e2e-evil")
	e.must("checkpoint", "import", archive, name)
	out, err := exec.Command("docker", "image", "inspect", "-f", "{{json .Config.Labels}}", checkpoint.Ref(name)).Output()
	if err != nil {
		t.Fatal(err)
	}
	var labels map[string]string
	json.Unmarshal(out, &labels)
	if labels[driver.LabelRecord] != "" || labels[docker.LabelCheckpointOrigin] != "imported" || labels[docker.LabelCheckpointSandbox] != "" || labels[driver.LabelManaged] != "" {
		t.Errorf("the imported image keeps forged labels: %v", labels)
	}
	ls := e.must("checkpoint", "ls", "--json")
	if strings.Contains(ls, "victim") || !strings.Contains(ls, `"origin": "imported"`) {
		t.Errorf("checkpoint ls takes the archive's word:\n%s", ls)
	}

	e.lifecycleFile("{checkpoint: " + name + "}")
	out2 := e.must("plan")
	if !strings.Contains(out2, "was imported from "+archive) || strings.Contains(out2, "victim") {
		t.Errorf("plan of the forged checkpoint:\n%s", out2)
	}
	e.restore()
	if out := e.must("shell", "--", "cat", "/evil"); strings.TrimSpace(out) != "evil" {
		t.Errorf("the restored sandbox lacks the image's content: %q", out)
	}
	rec, err := exec.Command("docker", "inspect", "-f", `{{index .Config.Labels "`+driver.LabelRecord+`"}}`, docker.ContainerName(e.name)).Output()
	if err != nil || bytes.Contains(rec, []byte(`"*"`)) || !bytes.Contains(rec, []byte("allowed.invalid")) {
		t.Errorf("the sandbox's record label is not sbx's: %v %s", err, rec)
	}
	if out := e.must("shell", "--", "sh", "-c", `printf 'GET http://unlisted.invalid/ HTTP/1.0\r\n\r\n' | nc -w 5 127.0.0.1 3128`); !strings.Contains(out, "403") {
		t.Errorf("the forged policy took effect: %q", out)
	}
	e.must("destroy", "-y")
}

// TestHostileCheckpointConfig plays the author of an archive to import who
// sets, in the image's configuration, what Docker applies to a container
// made from the image: root as the user (which also kept apply from ever
// converging), a preloaded library, a health check, volumes (anonymous
// volumes on the host), an entrypoint and command, onbuild triggers,
// ports, a stop signal, and sbx's own labels. After the import the image
// has none of it, and a sandbox made from it converges: plan after apply
// shows no change. Under runc and runsc.
func TestHostileCheckpointConfig(t *testing.T) {
	env.Require(t)
	for _, rt := range []string{"runc", "runsc"} {
		t.Run(rt, func(t *testing.T) {
			if rt == "runsc" {
				env.RequireRunsc(t)
			}
			hostileCheckpointConfig(t, rt)
		})
	}
}

func hostileCheckpointConfig(t *testing.T, runtime string) {
	e := newLoopEnv(t, "e2e-cp-cfg")
	dir := t.TempDir()
	df := fmt.Sprintf(`FROM %s
RUN echo payload > /payload
USER 0:0
ENV LD_PRELOAD=/evil.so BASH_ENV=/evil.sh PATH=/bin:/usr/bin:/sbin
HEALTHCHECK --interval=1s CMD touch /health-ran
VOLUME /evil-volume
ENTRYPOINT ["/bin/sh", "-c"]
CMD ["touch /entrypoint-ran; sleep 1000"]
ONBUILD RUN touch /onbuild-ran
EXPOSE 22/tcp
STOPSIGNAL SIGCONT
LABEL %s=true %s=victim %s='{"version":1}' org.example.owner=evil
WORKDIR /evil-workdir
`, env.Image, driver.LabelManaged, driver.LabelSandbox, driver.LabelRecord)
	os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte(df), 0o644)
	tag := "sbx-test-cfg:" + env.RunID + "-" + runtime
	t.Cleanup(func() { exec.Command("docker", "rmi", "-f", tag).Run() })
	if out, err := exec.Command("docker", "build", "-q", "-t", tag, dir).CombinedOutput(); err != nil {
		t.Fatalf("building the hostile image: %v: %s", err, out)
	}
	archive := filepath.Join(dir, "hostile.tar")
	if out, err := exec.Command("docker", "save", "-o", archive, tag).CombinedOutput(); err != nil {
		t.Fatalf("docker save: %v: %s", err, out)
	}

	name := checkpointName(t, "e2e-cfg-"+runtime)
	doc := fmt.Sprintf("version: 1\nname: %s\nagent: shell\ndriver: docker\ntemplate: {checkpoint: %s}\nnetwork: {agentHosts: false}\n", e.name, name)
	if runtime != "runc" { // runc is the default
		doc += "docker: {runtime: " + runtime + "}\n"
	}
	if err := os.WriteFile(filepath.Join(e.ws, "sandbox.yaml"), []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	e.must("checkpoint", "import", archive, name)
	out, err := exec.Command("docker", "image", "inspect", "-f", "{{json .Config}}", checkpoint.Ref(name)).Output()
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		User, WorkingDir, StopSignal  string
		Env, Entrypoint, Cmd, OnBuild []string
		Healthcheck                   any
		Volumes, ExposedPorts         map[string]any
		Labels                        map[string]string
	}
	if err := json.Unmarshal(out, &cfg); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	want := cfg
	want.User, want.StopSignal, want.Entrypoint, want.Cmd, want.OnBuild, want.Healthcheck, want.Volumes, want.ExposedPorts = "", "", nil, nil, nil, nil, nil, nil
	want.Env = []string{"PATH=/bin:/usr/bin:/sbin"}
	want.WorkingDir = "/evil-workdir"
	want.Labels = map[string]string{}
	for k, v := range cfg.Labels {
		if k == docker.LabelCheckpoint || k == docker.LabelCheckpointOrigin || k == docker.LabelCheckpointCreated {
			want.Labels[k] = v
		}
	}
	if diff := cmp.Diff(want, cfg); diff != "" {
		t.Errorf("docker image inspect of the imported checkpoint keeps the archive's configuration (-want +got):\n%s", diff)
	}

	e.must("apply", "-y")
	if out, code := e.sbx("plan", "--detailed-exitcode"); code != 0 {
		t.Errorf("plan after apply of a sandbox from the imported checkpoint: exit %d, want 0 (it converges)\n%s", code, out)
	}
	if out := e.must("shell", "--", "cat", "/payload"); strings.TrimSpace(out) != "payload" {
		t.Errorf("the sandbox lacks the image's files: %q", out)
	}
	if out := e.must("shell", "--", "sh", "-c", "id -u; echo ${LD_PRELOAD-unset}"); !strings.HasSuffix(strings.TrimSpace(out), "unset") {
		t.Errorf("the sandbox has the archive's env: %q", out)
	}
	in, err := exec.Command("docker", "inspect", "-f", "{{json .Config.Healthcheck}} {{len .Mounts}} {{json .Config.User}}", docker.ContainerName(e.name)).Output()
	if err != nil {
		t.Fatal(err)
	}
	if f := strings.Fields(string(in)); len(f) != 3 || f[0] != "null" || f[2] != `""` {
		t.Errorf("the sandbox container has the archive's health check or user: %s", in)
	}
	vols, _ := exec.Command("docker", "inspect", "-f", `{{range .Mounts}}{{if eq .Type "volume"}}{{.Destination}} {{end}}{{end}}`, docker.ContainerName(e.name)).Output()
	if strings.Contains(string(vols), "/evil-volume") {
		t.Errorf("the sandbox has the archive's volume: %s", vols)
	}
	e.must("destroy", "-y")
}
