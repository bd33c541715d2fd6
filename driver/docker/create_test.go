package docker

import (
	"encoding/json"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sbxhq/sbx/driver"
	"github.com/sbxhq/sbx/spec"
)

// TestSetResources: --cpus as the docker CLI computes it, in exact
// billionths, and a value finer than that refused rather than rounded.
func TestSetResources(t *testing.T) {
	for _, tc := range []struct {
		cpus    float64
		nano    int64
		wantErr bool
	}{
		{0, 0, false},
		{0.5, 500_000_000, false},
		{0.1, 100_000_000, false},
		{1.25, 1_250_000_000, false},
		{3, 3_000_000_000, false},
		{0.0000000005, 0, true},
	} {
		var h hostConfig
		err := setResources(&h, &spec.Spec{Resources: spec.Resources{CPUs: tc.cpus}})
		if (err != nil) != tc.wantErr || h.NanoCpus != tc.nano {
			t.Errorf("cpus %v: NanoCpus %d, error %v; want %d, error %v", tc.cpus, h.NanoCpus, err, tc.nano, tc.wantErr)
		}
		if err == nil && (*h.PidsLimit != DefaultPids || h.Memory != DefaultMemory || h.MemorySwap != DefaultMemory) {
			t.Errorf("cpus %v: defaults not set: %+v", tc.cpus, h)
		}
	}
}

// created is what TestCreatedContainers reads back of a container, with
// the docker CLI (not the driver's own requests).
type created struct {
	Config struct {
		Env        []string
		Cmd        []string
		Entrypoint []string
		WorkingDir string
		OpenStdin  bool
		StdinOnce  bool
		Labels     map[string]string
	}
	HostConfig struct {
		Binds          []string
		NetworkMode    string
		RestartPolicy  struct{ Name string }
		CapDrop        []string
		CapAdd         []string
		SecurityOpt    []string
		ReadonlyRootfs bool
		Privileged     bool
		LogConfig      struct {
			Type   string
			Config map[string]string
		}
		PidsLimit  int64
		NanoCpus   int64
		Memory     int64
		MemorySwap int64
	}
}

