package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sbxhq/sbx/driver/docker"
	"github.com/sbxhq/sbx/internal/dockertest"
	"github.com/sbxhq/sbx/internal/fixture"
)

// testNetwork makes a user-defined network for the test and a web server
// on it, removed when the test ends, and returns the network's name and
// gateway and the server's name and address on it.
func testNetwork(t *testing.T, name string) (network, gateway, server, serverIP string) {
	t.Helper()
	env.Require(t)
	network, server = env.Uniq("sbx-test-"+name), env.Uniq("sbx-test-"+name+"-web")
	create := append(append([]string{"network", "create"}, fixture.Labels("named-network")...), network)
	if out, err := exec.Command("docker", create...).CombinedOutput(); err != nil {
		t.Fatalf("docker network create: %v: %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("docker", "network", "rm", network).CombinedOutput(); err != nil {
			t.Errorf("removing the test network: %v: %s", err, out)
		}
	})
	t.Cleanup(func() { exec.Command("docker", "rm", "-f", server).Run() })
	ip, err := fixture.WebServerOn(server, env.Image, network)
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("docker", "network", "inspect", "-f", "{{(index .IPAM.Config 0).Gateway}}", network).Output()
	if err != nil || strings.TrimSpace(string(out)) == "" {
		t.Fatalf("the test network's gateway: %v %q", err, out)
	}
	return network, strings.TrimSpace(string(out)), server, ip
}

