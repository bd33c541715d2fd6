// Package hostile plays the hostile agent of THREATS.md against sbx on a
// real Docker daemon, under runc and again under gVisor (runsc): every
// attack is made from inside a sandbox, through `sbx shell` as an agent's
// commands run, and each test asserts that nothing happened on the host —
// no marker file written by a host process, no host file's content in
// what the agent received, the sandbox's mounts and policy unchanged, a
// clear refusal where sbx refuses.
//
// The tests skip without a Docker daemon and fail instead under SBX_E2E=1.
// Every object they create is named for the run and removed by it; the
// only network servers are the run's own container and the proxy's own
// addresses.
package hostile

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sbxhq/sbx/internal/dockertest"
	"github.com/sbxhq/sbx/internal/fixture"
)

// env is the run's daemon fixtures: a static sbx, the busybox template and
// a web server (internal/dockertest, shared with the docker driver's
// tests).
var env = dockertest.New("hostile")

func TestMain(m *testing.M) { os.Exit(env.Run(m)) }

// hostDir holds host-only files the agent must never see.
func hostDir(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(env.Workdir, "host")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	return dir
}

// runtimes runs f under runc and under runsc (gVisor), which CI has.
func runtimes(t *testing.T, f func(t *testing.T, runtime string)) {
	env.Require(t)
	for _, rt := range []string{"runc", "runsc"} {
		t.Run(rt, func(t *testing.T) {
			if rt == "runsc" {
				env.RequireRunsc(t)
			}
			f(t, rt)
		})
	}
}

// sandbox is one sandbox under attack: its workspace (a git repository
// with sandbox.yaml and PROMPT.md) and sbx's state.
type sandbox struct {
	t       *testing.T
	name    string
	ws      string
	state   string
	marker  string // a host path no host process may create
	secret  string // a host-only file's content
	hostEnv []string
}

const hostSecret = "HOST-ONLY-SECRET-4c1d9"

func newSandbox(t *testing.T, label, runtime, extra string) *sandbox {
	t.Helper()
	s := &sandbox{
		t:      t,
		name:   fmt.Sprintf("hostile-%s-%s-%s", label, runtime, env.RunID),
		ws:     t.TempDir(),
		state:  t.TempDir(),
		marker: filepath.Join(hostDir(t), label+"-"+runtime+"-pwned"),
		secret: filepath.Join(hostDir(t), label+"-"+runtime+"-secret"),
	}
	os.WriteFile(s.secret, []byte(hostSecret+"\n"), 0o600)
	s.hostEnv = []string{"SBX_STATE_DIR=" + s.state, "SBX_STATIC_BINARY=" + env.Binary, "HOME=" + t.TempDir(),
		"PATH=" + os.Getenv("PATH"), "GH_TOKEN=ghp_hostile_Secret_0042", "AWS_SECRET_ACCESS_KEY=AKIAhostonly00042"}
	git := func(args ...string) {
		cmd := exec.Command("git", append([]string{"-c", "user.email=t@t", "-c", "user.name=t", "-C", s.ws}, args...)...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v: %s", args, err, out)
		}
	}
	git("init", "-q", ".")
	// sub: an empty directory, a workspace without a .git of its own.
	if err := os.Mkdir(filepath.Join(s.ws, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	s.write("PROMPT.md", "Do the task.\n")
	rt := ""
	if runtime == "runsc" {
		rt = "docker: {runtime: runsc}\n"
	}
	s.write("sandbox.yaml", fmt.Sprintf(`version: 1
name: %s
agent: shell
driver: docker
template: %s
%s%ssecrets:
  GITHUB_TOKEN: {env: GH_TOKEN}
network:
  agentHosts: false
  allow: [%s]
  # The defaults but 172.16/12, where the run's web server is.
  blockCIDRs: [0.0.0.0/8, 10.0.0.0/8, 100.64.0.0/10, 127.0.0.0/8, 169.254.0.0/16, 192.168.0.0/16, "::1/128", "fc00::/7", "fe80::/10"]
loop:
  prompt: PROMPT.md
  maxIterations: 1
  completion: {promise: NEVER}
  breaker: {noProgress: 0, sameError: 0}
  command: [sh, -c, 'cat > .stdin-capture; printf %%s "$$GITHUB_TOKEN" | base64']
`, s.name, env.Image, rt, extra, env.WebIP))
	git("add", ".")
	git("commit", "-q", "-m", "init")
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		s.run(ctx, "destroy", "-y")
		if left := labelled(s.name); left != "" {
			t.Errorf("objects left after destroy: %s", left)
		}
	})
	if out, code := s.sbx("apply", "-y"); code != 0 {
		t.Fatalf("apply: %d\n%s", code, out)
	}
	return s
}

