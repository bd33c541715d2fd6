package kubernetes

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sbxhq/sbx/egress"
	"github.com/sbxhq/sbx/reconcile"
	"github.com/sbxhq/sbx/spec"
)

// TestHostAddrsOf turns node addresses (status.addresses) into the
// proxy's hostAddrs: plain canonical addresses the proxy loads, without
// names or duplicates.
func TestHostAddrsOf(t *testing.T) {
	got := hostAddrsOf([]string{"192.0.2.2", "localhost", "fd00::2", "::ffff:192.0.2.2", "192.0.2.3", "fe80::1%eth0"})
	want := []string{"192.0.2.2", "192.0.2.3", "fd00::2", "fe80::1"} // a zone is dropped: refusing the address on every link is the safe reading
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("hostAddrsOf (-want +got):\n%s", d)
	}
	p := egress.PolicyOf(&spec.Spec{Network: spec.Network{Policy: "deny"}}, got)
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "policy.json")
	if err := os.WriteFile(file, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := egress.LoadPolicy(file); err != nil {
		t.Errorf("the proxy refuses the driver's policy: %v", err)
	}
}

// TestClaimedPod reads `kubectl wait sandboxclaim/NAME -o json`: a
// SandboxClaim whose status.sandbox.name is the claimed Sandbox
// (agent-sandbox v1.0.3, extensions/api/v1beta1/sandboxclaim_types.go:
// SandboxClaimStatus.SandboxStatus, json "sandbox"). Any other shape is
// an error, never an empty pod name.
func TestClaimedPod(t *testing.T) {
	for _, tc := range []struct {
		name, out, want, err string
	}{
		{"bound", `{"apiVersion":"extensions.agents.x-k8s.io/v1beta1","kind":"SandboxClaim","metadata":{"name":"c"},"status":{"conditions":[{"type":"Ready","status":"True"}],"sandbox":{"name":"box.pool-x7k2p","podIPs":["10.244.0.9"]}}}`, "box.pool-x7k2p", ""},
		{"no sandbox", `{"apiVersion":"extensions.agents.x-k8s.io/v1beta1","kind":"SandboxClaim","metadata":{"name":"c"},"status":{"conditions":[{"type":"Ready","status":"True"}]}}`, "", "names no sandbox"},
		{"another kind", `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"c"},"status":{"sandbox":{"name":"x"}}}`, "", "not a SandboxClaim"},
		{"a list", `{"apiVersion":"v1","kind":"List","items":[]}`, "", "not a SandboxClaim"},
		{"not json", `sandboxclaim.extensions.agents.x-k8s.io/c condition met`, "", "not a SandboxClaim"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := claimedPod("c", []byte(tc.out))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("claimedPod = %q, %v; want an error saying %q", got, err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("claimedPod = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

// TestAgentPodPin: with a proxy address the sandbox pod's first init
// container is the pin, root with NET_ADMIN and nothing else; the
// agent's container never has NET_ADMIN (nor NET_RAW, whose packet
// sockets bypass netfilter); pinnedTo reads the address back, and a pod
// without the pin reads as not pinned.
func TestAgentPodPin(t *testing.T) {
	sp := &spec.Spec{Name: "sb", Workspace: spec.Workspace{Path: "/w"}}
	pod := agentPod(sp, "sb", "busybox", "sbx-helper:1", roleAgent, true, "192.0.2.7:3128")
	ic := pod.Spec.InitContainers
	if len(ic) != 2 || ic[0].Name != pinInit || ic[1].Name != helperInit {
		t.Fatalf("init containers %+v, want the pin then the helper", ic)
	}
	sc := ic[0].SecurityContext
	if d := cmp.Diff(&securityCtx{AllowPrivilegeEscalation: ptr(false), ReadOnlyRootFilesystem: ptr(true), RunAsUser: ptr(int64(0)), RunAsGroup: ptr(int64(0)),
		Capabilities: &capabilities{Drop: []string{"ALL"}, Add: []string{"NET_ADMIN"}}}, sc); d != "" {
		t.Errorf("the pin's security (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]string{"__k8s-pin", "--allow", "192.0.2.7:3128"}, ic[0].Args); d != "" {
		t.Errorf("the pin's args (-want +got):\n%s", d)
	}
	agent := pod.Spec.Containers[0].SecurityContext.Capabilities
	if len(agent.Add) != 0 || !strings.Contains(strings.Join(agent.Drop, ","), "NET_RAW") {
		t.Errorf("the agent's capabilities: %+v", agent)
	}
	if got := pinnedTo(pod.Spec); got != "192.0.2.7:3128" {
		t.Errorf("pinnedTo = %q", got)
	}
	if got := pinnedTo(agentPod(sp, "sb", "busybox", "sbx-helper:1", roleAgent, true, "").Spec); got != "" {
		t.Errorf("pinnedTo of a pod without the pin = %q", got)
	}
}

// TestAgentResources: the agent container's limits are the file's (8 GiB
// of memory by default), its requests a fixed small amount a busy node
// can schedule, or the limit when that is lower; a request is always
// written, since Kubernetes takes a lone limit for the request.
func TestAgentResources(t *testing.T) {
	for _, tc := range []struct {
		name             string
		res              spec.Resources
		limits, requests map[string]string
		desc             string
	}{
		{"default", spec.Resources{}, map[string]string{"memory": "8589934592"}, map[string]string{"memory": "536870912"},
			"memory limit 8 GiB, request 512 MiB"},
		{"declared", spec.Resources{Memory: 4 << 30, CPUs: 2}, map[string]string{"memory": "4294967296", "cpu": "2000m"}, map[string]string{"memory": "536870912", "cpu": "250m"},
			"memory limit 4 GiB, request 512 MiB; cpu limit 2000m, request 250m"},
		{"below the requests", spec.Resources{Memory: 256 << 20, CPUs: 0.1}, map[string]string{"memory": "268435456", "cpu": "100m"}, map[string]string{"memory": "268435456", "cpu": "100m"},
			"memory limit 256 MiB, request 256 MiB; cpu limit 100m, request 100m"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sp := &spec.Spec{Name: "box", Resources: tc.res, Workspace: spec.Workspace{Path: "/w"}}
			limits, requests := agentResources(sp)
			if d := cmp.Diff(tc.limits, limits); d != "" {
				t.Errorf("limits (-want +got):\n%s", d)
			}
			if d := cmp.Diff(tc.requests, requests); d != "" {
				t.Errorf("requests (-want +got):\n%s", d)
			}
			pod := agentPod(sp, "box", "img", "helper", roleAgent, true, "")
			r := pod.Spec.Containers[0].Resources
			if d := cmp.Diff(resources{Limits: tc.limits, Requests: tc.requests}, *r); d != "" {
				t.Errorf("the pod's resources (-want +got):\n%s", d)
			}
			if got := resourcesDesc(sp); got != tc.desc {
				t.Errorf("resourcesDesc = %q, want %q", got, tc.desc)
			}
		})
	}
}

// TestAgentPodServices: each service is a container of the sandbox's pod
// after the agent's: its image with the file's command as args (the
// image's entrypoint kept), its env and the pod's proxy, the agent's
// safeguards and limits, and its readiness check as an exec probe; the
// services' names are aliases of the pod's loopback, and direct in
// NO_PROXY. The constraints refuse a service without egress and a
// Docker daemon, saying why.
func TestAgentPodServices(t *testing.T) {
	sp := &spec.Spec{Name: "sb", Workspace: spec.Workspace{Path: "/w"}, Resources: spec.Resources{Memory: 1 << 30},
		Services: map[string]spec.Service{
			"db":    {Image: "postgres:16", Env: map[string]string{"POSTGRES_PASSWORD": "test"}, Ports: []int{5432}, Egress: true, Ready: &spec.Ready{Command: []string{"pg_isready"}, Timeout: time.Minute}},
			"cache": {Image: "redis:7", Command: []string{"redis-server", "--save", ""}, Ports: []int{6379}, Egress: true},
		}}
	pod := agentPod(sp, "sb", "busybox", "sbx-helper:1", roleAgent, true, "192.0.2.7:3128")
	cs := pod.Spec.Containers
	if len(cs) != 3 || cs[0].Name != AgentContainer || cs[1].Name != "svc-cache" || cs[2].Name != "svc-db" {
		t.Fatalf("containers %+v, want the agent's, then svc-cache and svc-db", cs)
	}
	noProxy := envVar{"NO_PROXY", "localhost,127.0.0.1,::1,cache,db"}
	if !slices.Contains(cs[0].Env, noProxy) {
		t.Errorf("the agent's env %v has no %v", cs[0].Env, noProxy)
	}
	limits, requests := agentResources(sp)
	want := container{Name: "svc-db", Image: "postgres:16", ImagePullPolicy: "IfNotPresent",
		Env: append([]envVar{{"POSTGRES_PASSWORD", "test"}}, podProxyEnv(nil)...), Resources: &resources{Limits: limits, Requests: requests},
		SecurityContext: agentSecurity(sp),
		ReadinessProbe:  &readiness{Exec: &execAction{Command: []string{"pg_isready"}}, PeriodSeconds: 1, TimeoutSeconds: 10, FailureThreshold: 1}}
	if d := cmp.Diff(want, cs[2]); d != "" {
		t.Errorf("the db service's container (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]string{"redis-server", "--save", ""}, cs[1].Args); d != "" || cs[1].Command != nil || cs[1].ReadinessProbe != nil {
		t.Errorf("the cache service's command %q, args (-want +got):\n%s", cs[1].Command, d)
	}
	if d := cmp.Diff([]hostAlias{{IP: "127.0.0.1", Hostnames: []string{"cache", "db"}}}, pod.Spec.HostAliases); d != "" {
		t.Errorf("host aliases (-want +got):\n%s", d)
	}
	if pod := agentPod(&spec.Spec{Name: "sb", Workspace: spec.Workspace{Path: "/w"}}, "sb", "busybox", "h", roleAgent, true, ""); len(pod.Spec.Containers) != 1 || pod.Spec.HostAliases != nil {
		t.Errorf("a pod without services: %+v", pod.Spec)
	}

	sp.Services["db"] = spec.Service{Image: "postgres:16", Ports: []int{5432}}
	sp.Services["docker"] = spec.Service{Image: "docker:28-dind", Ports: []int{2375}, Egress: true, Dockerd: true}
	long := strings.Repeat("s", 60) // a container name of 64 characters
	sp.Services[long] = spec.Service{Image: "redis:7", Ports: []int{6380}, Egress: true}
	var paths []string
	for _, p := range reconcile.Check(sp, Capabilities()) {
		paths = append(paths, p.Path)
		if !strings.Contains(p.Message, "kubernetes") {
			t.Errorf("%s: %s", p.Path, p.Message)
		}
	}
	if d := cmp.Diff([]string{"services.db.egress", "services.docker.dockerd", "services." + long}, paths); d != "" {
		t.Errorf("problems (-want +got):\n%s", d)
	}
}