// TestNamedNetwork plays the user who wants a model gateway on their own
// Docker network, and the hostile agent who writes sandbox.local.yaml to
// get there: joining the network and reaching a private address are
// widenings that apply -y refuses without --approve-widening; once
// approved, the proxy reaches the gateway by container name, and a
// default-bridge server by its exact address, with blockCIDRs untouched;
// what the policy does not allow on that network stays denied, and the
// network's gateway (the Docker host) stays refused even allowed exactly.
// Leaving the network puts the proxy back on the default bridge alone.
func TestNamedNetwork(t *testing.T) {
	network, gateway, server, serverIP := testNetwork(t, "net")
	e := newLoopEnv(t, "e2e-net")
	base := fmt.Sprintf("version: 1\nname: %s\nagent: shell\ndriver: docker\ntemplate: %s\nnetwork: {agentHosts: false}\n", e.name, env.Image)
	if err := os.WriteFile(filepath.Join(e.ws, "sandbox.yaml"), []byte(base), 0o644); err != nil {
		t.Fatal(err)
	}
	run := func(wantCode int, args ...string) string {
		t.Helper()
		out, code := e.sbx(args...)
		if code != wantCode {
			t.Fatalf("sbx %s: exit %d, want %d:\n%s", strings.Join(args, " "), code, wantCode, out)
		}
		return out
	}
	local := func(doc string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(e.ws, "sandbox.local.yaml"), []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// get sends one absolute-URI request through the sandbox's proxy.
	get := func(target string) string {
		t.Helper()
		out, _ := e.sbx("shell", "--", "sh", "-c", fmt.Sprintf(`printf 'GET http://%s/ HTTP/1.0\r\n\r\n' | nc -w 5 127.0.0.1 3128`, target))
		return out
	}
	run(0, "apply", "-y")
	id := dockertest.ContainerID(t, docker.ContainerName(e.name))
	if out := get(server + ":8080"); !strings.Contains(out, "403") {
		t.Fatalf("before the network is joined: %q", out)
	}

	// The agent's overlay: the network, its server by name, a
	// default-bridge server by address, and the network's gateway.
	local(fmt.Sprintf("docker:\n  networks: [%s]\nnetwork:\n  allow: [%s:8080, %s:8080, %s:8080]\n", network, server, env.WebIP, gateway))
	plan := run(2, "plan", "--detailed-exitcode")
	for _, want := range []string{
		fmt.Sprintf("+ docker.networks: %q", network),
		"the egress proxy joins Docker network " + network,
		fmt.Sprintf("egress to %s:8080, a private address: an exception to blocked range 172.16.0.0/12 (from sandbox.local.yaml:", env.WebIP),
	} {
		if !strings.Contains(plan, want) {
			t.Errorf("the plan does not say %q:\n%s", want, plan)
		}
	}
	if out := run(1, "apply", "-y"); !strings.Contains(out, "apply refused: the plan widens") {
		t.Errorf("apply -y of the overlay:\n%s", out)
	}
	if out := get(server + ":8080"); !strings.Contains(out, "403") {
		t.Errorf("the refused apply changed egress: %q", out)
	}
	run(0, "apply", "-y", "--approve-widening")
	if dockertest.ContainerID(t, docker.ContainerName(e.name)) != id {
		t.Error("joining a network replaced the sandbox")
	}
	if out := run(0, "plan", "--detailed-exitcode"); !strings.Contains(out, "No changes") {
		t.Errorf("plan after the apply:\n%s", out)
	}
	live, err := docker.New(docker.Options{Binary: env.Binary}).Observe(context.Background(), []string{e.name})
	if err != nil {
		t.Fatal(err)
	}
	if l := live[e.name]; l == nil || strings.Join(l.DockerNetworks, ",") != network {
		t.Errorf("observed networks: %+v", l)
	}

	t.Run("the gateway by container name", func(t *testing.T) {
		if out := get(server + ":8080"); !strings.Contains(out, "200 OK") || !strings.Contains(out, "hello-from-web") {
			t.Errorf("got %q", out)
		}
	})
	t.Run("a default-bridge server by its exact address", func(t *testing.T) {
		if out := get(env.WebIP + ":8080"); !strings.Contains(out, "hello-from-web") {
			t.Errorf("got %q", out)
		}
	})
	t.Run("what the policy does not allow there is denied", func(t *testing.T) {
		for _, target := range []string{server + ":80", serverIP + ":8080"} {
			if out := get(target); !strings.Contains(out, "403") || !strings.Contains(out, "not in the allow list") {
				t.Errorf("%s: %q", target, out)
			}
		}
	})
	t.Run("the network's gateway is refused", func(t *testing.T) {
		if out := get(gateway + ":8080"); !strings.Contains(out, "403") || !strings.Contains(out, "always refuses") {
			t.Errorf("got %q", out)
		}
	})

	// Leaving the network narrows: no approval, and the name is gone.
	local(fmt.Sprintf("network:\n  allow: [%s:8080]\n", server))
	run(0, "apply", "-y")
	if out := get(server + ":8080"); strings.Contains(out, "hello-from-web") {
		t.Errorf("the server answered with the network left: %q", out)
	}
	out, err := exec.Command("docker", "inspect", "-f", "{{json .NetworkSettings.Networks}}", docker.EgressName(e.name)).Output()
	if err != nil {
		t.Fatal(err)
	}
	var nets map[string]json.RawMessage
	if err := json.Unmarshal(out, &nets); err != nil || len(nets) != 1 || nets["bridge"] == nil {
		t.Errorf("the proxy's networks after leaving: %s (%v)", out, err)
	}
}

// TestMissingNetwork: a network the daemon does not have fails the plan,
// before anything is made.
func TestMissingNetwork(t *testing.T) {
	e := newLoopEnv(t, "e2e-nonet")
	doc := fmt.Sprintf("version: 1\nname: %s\nagent: shell\ndriver: docker\ntemplate: %s\ndocker:\n  networks: [%s]\n", e.name, env.Image, env.Uniq("sbx-test-no-such-net"))
	if err := os.WriteFile(filepath.Join(e.ws, "sandbox.yaml"), []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	out, code := e.sbx("plan")
	if code != 1 || !strings.Contains(out, "docker.networks: there is no Docker network") {
		t.Errorf("plan: exit %d\n%s", code, out)
	}
	if left := dockertest.Leftovers(e.name); left != "" {
		t.Errorf("a failed plan made: %s", left)
	}
}