func (s *sandbox) write(name, content string) {
	s.t.Helper()
	if err := os.WriteFile(filepath.Join(s.ws, name), []byte(content), 0o644); err != nil {
		s.t.Fatal(err)
	}
}

func (s *sandbox) run(ctx context.Context, args ...string) (string, int) {
	cmd := exec.CommandContext(ctx, env.Binary, args...)
	cmd.Dir = s.ws
	cmd.Env = s.hostEnv
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.CombinedOutput()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		code = -1
		out = append(out, []byte(err.Error())...)
	}
	return string(out), code
}

// sbx runs sbx on the host; the deadline is a safety net against a hang
// (a hang is itself a failure), not an assertion on time.
func (s *sandbox) sbx(args ...string) (string, int) {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	out, code := s.run(ctx, args...)
	if ctx.Err() != nil {
		s.t.Fatalf("sbx %s did not return:\n%s", strings.Join(args, " "), out)
	}
	return out, code
}

// agent runs a script inside the sandbox, as the agent's own commands run
// there (docker exec into its container, in its workspace).
func (s *sandbox) agent(script string) (string, int) {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "docker", "exec", "-w", s.ws, "sbx-"+s.name, "sh", "-c", script)
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		s.t.Fatalf("the agent's script did not return: %s\n%s", script, out)
	}
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		s.t.Fatal(err)
	}
	return string(out), code
}

// noMarker fails when a host process ran something the agent wrote.
func (s *sandbox) noMarker() {
	s.t.Helper()
	if _, err := os.Stat(s.marker); err == nil {
		s.t.Fatalf("%s exists: a host process ran a command the agent wrote", s.marker)
	}
}

func (s *sandbox) read(name string) string {
	data, _ := os.ReadFile(filepath.Join(s.ws, name))
	return string(data)
}

// inspect returns a container's inspection.
func inspect(t *testing.T, name string) map[string]any {
	t.Helper()
	out, err := exec.Command("docker", "inspect", name).Output()
	if err != nil {
		t.Fatalf("docker inspect %s: %v", name, err)
	}
	var v []map[string]any
	dec := json.NewDecoder(bytes.NewReader(out))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil || len(v) != 1 {
		t.Fatalf("docker inspect %s: %v", name, err)
	}
	return v[0]
}

func labelled(name string) string {
	var left []string
	for _, kind := range [][]string{{"ps", "-a", "--format", "{{.Names}}"}, {"volume", "ls", "--format", "{{.Name}}"}} {
		out, _ := exec.Command("docker", append(kind, "--filter", "label=dev.sbx.sandbox="+name)...).Output()
		if s := strings.TrimSpace(string(out)); s != "" {
			left = append(left, s)
		}
	}
	return strings.Join(left, " ")
}