// TestCreatedContainers: the containers and volumes the driver creates
// through the Engine API carry every flag the docker CLI commands it
// replaced gave them (bench/docker.sh keeps those commands as the
// baseline): the sandbox and proxy safeguards, the limits, the mounts,
// the proxy's open stdin, the socket volume's tmpfs bounds.
func TestCreatedContainers(t *testing.T) {
	b := newBox(t, "e2e-created")
	b.apply(b.spec("env: {NODE_ENV: test}\nresources: {cpus: 0.5, memory: 256m, pids: 300}\nnetwork:\n  allow: [a.example]\n"))
	read := func(name string, v any) {
		t.Helper()
		out, err := exec.Command("docker", "inspect", name).Output()
		if err != nil {
			t.Fatalf("docker inspect %s: %v", name, err)
		}
		var list []json.RawMessage
		if err := json.Unmarshal(out, &list); err != nil || len(list) != 1 {
			t.Fatalf("docker inspect %s: %v", name, err)
		}
		if err := json.Unmarshal(list[0], v); err != nil {
			t.Fatal(err)
		}
	}
	var sb, eg created
	read(ContainerName(b.name), &sb)
	read(EgressName(b.name), &eg)
	ws := b.dir + "/ws"

	var want created
	want.Config.Env = []string{"NODE_ENV=test", "HTTP_PROXY=http://127.0.0.1:3128", "HTTPS_PROXY=http://127.0.0.1:3128",
		"http_proxy=http://127.0.0.1:3128", "https_proxy=http://127.0.0.1:3128",
		"NO_PROXY=localhost,127.0.0.1,::1", "no_proxy=localhost,127.0.0.1,::1", "PATH=/bin"}
	want.Config.Cmd = []string{"__sandbox-init", "--socket", "/run/sbx-egress/egress.sock", "--ports-socket", "/run/sbx-ports/ports.sock"}
	want.Config.Entrypoint = []string{"/.sbx/sbx"}
	want.Config.WorkingDir = ws
	want.Config.Labels = sb.Config.Labels // checked below
	h := &want.HostConfig
	h.Binds = []string{env.Binary + ":/.sbx/sbx:ro", "sbx-" + b.name + "-sock:/run/sbx-egress:ro", "sbx-" + b.name + "-ports:/run/sbx-ports:ro", ws + ":" + ws,
		// The workspace has no .git: its .git inside is the sandbox's own volume (git.go).
		"sbx-" + b.name + "-git:" + ws + "/.git"}
	h.NetworkMode = "none"
	h.RestartPolicy.Name = "unless-stopped"
	h.CapDrop = []string{"CAP_AUDIT_WRITE", "CAP_MKNOD", "CAP_NET_RAW", "CAP_SETFCAP", "CAP_SYS_CHROOT"}
	h.SecurityOpt = []string{"no-new-privileges"}
	h.LogConfig.Type, h.LogConfig.Config = "json-file", map[string]string{"max-size": "10m", "max-file": "2"}
	h.PidsLimit, h.NanoCpus, h.Memory, h.MemorySwap = 300, 500_000_000, 256<<20, 256<<20
	if diff := cmp.Diff(want, sb); diff != "" {
		t.Errorf("sandbox container (-want +got):\n%s", diff)
	}
	for k, v := range map[string]string{driver.LabelManaged: "true", driver.LabelSandbox: b.name, driver.LabelRole: "sandbox", labelHardening: Hardening, labelProtect: "true", "dev.sbx.agent": "shell", labelWS: ws} {
		if sb.Config.Labels[k] != v {
			t.Errorf("sandbox label %s = %q, want %q", k, sb.Config.Labels[k], v)
		}
	}
	if sb.Config.Labels[driver.LabelRecord] == "" {
		t.Error("the sandbox has no record label")
	}

	// The proxy: its policy on the command line for its first start.
	if i := slices.Index(eg.Config.Cmd, "--init-policy"); i < 0 || !strings.Contains(eg.Config.Cmd[i+1], `"allow":["a.example"]`) {
		t.Errorf("proxy command: %q", eg.Config.Cmd)
	}
	eg.Config.Cmd = nil
	want = created{}
	want.Config.Env = []string{"GOMEMLIMIT=96MiB", "GOMAXPROCS=1", "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
	want.Config.Entrypoint = []string{"/sbx"}
	want.Config.OpenStdin = true
	want.Config.Labels = map[string]string{driver.LabelManaged: "true", driver.LabelSandbox: b.name, driver.LabelRole: "egress"}
	h = &want.HostConfig
	h.Binds = []string{"sbx-" + b.name + "-sock:/run/sbx-egress", "sbx-" + b.name + "-policy:/policy", "sbx-" + b.name + "-host:/run/sbx-host:ro"}
	h.NetworkMode = "default"
	h.RestartPolicy.Name = "unless-stopped"
	h.CapDrop = []string{"ALL"}
	h.SecurityOpt = []string{"no-new-privileges"}
	h.ReadonlyRootfs = true
	h.LogConfig.Type, h.LogConfig.Config = "json-file", map[string]string{"max-size": "10m", "max-file": "3"}
	h.PidsLimit, h.Memory, h.MemorySwap = 128, 128<<20, 128<<20
	if diff := cmp.Diff(want, eg); diff != "" {
		t.Errorf("egress container (-want +got):\n%s", diff)
	}

	type volume struct {
		Driver  string
		Labels  map[string]string
		Options map[string]string
	}
	out, err := exec.Command("docker", "volume", "inspect", "sbx-"+b.name+"-sock", "sbx-"+b.name+"-policy").Output()
	if err != nil {
		t.Fatal(err)
	}
	var vols []volume
	if err := json.Unmarshal(out, &vols); err != nil {
		t.Fatal(err)
	}
	wantVols := []volume{
		{Driver: "local", Labels: map[string]string{driver.LabelManaged: "true", driver.LabelSandbox: b.name, driver.LabelRole: "sock-volume"},
			Options: map[string]string{"type": "tmpfs", "device": "tmpfs", "o": "size=1m,nr_inodes=64,mode=0755"}},
		{Driver: "local", Labels: map[string]string{driver.LabelManaged: "true", driver.LabelSandbox: b.name, driver.LabelRole: "policy-volume"}},
	}
	if diff := cmp.Diff(wantVols, vols); diff != "" {
		t.Errorf("volumes (-want +got):\n%s", diff)
	}
}
