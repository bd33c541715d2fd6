package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sbxhq/sbx/driver/docker"
	"github.com/sbxhq/sbx/egress"
	"github.com/sbxhq/sbx/internal/dockertest"
)

// TestDockerd plays the user who gives the agent a Docker daemon of its
// own, and the hostile agent who wants the host through it: under gVisor
// the agent builds an image and runs a container with the daemon sbx
// runs as a service; a privileged container with the root bound, the
// host's network and PIDs sees only the service's own files, loopback
// and processes; the daemon lists none of the host's containers, and the
// host's daemon got none of the agent's; an image pull goes through the
// sandbox's policy, which refuses it; filling the daemon's store meets
// the service's memory limit; a runtime that is not there fails the plan
// before anything is made.
func TestDockerd(t *testing.T) {
	env.RequireGVisorRuntime(t)
	image := env.DockerdImage(t)
	e := newPortsEnv(t, "e2e-dockerd", dockertest.GVisorRuntime)
	write := func(runtime string) {
		t.Helper()
		doc := fmt.Sprintf(`version: 1
name: %s
agent: shell
driver: docker
template: %s
docker: {runtime: %s}
network: {agentHosts: false}
resources: {memory: 768m}
services:
  docker:
    image: %s
    dockerd: true
    ports: [2375]
    egress: true
`, e.name, image, runtime, image)
		if err := os.WriteFile(filepath.Join(e.ws, "sandbox.yaml"), []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// A runtime the daemon does not have: the plan says so and makes
	// nothing.
	write("nosuch-" + env.RunID)
	if out := e.run(1, "plan"); !strings.Contains(out, `this Docker daemon has no runtime "nosuch-`+env.RunID+`"`) {
		t.Errorf("plan with a missing runtime:\n%s", out)
	}
	write(dockertest.GVisorRuntime)
	plan := e.run(0, "plan")
	if want := "+ services.docker: \"image " + image + ", ports 2375, its dockerd the sandbox's Docker daemon"; !strings.Contains(plan, want) {
		t.Errorf("the plan does not say %q:\n%s", want, plan)
	}
	e.run(0, "apply", "-y")

	// The agent builds an image (its context sent over the API) and runs
	// it. Its files: busybox and a Dockerfile, in the workspace.
	bb, err := exec.LookPath("busybox")
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(bb)
	if err != nil {
		t.Fatal(err)
	}
	ctx := filepath.Join(e.ws, "inner")
	if err := os.MkdirAll(ctx, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ctx, "busybox"), data, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ctx, "Dockerfile"), []byte("FROM scratch\nCOPY busybox /bin/busybox\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	inner := "sbx-inner-" + env.RunID
	if out, code := e.sbx("shell", "--", "docker", "build", "-q", "-t", inner, "inner"); code != 0 {
		t.Fatalf("docker build in the sandbox: exit %d:\n%s", code, out)
	}
	if out, _ := e.sbx("shell", "--", "docker", "run", "--rm", inner, "/bin/busybox", "echo", "hello-from-inner"); !strings.Contains(out, "hello-from-inner") {
		t.Fatalf("docker run in the sandbox: %q", out)
	}

	// The hostile agent: every privilege its daemon gives, towards the
	// host. A file of the host's, the workspace, and the host daemon's
	// socket are not under the root it binds; its network is the
	// service's loopback; PID 1 is the service's init.
	canary := filepath.Join(t.TempDir(), "host-canary")
	if err := os.WriteFile(canary, []byte("the host's\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	script := fmt.Sprintf(`for p in %s %s/sandbox.yaml /var/run/docker.sock /run/docker.sock; do [ -e "/host$p" ] && echo "REACHED $p"; done
echo "IFACES $(/bin/busybox grep -c : /proc/net/dev) $(/bin/busybox grep -o 'lo:' /proc/net/dev)"
echo "PID1 $(/bin/busybox tr '\0' ' ' < /proc/1/cmdline)"
echo done`, canary, e.ws)
	out, code := e.sbx("shell", "--", "docker", "run", "--rm", "--privileged", "--network", "host", "--pid", "host",
		"-v", "/:/host", inner, "/bin/busybox", "sh", "-c", script)
	if code != 0 || !strings.Contains(out, "done") {
		t.Fatalf("the privileged container: exit %d:\n%s", code, out)
	}
	if strings.Contains(out, "REACHED") {
		t.Errorf("the agent's privileged container reached the host:\n%s", out)
	}
	if !strings.Contains(out, "IFACES 1 lo:") {
		t.Errorf("the privileged container's network interfaces, want loopback alone:\n%s", out)
	}
	if !strings.Contains(out, "PID1 /.sbx/sbx "+egress.ServiceInitVerb) {
		t.Errorf("PID 1 of the privileged container's host PID namespace is not the service's init:\n%s", out)
	}
	// The agent's daemon lists only its own containers; the host's daemon
	// never got the agent's image nor a privileged container.
	list, _ := e.sbx("shell", "--", "docker", "ps", "-a", "--format", "{{.Names}}")
	for _, host := range []string{docker.ContainerName(e.name), docker.EgressName(e.name), env.WebName} {
		if strings.Contains(list, host) {
			t.Errorf("the agent's daemon lists the host's container %s:\n%s", host, list)
		}
	}
	if out, err := exec.Command("docker", "image", "inspect", inner).CombinedOutput(); err == nil {
		t.Errorf("the agent's image is on the host's daemon:\n%s", out)
	}
	ids, _ := exec.Command("docker", "ps", "-aq", "--filter", "label=dev.sbx.sandbox="+e.name).Output()
	for _, id := range strings.Fields(string(ids)) {
		var in []struct {
			Name       string
			HostConfig struct {
				Privileged bool
				Runtime    string
				Binds      []string
			}
		}
		out, _ := exec.Command("docker", "inspect", id).Output()
		if err := json.Unmarshal(out, &in); err != nil || len(in) != 1 {
			t.Fatalf("docker inspect %s: %v", id, err)
		}
		if in[0].HostConfig.Privileged {
			t.Errorf("%s is privileged on the host", in[0].Name)
		}
		if in[0].Name == "/"+docker.ServiceContainer(e.name, "docker") {
			if in[0].HostConfig.Runtime != dockertest.GVisorRuntime {
				t.Errorf("the daemon's container runs under %q", in[0].HostConfig.Runtime)
			}
			for _, b := range in[0].HostConfig.Binds {
				if !strings.HasPrefix(b, env.Binary+":") && !strings.HasPrefix(b, "sbx-"+e.name+"-") {
					t.Errorf("the daemon's container binds %s", b)
				}
			}
		}
	}

	// A pull goes through the sandbox's proxy, whose policy refuses a
	// registry it does not allow (registry.example is reserved: nothing is
	// dialled, the proxy refuses the name).
	if out, code := e.sbx("shell", "--", "docker", "pull", "registry.example:5000/app:1"); code == 0 {
		t.Errorf("a pull from a registry the policy does not allow succeeded:\n%s", out)
	}
	// The proxy writes its decision as it answers: the log may get it
	// just after the pull returned.
	if out, ok := until(func() (string, bool) {
		out := e.run(0, "netlog")
		return out, strings.Contains(out, "deny  CONNECT registry.example:5000")
	}); !ok {
		t.Errorf("the proxy's log has no refused pull:\n%s", out)
	}

	if out := e.run(0, "plan", "--detailed-exitcode"); !strings.Contains(out, "No changes") {
		t.Errorf("plan after the apply:\n%s", out)
	}

	// The hostile agent fills its daemon's store: images and containers
	// live in the service's memory, whose limit holds (the file's 768m:
	// gVisor's kernel, dockerd and 1 GiB written cannot fit).
	svc := docker.ServiceContainer(e.name, "docker")
	if out, code := e.sbx("shell", "--", "docker", "run", "--rm", inner, "/bin/busybox", "dd", "if=/dev/zero", "of=/fill", "bs=1M", "count=1024"); code == 0 {
		t.Errorf("the agent wrote 1 GiB into a daemon limited to 768 MiB:\n%s", out)
	}
	// The agent's client may see its connection end before the daemon
	// notes the kill.
	if state, ok := until(func() (string, bool) {
		out, err := exec.Command("docker", "inspect", "-f", "{{.State.OOMKilled}} {{.RestartCount}}", svc).CombinedOutput()
		return string(out), err == nil && strings.TrimSpace(string(out)) != "false 0"
	}); !ok {
		t.Errorf("the daemon's container was neither killed for memory nor restarted: %q", state)
	}
	e.run(0, "destroy", "-y")
	if left := dockertest.Leftovers(e.name); left != "" {
		t.Errorf("destroy left %s", left)
	}
}

// until calls check until it reports done, for at most a minute, and
// returns what it last saw: a state another process changes, waited on
// by its effect, never a fixed sleep.
func until(check func() (string, bool)) (string, bool) {
	deadline := time.Now().Add(time.Minute)
	for {
		out, done := check()
		if done || time.Now().After(deadline) {
			return out, done
		}
		time.Sleep(100 * time.Millisecond)
	}
}