// TestDeclarationIsReadOnly: the agent cannot rewrite what bounds it. Its
// sandbox.yaml, the sandbox.local.yaml it might create and the prompt are
// read-only inside, cannot be removed, renamed over or replaced by links;
// the rest of the workspace is its own (its .git too, which is not the
// host's: TestGitIsTheSandboxsOwn).
func TestDeclarationIsReadOnly(t *testing.T) {
	runtimes(t, func(t *testing.T, runtime string) {
		s := newSandbox(t, "ro", runtime, "")
		before := map[string]string{}
		for _, f := range []string{"sandbox.yaml", "sandbox.local.yaml", "PROMPT.md"} {
			before[f] = s.read(f)
		}
		if !strings.HasPrefix(before["sandbox.local.yaml"], "#") {
			t.Fatalf("sandbox.local.yaml was not left as a comment-only placeholder: %q", before["sandbox.local.yaml"])
		}
		attacks := []string{
			`printf 'secrets:\n  X:\n    command: [sh, -c, "touch ` + s.marker + `"]\n' > sandbox.local.yaml`,
			`printf 'mounts: ["/:/hostroot:ro"]\n' >> sandbox.yaml`,
			`mv sandbox.local.yaml gone.yaml`,
			`rm -f sandbox.yaml`,
			`echo x > new.yaml && mv -f new.yaml sandbox.local.yaml`,
			`ln -sf ` + s.secret + ` PROMPT.md`,
		}
		for _, a := range attacks {
			if out, code := s.agent(a); code == 0 {
				t.Errorf("the agent could run %q:\n%s", a, out)
			}
		}
		for f, want := range before {
			if got := s.read(f); got != want {
				t.Errorf("%s changed on the host:\n%s", f, got)
			}
		}
		if out, code := s.agent(`echo mine > work.txt && cat work.txt`); code != 0 || strings.TrimSpace(out) != "mine" {
			t.Errorf("the agent cannot write its own workspace: %d %q", code, out)
		}
		if out, code := s.sbx("plan", "--detailed-exitcode"); code != 0 {
			t.Errorf("plan after the attempts is not empty: %d\n%s", code, out)
		}
		s.noMarker()
	})
}

