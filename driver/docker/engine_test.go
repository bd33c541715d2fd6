package docker

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sbxhq/sbx/driver/runner"
	"github.com/sbxhq/sbx/egress"
	"github.com/sbxhq/sbx/reconcile"
)

func TestDaemonSocket(t *testing.T) {
	withContext := t.TempDir()
	os.WriteFile(filepath.Join(withContext, "config.json"), []byte(`{"currentContext": "remote"}`), 0o600)
	defaultContext := t.TempDir()
	os.WriteFile(filepath.Join(defaultContext, "config.json"), []byte(`{"currentContext": "default"}`), 0o600)
	home := t.TempDir()
	os.MkdirAll(filepath.Join(home, ".docker"), 0o700)
	os.WriteFile(filepath.Join(home, ".docker", "config.json"), []byte(`{"currentContext": "colima"}`), 0o600)
	for _, tc := range []struct {
		name string
		env  map[string]string
		want string
	}{
		{"nothing set", map[string]string{}, defaultSocket},
		{"unix DOCKER_HOST", map[string]string{"DOCKER_HOST": "unix:///run/user/1000/docker.sock"}, "/run/user/1000/docker.sock"},
		{"tcp DOCKER_HOST", map[string]string{"DOCKER_HOST": "tcp://127.0.0.1:2376"}, ""},
		{"ssh DOCKER_HOST", map[string]string{"DOCKER_HOST": "ssh://me@build-box"}, ""},
		{"DOCKER_HOST wins over a context", map[string]string{"DOCKER_HOST": "unix:///x.sock", "DOCKER_CONTEXT": "remote"}, "/x.sock"},
		{"DOCKER_CONTEXT", map[string]string{"DOCKER_CONTEXT": "remote"}, ""},
		{"DOCKER_CONTEXT=default", map[string]string{"DOCKER_CONTEXT": "default", "DOCKER_CONFIG": withContext}, defaultSocket},
		{"docker context use", map[string]string{"DOCKER_CONFIG": withContext}, ""},
		{"docker context use default", map[string]string{"DOCKER_CONFIG": defaultContext}, defaultSocket},
		{"config under HOME", map[string]string{"HOME": home}, ""},
		{"no config file", map[string]string{"DOCKER_CONFIG": t.TempDir()}, defaultSocket},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := daemonSocket(func(k string) string { return tc.env[k] }); got != tc.want {
				t.Errorf("daemonSocket = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestEngineThroughDialStdio: with a context chosen, requests and the
// proxy's control channel go through `docker system dial-stdio`, which
// resolves it as the CLI does.
func TestEngineThroughDialStdio(t *testing.T) {
	b := newBox(t, "e2e-dialstdio")
	b.apply(b.spec("network:\n  allow: [a.example]\n"))

	cfg := t.TempDir()
	create := exec.Command("docker", "context", "create", "sbx-e2e", "--docker", "host=unix://"+defaultSocket)
	create.Env = append(os.Environ(), "DOCKER_CONFIG="+cfg)
	if out, err := create.CombinedOutput(); err != nil {
		t.Fatalf("docker context create: %v: %s", err, out)
	}
	var trace strings.Builder
	r := &runner.Runner{Env: append(os.Environ(), "DOCKER_CONFIG="+cfg, "DOCKER_CONTEXT=sbx-e2e"), Trace: &trace}
	e := &engine{run: r, docker: "docker"}
	if got := daemonSocket(r.Getenv); got != "" {
		t.Fatalf("daemonSocket = %q: the test would not use dial-stdio", got)
	}
	in, err := e.inspectContainer(context.Background(), ContainerName(b.name))
	if err != nil || in == nil || !in.State.Running {
		t.Fatalf("inspect through dial-stdio: %+v, %v", in, err)
	}
	if in, err := e.inspectContainer(context.Background(), "sbx-e2e-no-such-container"); in != nil || err != nil {
		t.Errorf("a missing container: %+v, %v", in, err)
	}
	rep, err := e.control(context.Background(), EgressName(b.name), egress.ControlRequest{Op: "policy"})
	if err != nil || rep.Policy == nil || strings.Join(rep.Policy.Allow, ",") != "a.example" {
		t.Fatalf("control through dial-stdio: %+v, %v", rep, err)
	}
	if !strings.Contains(trace.String(), "(policy)") {
		t.Errorf("the trace does not show the control request:\n%s", trace.String())
	}
}

// TestEngineErrors: the daemon's refusals come back with its message.
func TestEngineErrors(t *testing.T) {
	env.Require(t)
	e := &engine{run: &runner.Runner{}, docker: "docker"}
	err := e.kill(context.Background(), "sbx-e2e-no-such-container", "HUP")
	if !notFound(err) || !strings.Contains(err.Error(), "sbx-e2e-no-such-container") {
		t.Errorf("kill of a missing container: %v", err)
	}
	if _, err := e.control(context.Background(), "sbx-e2e-no-such-container", egress.ControlRequest{Op: "policy"}); !notFound(err) {
		t.Errorf("control of a missing container: %v", err)
	}
	if ok, err := e.imageExists(context.Background(), "sbx-e2e-no-such-image:1"); ok || err != nil {
		t.Errorf("a missing image: %v, %v", ok, err)
	}
	if ok, err := e.imageExists(context.Background(), env.Image); !ok || err != nil {
		t.Errorf("the test image: %v, %v", ok, err)
	}
	// A daemon dial-stdio cannot reach (nothing listens on loopback port
	// 9): the CLI's own words reach the error.
	far := &engine{run: &runner.Runner{Env: append(os.Environ(), "DOCKER_HOST=tcp://127.0.0.1:9")}, docker: "docker"}
	_, err = far.inspectContainer(context.Background(), ContainerName("e2e-unreachable"))
	if err == nil || !strings.Contains(err.Error(), "docker system dial-stdio: ") || !strings.Contains(err.Error(), "127.0.0.1:9") {
		t.Errorf("an unreachable daemon through dial-stdio: %v", err)
	}
}

// TestPolicyWithoutControl: a stopped proxy gets the policy file, which
// it loads when it starts; a proxy made by an earlier sbx (no control
// channel) is read through its file and changed by file and SIGHUP, in
// place.
func TestPolicyWithoutControl(t *testing.T) {
	b := newBox(t, "e2e-nocontrol")
	base := "network:\n  blockCIDRs: [127.0.0.0/8]\n"
	b.apply(b.spec(base))
	eg := EgressName(b.name)
	docker := func(args ...string) string {
		t.Helper()
		out, err := exec.Command("docker", args...).CombinedOutput()
		if err != nil {
			t.Fatalf("docker %s: %v: %s", strings.Join(args, " "), err, out)
		}
		return strings.TrimSpace(string(out))
	}

	docker("stop", "--time", "1", eg)
	live, _ := b.observe()
	calls, err := b.d.policyCalls(b.spec(base+"  allow: [stopped.example]\n"), live[b.name])
	if err != nil {
		t.Fatal(err)
	}
	if len(calls) != 1 || !strings.HasPrefix(calls[0].Desc, "write /policy/policy.json") {
		t.Fatalf("calls for a stopped proxy: %+v", calls)
	}
	if err := calls[0].Run(context.Background()); err != nil {
		t.Fatalf("setting the policy of a stopped proxy: %v", err)
	}
	docker("start", eg)
	if pol, _, err := b.d.readPolicy(context.Background(), b.name); err != nil || pol == nil || strings.Join(pol.Allow, ",") != "stopped.example" {
		t.Fatalf("after the start: %+v, %v", pol, err)
	}

	// The proxy as an earlier sbx made it: no open stdin, no --control.
	image := docker("inspect", "-f", "{{.Config.Image}}", eg)
	docker("rm", "-f", eg)
	args := []string{"create", "--name", eg}
	for k, v := range labels(b.name, "egress") {
		args = append(args, "--label", k+"="+v)
	}
	args = append(args, "--restart", "unless-stopped",
		"-v", volumeName(b.name, "sock")+":"+socketDir, "-v", volumeName(b.name, "policy")+":/policy",
		image, "__egress-proxy", "--policy", policyPath, "--listen", "unix:"+socketPath)
	docker(args...)
	docker("start", eg)
	if err := reconcile.Converged(b.plan(b.spec(base + "  allow: [stopped.example]\n"))); err != nil {
		t.Errorf("an earlier sbx's proxy, read through its file: %v", err)
	}
	id := b.containerID(ContainerName(b.name))
	p := b.apply(b.spec(base + "  allow: [" + env.WebIP + "]\n"))
	if c := p.Sandboxes[0]; c.Action != reconcile.ActionUpdate || b.containerID(ContainerName(b.name)) != id {
		t.Errorf("allow-list change with an earlier sbx's proxy: action %s", c.Action)
	}
	if out := b.proxyGet(env.WebIP + ":8080"); !strings.Contains(out, "hello-from-web") {
		t.Errorf("after file and SIGHUP: %q", out)
	}
}

// TestEgressRepaired: a sandbox whose proxy is gone is planned as an
// update that recreates it (not a replace, not an error at apply), and
// the same sandbox reaches the network through the new one.
func TestEgressRepaired(t *testing.T) {
	b := newBox(t, "e2e-repair")
	sp := b.spec("network:\n  blockCIDRs: [127.0.0.0/8]\n  allow: [" + env.WebIP + "]\n")
	b.apply(sp)
	id := b.containerID(ContainerName(b.name))
	if out, err := exec.Command("docker", "rm", "-f", EgressName(b.name)).CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	p := b.apply(sp)
	c := p.Sandboxes[0]
	if c.Action != reconcile.ActionUpdate || len(c.Steps) == 0 || c.Steps[0].Kind != reconcile.StepRepair {
		t.Fatalf("plan with the proxy gone: %s %+v", c.Action, c.Steps)
	}
	if b.containerID(ContainerName(b.name)) != id {
		t.Error("the sandbox was replaced")
	}
	if out := b.proxyGet(env.WebIP + ":8080"); !strings.Contains(out, "hello-from-web") {
		t.Errorf("through the recreated proxy: %q", out)
	}
}