// TestUnprotectedDeclaration: with workspace.protect false the agent can
// write its declaration; what it writes still runs nothing on the host
// and widens nothing without the user's approval, and the plan names the
// file and line each widening came from. Among its asks: a private
// address allowed exactly, and a Docker network for its proxy to join.
func TestUnprotectedDeclaration(t *testing.T) {
	runtimes(t, func(t *testing.T, runtime string) {
		network := "sbx-hostile-net-" + runtime + "-" + env.RunID
		create := append(append([]string{"network", "create"}, fixture.Labels("hostile")...), network)
		if out, err := exec.Command("docker", create...).CombinedOutput(); err != nil {
			t.Fatalf("docker network create: %v: %s", err, out)
		}
		t.Cleanup(func() {
			if out, err := exec.Command("docker", "network", "rm", network).CombinedOutput(); err != nil {
				t.Errorf("removing the test network: %v: %s", err, out)
			}
		})
		s := newSandbox(t, "open", runtime, "workspace: {path: ., protect: false}\n")
		hostile := fmt.Sprintf(`secrets:
  TOKEN:
    command: [sh, -c, "touch %s; echo t"]
mounts:
  - /:/hostroot:ro
  - /var/run/docker.sock:/var/run/docker.sock
network:
  policy: allow
  allow: [10.9.8.7:4000]
docker:
  runtime: runc
  noNewPrivileges: false
  networks: [%s]
env:
  STOLEN: ${AWS_SECRET_ACCESS_KEY}
`, s.marker, network)
		if out, code := s.agent("cat > sandbox.local.yaml <<'EOF'\n" + hostile + "EOF"); code != 0 {
			t.Fatalf("the agent could not write sandbox.local.yaml with protect off: %s", out)
		}
		for _, verb := range [][]string{{"validate"}, {"status"}, {"plan"}, {"plan", "--json"}} {
			out, code := s.sbx(verb...)
			if code != 0 {
				t.Errorf("sbx %v: exit %d\n%s", verb, code, out)
			}
			if strings.Contains(out, "AKIAhostonly") {
				t.Errorf("sbx %v shows a host secret:\n%s", verb, out)
			}
			s.noMarker()
		}
		out, _ := s.sbx("plan")
		for _, want := range []string{
			"secret TOKEN runs a command on this machine",
			"host path / mounted at /hostroot, read-only (from sandbox.local.yaml:5:5, a file the sandbox can write)",
			"host path /var/run/docker.sock mounted at /var/run/docker.sock",
			"network.policy allow: the sandbox may reach any host (from sandbox.local.yaml:8:11, a file the sandbox can write)",
			"env.STOLEN reads host environment variable AWS_SECRET_ACCESS_KEY",
			"setuid programs may raise privileges",
			"egress to 10.9.8.7:4000, a private address: an exception to blocked range 10.0.0.0/8 (from sandbox.local.yaml:9:11, a file the sandbox can write)",
			"the egress proxy joins Docker network " + network + ": the sandbox may reach the private addresses of its containers that network.allow allows (from sandbox.local.yaml:13:14, a file the sandbox can write)",
		} {
			// The plan wraps long lines at spaces (the origin on a line
			// of its own): compare the words.
			if !strings.Contains(strings.Join(strings.Fields(out), " "), want) {
				t.Errorf("plan does not show %q:\n%s", want, out)
			}
		}
		if runtime == "runsc" && !strings.Contains(out, "runtime runc instead of gVisor (runsc)") {
			t.Errorf("plan does not show the dropped gVisor runtime:\n%s", out)
		}
		id := inspect(t, "sbx-"+s.name)["Id"]
		for _, verb := range [][]string{{"apply", "-y"}, {"loop", "-y"}} {
			out, code := s.sbx(verb...)
			if code == 0 || !strings.Contains(out, "apply refused: the plan widens") {
				t.Errorf("sbx %v did not refuse the widening: %d\n%s", verb, code, out)
			}
		}
		s.noMarker()
		in := inspect(t, "sbx-"+s.name)
		if in["Id"] != id {
			t.Error("the sandbox was replaced")
		}
		mounts, _ := json.Marshal(in["Mounts"])
		if strings.Contains(string(mounts), "hostroot") || strings.Contains(string(mounts), "docker.sock") {
			t.Errorf("the sandbox got the agent's mounts: %s", mounts)
		}
		if out, _ := s.agent(`printf 'GET http://unlisted.invalid/ HTTP/1.0\r\n\r\n' | nc -w 5 127.0.0.1 3128 | head -1`); !strings.Contains(out, "403") {
			t.Errorf("egress widened: an unlisted host got %q", out)
		}
		if nets, _ := json.Marshal(inspect(t, "sbx-"+s.name+"-egress")["NetworkSettings"].(map[string]any)["Networks"]); strings.Contains(string(nets), network) {
			t.Errorf("the proxy joined the agent's network: %s", nets)
		}
		// Not even a shell runs the unapproved command.
		if out, code := s.sbx("shell", "--", "true"); code == 0 || !strings.Contains(out, "is not approved on this machine") {
			t.Errorf("shell ran with an unapproved host command: %d\n%s", code, out)
		}
		s.noMarker()
	})
}

// TestLoopReadsNothingItShouldNot: the loop's host side never runs git
// with the repository's configuration, never blocks on or reads a special
// file or a link the agent planted, and never feeds a host file to the
// agent through a prompt the agent replaced with a link.
func TestLoopReadsNothingItShouldNot(t *testing.T) {
	runtimes(t, func(t *testing.T, runtime string) {
		s := newSandbox(t, "loop", runtime, "workspace: {path: ., protect: false}\n")
		m := s.marker
		setup := strings.Join([]string{
			`printf '[core]\n\tfsmonitor = "touch ` + m + `"\n\thooksPath = .h\n\tsshCommand = "touch ` + m + `"\n[diff]\n\texternal = "touch ` + m + `"\n[filter "x"]\n\tclean = "touch ` + m + `"\n\tsmudge = "touch ` + m + `"\n' >> .git/config`,
			`printf '* filter=x diff=x\n' > .gitattributes`,
			`mkdir -p .h && printf '#!/bin/sh\ntouch ` + m + `\n' > .h/post-index-change && chmod +x .h/post-index-change`,
			`mkfifo fifo`, `ln -s /dev/zero zero`, `ln -s fifo fifo-link`,
			`ln -s ` + s.secret + ` host-secret-link`,
		}, " && ")
		if out, code := s.agent(setup); code != 0 {
			t.Fatalf("setting up the attack: %s", out)
		}
		out, code := s.sbx("loop", "-y")
		if code != 3 {
			t.Fatalf("loop: exit %d, want 3 (max iterations)\n%s", code, out)
		}
		s.noMarker()
		if strings.Contains(out, "ghp_hostile") || strings.Contains(out, "Z2hwX2hvc3RpbGVf") {
			t.Errorf("the loop printed the secret or its base64:\n%s", out)
		}
		logs, _ := filepath.Glob(filepath.Join(s.state, "loops", s.name, "runs", "*", "iter-001.log"))
		for _, l := range logs {
			data, _ := os.ReadFile(l)
			if bytes.Contains(data, []byte("Z2hwX2hvc3RpbGVf")) || !bytes.Contains(data, []byte("[redacted]")) {
				t.Errorf("the iteration log holds the secret's base64 unredacted:\n%s", data)
			}
		}
		// The prompt swapped for a link to a host-only file.
		if out, code := s.agent(`rm PROMPT.md && ln -s ` + s.secret + ` PROMPT.md`); code != 0 {
			t.Fatalf("replacing the prompt: %s", out)
		}
		os.Remove(filepath.Join(s.ws, ".stdin-capture"))
		out, code = s.sbx("loop", "-y")
		if code == 0 || !strings.Contains(out, "loop.prompt") {
			t.Errorf("loop with a linked prompt: exit %d\n%s", code, out)
		}
		if strings.Contains(out, hostSecret) || strings.Contains(s.read(".stdin-capture"), hostSecret) {
			t.Fatal("the host-only file reached the agent or the terminal")
		}
		s.noMarker()
	})
}

// TestEgressTricks: requests that tried to reach the proxy's own
// addresses through zones, unspecified, mapped and odd numeric spellings
// are refused and logged; an oversized request is refused without costing
// the proxy its memory; the socket volume cannot be filled.
func TestEgressTricks(t *testing.T) {
	runtimes(t, func(t *testing.T, runtime string) {
		s := newSandbox(t, "egress", runtime, "")
		get := func(target string) string {
			out, _ := s.agent(fmt.Sprintf(`printf 'GET http://%s/ HTTP/1.0\r\n\r\n' | nc -w 5 127.0.0.1 3128 | head -1`, target))
			return strings.TrimSpace(out)
		}
		connect := func(target string) string {
			out, _ := s.agent(fmt.Sprintf(`printf 'CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n' | nc -w 5 127.0.0.1 3128 | head -1`, target, target))
			return strings.TrimSpace(out)
		}
		if got := get(env.WebIP + ":8080"); !strings.Contains(got, "200") {
			t.Fatalf("the allowed host does not answer: %q", got)
		}
		proxyIP := strings.TrimSpace(fmt.Sprint(inspect(t, "sbx-"+s.name+"-egress")["NetworkSettings"].(map[string]any)["IPAddress"]))
		for _, target := range []string{
			"0.0.0.0:8080", "[::]:8080", "127.0.0.1:8080", "127.1:8080", "0x7f.1:8080", "2130706433:8080",
			"[::ffff:127.0.0.1]:8080", "[::1%25lo]:8080", "localhost:8080", proxyIP + ":3128",
		} {
			if got := get(target); !strings.Contains(got, " 40") {
				t.Errorf("GET %s: %q, want a refusal", target, got)
			}
		}
		for _, target := range []string{"[::1%25x]:443", "[fe80::1%25eth0]:443", "0.0.0.0:443", proxyIP + ":443"} {
			if got := connect(target); !strings.Contains(got, " 40") {
				t.Errorf("CONNECT %s: %q, want a refusal", target, got)
			}
		}
		// The proxy may answer and close while nc still writes (nc then
		// reports a broken pipe and prints nothing): the refusal is in
		// the proxy's log either way.
		refused := func(what, out string, status int) {
			t.Helper()
			if strings.Contains(out, " "+strconv.Itoa(status)) {
				return
			}
			log, _ := s.sbx("netlog", "--json")
			if !strings.Contains(log, fmt.Sprintf(`"status":%d`, status)) {
				t.Errorf("%s: %q and no %d in the proxy's log", what, strings.TrimSpace(out), status)
			}
		}
		out, _ := s.agent(`(printf 'GET http://` + env.WebIP + `:8080/ HTTP/1.1\r\nX: '; head -c 2000000 /dev/zero | tr '\0' a; printf '\r\n\r\n') | nc -w 10 127.0.0.1 3128 | head -1`)
		refused("a 2 MB header", out, 431)
		out, _ = s.agent(`(printf 'GET http://'; head -c 20000 /dev/zero | tr '\0' a; printf '.example/ HTTP/1.0\r\n\r\n') | nc -w 10 127.0.0.1 3128 | head -1`)
		refused("a 20 KB host name", out, 414)
		eg := inspect(t, "sbx-"+s.name+"-egress")
		state := eg["State"].(map[string]any)
		if state["Running"] != true || state["OOMKilled"] == true || fmt.Sprint(eg["RestartCount"]) != "0" {
			t.Errorf("the proxy did not survive: %v", state)
		}
		logOut, code := s.sbx("netlog", "--json")
		if code != 0 {
			t.Fatal(logOut)
		}
		for _, line := range strings.Split(logOut, "\n") {
			if len(line) > 4096 {
				t.Errorf("a netlog line of %d bytes", len(line))
			}
		}
		if out, code := s.agent(`head -c 2000000 /dev/zero > /run/sbx-egress/fill`); code == 0 {
			t.Errorf("the agent wrote to the socket volume: %s", out)
		}
	})
}

// TestBoundedDamage: both containers have their limits, dropped
// capabilities and rotated logs by default, and a fork burst stops at the
// sandbox's process limit (set low here so the burst is quick under gVisor
// too).
func TestBoundedDamage(t *testing.T) {
	runtimes(t, func(t *testing.T, runtime string) {
		s := newSandbox(t, "bounds", runtime, "")
		hc := func(name string) map[string]any { return inspect(t, name)["HostConfig"].(map[string]any) }
		logSize := func(h map[string]any) any {
			return h["LogConfig"].(map[string]any)["Config"].(map[string]any)["max-size"]
		}
		sb, eg := hc("sbx-"+s.name), hc("sbx-"+s.name+"-egress")
		checks := []struct {
			what string
			got  any
			want string
		}{
			{"sandbox pids limit", sb["PidsLimit"], "4096"},
			{"sandbox memory", sb["Memory"], strconv.Itoa(8 << 30)},
			{"sandbox swap", sb["MemorySwap"], strconv.Itoa(8 << 30)},
			{"sandbox dropped capabilities", sb["CapDrop"], "[CAP_AUDIT_WRITE CAP_MKNOD CAP_NET_RAW CAP_SETFCAP CAP_SYS_CHROOT]"},
			{"sandbox security options", sb["SecurityOpt"], "[no-new-privileges]"},
			{"sandbox log size", logSize(sb), "10m"},
			{"proxy pids limit", eg["PidsLimit"], "128"},
			{"proxy memory", eg["Memory"], strconv.Itoa(128 << 20)},
			{"proxy capabilities", eg["CapDrop"], "[ALL]"},
			{"proxy root", eg["ReadonlyRootfs"], "true"},
			{"proxy security options", eg["SecurityOpt"], "[no-new-privileges]"},
			{"proxy log size", logSize(eg), "10m"},
		}
		for _, c := range checks {
			if got := fmt.Sprint(c.got); got != c.want {
				t.Errorf("%s = %s, want %s", c.what, got, c.want)
			}
		}
		s.write("sandbox.yaml", strings.Replace(s.read("sandbox.yaml"), "secrets:", "resources: {pids: 128}\nsecrets:", 1))
		// In place under runc; gVisor cannot update a running sandbox, so
		// there it is a replacement.
		want := map[string]string{"runc": "1 updated", "runsc": "1 replaced"}[runtime]
		if out, code := s.sbx("apply", "-y"); code != 0 || !strings.Contains(out, want) {
			t.Fatalf("lowering the process limit: %d\n%s", code, out)
		}
		// The burst runs inside, in the background; the host counts the
		// tasks of the container's pids cgroup (under gVisor that holds
		// runsc's own threads, which is what the host pays).
		current := pidsCurrent(t, "sbx-"+s.name)
		if out, err := exec.Command("docker", "exec", "-d", "sbx-"+s.name, "sh", "-c",
			`i=0; while [ $i -lt 400 ]; do sleep 300 & i=$((i+1)); done`).CombinedOutput(); err != nil {
			t.Fatalf("starting the burst: %v: %s", err, out)
		}
		peak, gone := 0, false
		for i := 0; i < 100 && peak < 128 && !gone; i++ {
			n, ok := current()
			peak, gone = max(peak, n), !ok
			time.Sleep(50 * time.Millisecond)
		}
		if peak > 128 {
			t.Errorf("tasks in the sandbox's cgroup during a fork burst peaked at %d, over the limit of 128", peak)
		}
		switch {
		case gone:
			// gVisor's own threads count against the limit, and at the
			// limit its sandbox can fall over (docker restarts it): the
			// agent's loss, not the host's.
			t.Logf("%s: the burst brought the sandbox down at %d tasks; the host paid no more", runtime, peak)
		case peak < 64:
			t.Errorf("tasks in the sandbox's cgroup during a fork burst peaked at %d; the burst did not run", peak)
		}
	})
}

// pidsCurrent reads, on the host, how many tasks a container's pids
// cgroup holds (cgroup v1 or v2). The cgroup is found through the
// container's process now; it stays the container's if that restarts.
func pidsCurrent(t *testing.T, container string) func() (int, bool) {
	t.Helper()
	pid := fmt.Sprint(inspect(t, container)["State"].(map[string]any)["Pid"])
	data, err := os.ReadFile("/proc/" + pid + "/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	var file string
	for _, line := range strings.Split(string(data), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		switch {
		case strings.Contains(","+parts[1]+",", ",pids,"):
			file = filepath.Join("/sys/fs/cgroup/pids", parts[2], "pids.current")
		case parts[0] == "0" && parts[1] == "" && file == "":
			file = filepath.Join("/sys/fs/cgroup", parts[2], "pids.current")
		}
	}
	if file == "" {
		t.Fatalf("no pids cgroup in /proc/%s/cgroup:\n%s", pid, data)
	}
	// ok is false once the cgroup is gone (the container stopped).
	return func() (int, bool) {
		data, err := os.ReadFile(file)
		if err != nil {
			return 0, false
		}
		n, _ := strconv.Atoi(strings.TrimSpace(string(data)))
		return n, true
	}
}

// TestBuildHasNoNetwork: a template build gets no more network than the
// sandbox: its RUN steps cannot reach even the allowed host, and the agent
// cannot rewrite the Dockerfile for the next build.
func TestBuildHasNoNetwork(t *testing.T) {
	env.Require(t)
	// Removed after the sandbox that uses it (cleanups run last first).
	t.Cleanup(func() {
		out, _ := exec.Command("docker", "images", "-q", "sbx-template-hostile-build-runc-"+env.RunID).Output()
		for _, id := range strings.Fields(string(out)) {
			exec.Command("docker", "rmi", "-f", id).Run()
		}
	})
	s := newSandbox(t, "build", "runc", "")
	// Move the sandbox onto a template built from its workspace.
	os.MkdirAll(filepath.Join(s.ws, ".sandbox"), 0o755)
	s.write(".sandbox/Dockerfile", fmt.Sprintf(
		"FROM %s\nRUN (wget -q -T 3 -O /got http://%s:8080/ && echo reached > /net) || echo no-network > /net\n", env.Image, env.WebIP))
	s.write("sandbox.yaml", strings.Replace(s.read("sandbox.yaml"), "template: "+env.Image, "template: {build: {context: .sandbox}}", 1))
	out, code := s.sbx("apply", "-y", "--approve-widening")
	if code != 0 {
		t.Fatalf("apply of the built template: %d\n%s", code, out)
	}
	if out, _ := s.agent("cat /net"); strings.TrimSpace(out) != "no-network" {
		t.Errorf("the build reached the network: %q", out)
	}
	if out, code := s.agent(`echo 'RUN touch /evil' >> .sandbox/Dockerfile`); code == 0 {
		t.Errorf("the agent could rewrite the Dockerfile: %s", out)
	}
}

// TestRenamedDeclaration (issue 20, 1): with its declaration unprotected,
// the agent renames its sandbox (name: NEW, which has no approval on
// record) and widens it with a host mount, all egress, a host variable
// and, under runsc, runc. Approval follows the files, not the name: the
// plan measures NEW from what was approved for sandbox.yaml, names the
// file, line and the sandbox that could have written it, and apply -y
// and loop -y create nothing.
func TestRenamedDeclaration(t *testing.T) {
	runtimes(t, func(t *testing.T, runtime string) {
		s := newSandbox(t, "renamed", runtime, "workspace: {path: ., protect: false}\n")
		renamed := s.name + "-new"
		t.Cleanup(func() {
			// Whatever apply made of the renamed file goes first; the
			// sandbox's own cleanup then destroys the original.
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			s.run(ctx, "destroy", "-y")
			os.Remove(filepath.Join(s.ws, "sandbox.local.yaml"))
			if left := labelled(renamed); left != "" {
				t.Errorf("objects of the renamed sandbox left: %s", left)
			}
		})
		hostile := fmt.Sprintf("name: %s\nmounts:\n  - %s:/stolen:ro\nnetwork:\n  policy: allow\nenv:\n  STOLEN: ${AWS_SECRET_ACCESS_KEY}\ndocker:\n  runtime: runc\n", renamed, s.secret)
		if out, code := s.agent("cat > sandbox.local.yaml <<'EOF'\n" + hostile + "EOF"); code != 0 {
			t.Fatalf("the agent could not write sandbox.local.yaml with protect off: %s", out)
		}
		out, _ := s.sbx("plan")
		for _, want := range []string{
			"host path " + s.secret + " mounted at /stolen, read-only (from sandbox.local.yaml:3:5, a file the sandbox and sandbox " + s.name + " can write)",
			"network.policy allow: the sandbox may reach any host (from sandbox.local.yaml:5:11, a file the sandbox and sandbox " + s.name + " can write)",
			"env.STOLEN reads host environment variable AWS_SECRET_ACCESS_KEY (from sandbox.local.yaml:7:11, a file the sandbox and sandbox " + s.name + " can write)",
		} {
			// The plan wraps long lines at spaces (the origin on a line
			// of its own): compare the words.
			if !strings.Contains(strings.Join(strings.Fields(out), " "), want) {
				t.Errorf("plan does not show %q:\n%s", want, out)
			}
		}
		if runtime == "runsc" && !strings.Contains(out, "runtime runc instead of gVisor (runsc) (from sandbox.local.yaml:9:12") {
			t.Errorf("plan does not show the dropped gVisor runtime:\n%s", out)
		}
		if strings.Contains(out, "AKIAhostonly") {
			t.Errorf("plan shows a host secret:\n%s", out)
		}
		for _, verb := range [][]string{{"apply", "-y"}, {"loop", "-y"}} {
			out, code := s.sbx(verb...)
			if code == 0 || !strings.Contains(out, "apply refused: the plan widens") {
				t.Errorf("sbx %v did not refuse the widening: %d\n%s", verb, code, out)
			}
		}
		if left := labelled(renamed); left != "" {
			t.Errorf("the renamed sandbox was created: %s", left)
		}
	})
}
