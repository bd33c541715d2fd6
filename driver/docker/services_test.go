package docker

import (
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/sbxhq/sbx/driver/runner"
	"github.com/sbxhq/sbx/internal/dockertest"
	"github.com/sbxhq/sbx/reconcile"
	"github.com/sbxhq/sbx/spec"
)

// TestServiceNotReady: a service whose readiness check never passes
// fails the apply once its timeout is up, saying which check and what it
// last printed (escaped), and the failed create leaves nothing behind; one
// that exits fails at once.
func TestServiceNotReady(t *testing.T) {
	b := newBox(t, "e2e-notready")
	svc := func(cmd, ready string) string {
		return "services:\n  db:\n    image: " + env.Image + "\n    command: [sh, -c, " + cmd + "]\n    ports: [5432]\n    ready: {command: [sh, -c, " + ready + "], timeout: 2s}\n"
	}
	p := b.plan(b.spec(svc(`"exec sleep 3600"`, `"printf 'no\\033[2J'; exit 3"`)))
	err := reconcile.Apply(t.Context(), b.d, p, reconcile.ApplyOptions{Records: b.store})
	if err == nil || !strings.Contains(err.Error(), `service db was not ready within 2s: sh -c printf 'no\033[2J'; exit 3 did not succeed (its last try exited 3: no\x1b[2J)`) {
		t.Errorf("apply: %v", err)
	}
	if left := dockertest.Leftovers(b.name); left != "" {
		t.Errorf("a failed create left %s", left)
	}
	p = b.plan(b.spec(svc(`"exit 4"`, `"true"`)))
	err = reconcile.Apply(t.Context(), b.d, p, reconcile.ApplyOptions{Records: b.store})
	if err == nil || !strings.Contains(err.Error(), "service db exited before it was ready: docker logs sbx-"+b.name+"-svc-db says why") {
		t.Errorf("apply of a service that exits: %v", err)
	}
}

// TestDockerdOldGVisor: under a gVisor too old for Docker (Debian
// bookworm's runsc, of 2022, which .ci/run registers as runsc), the
// daemon cannot start; apply says why, in dockerd's words and sbx's, and
// the failed create leaves nothing behind.
func TestDockerdOldGVisor(t *testing.T) {
	env.RequireRunsc(t)
	b := newBox(t, "e2e-dockerd-old")
	image := env.DockerdImage(t)
	p := b.plan(b.spec("docker: {runtime: runsc}\nnetwork: {agentHosts: false}\nservices:\n  docker: {image: " + image +
		", dockerd: true, ports: [2375], ready: {command: [docker, --host=tcp://127.0.0.1:2375, version], timeout: 30s}}\n"))
	err := reconcile.Apply(t.Context(), b.d, p, reconcile.ApplyOptions{Records: b.store})
	if err == nil || !strings.Contains(err.Error(), "dockerd logged: failed to start daemon: Devices cgroup isn't mounted; a Docker daemon needs gVisor of 2023 or later") {
		t.Errorf("apply under an old gVisor: %v", err)
	}
	if left := dockertest.Leftovers(b.name); left != "" {
		t.Errorf("the failed apply left %s", left)
	}
}

// TestDockerdContainer: a dockerd service runs sbx's dockerd command under
// its init, with every capability (gVisor's) and its store on a tmpfs,
// and keeps the service's safeguards and limits; the sandbox gets
// DOCKER_HOST unless its env sets one, and the service names direct.
func TestDockerdContainer(t *testing.T) {
	sp := &spec.Spec{Name: "dind", Docker: spec.Docker{Runtime: "runsc"}, Resources: spec.Resources{Memory: 1 << 30, Pids: 500},
		Services: map[string]spec.Service{"docker": {Image: "docker:28-dind", Ports: []int{2375}, Dockerd: true, Egress: true}}}
	img := &imageInfo{}
	img.Config.Entrypoint, img.Config.Cmd = []string{"dockerd-entrypoint.sh"}, []string{"--debug"}
	c := serviceContainer(sp, "docker", img, "/usr/local/bin/sbx")
	wantEntry := append(serviceInit(sp.Services["docker"]), spec.DockerdArgs...)
	if !slices.Equal(c.Entrypoint, wantEntry) || len(c.Cmd) != 0 {
		t.Errorf("entrypoint %q, cmd %q; want %q and none", c.Entrypoint, c.Cmd, wantEntry)
	}
	h := c.HostConfig
	if !slices.Equal(h.CapAdd, []string{"ALL"}) || h.CapDrop != nil {
		t.Errorf("capabilities: add %q, drop %q", h.CapAdd, h.CapDrop)
	}
	if h.Tmpfs["/var/lib/docker"] != "rw,exec" || len(h.Tmpfs) != 1 {
		t.Errorf("tmpfs: %v", h.Tmpfs)
	}
	if h.NetworkMode != "none" || h.Runtime != "runsc" || *h.PidsLimit != 500 || h.Memory != 1<<30 || h.MemorySwap != 1<<30 ||
		!slices.Equal(h.SecurityOpt, []string{"no-new-privileges"}) {
		t.Errorf("network %q, runtime %q, pids %d, memory %d/%d, security %q", h.NetworkMode, h.Runtime, *h.PidsLimit, h.Memory, h.MemorySwap, h.SecurityOpt)
	}
	for _, b := range h.Binds {
		if !strings.HasPrefix(b, "/usr/local/bin/sbx:") && !strings.HasPrefix(b, "sbx-dind-") {
			t.Errorf("a bind of something not sbx's: %s", b)
		}
	}
	if !slices.Contains(c.Env, "HTTPS_PROXY=http://127.0.0.1:3128") {
		t.Errorf("the daemon's env has no proxy: %q", c.Env)
	}

	sb, err := (&Driver{opts: Options{Binary: "/usr/local/bin/sbx"}}).sandboxContainer(sp, nil, &protection{}, "tmpl")
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range []string{"DOCKER_HOST=tcp://docker:2375", "NO_PROXY=localhost,127.0.0.1,::1,docker"} {
		if !slices.Contains(sb.Env, kv) {
			t.Errorf("the sandbox's env has no %s: %q", kv, sb.Env)
		}
	}
	sp.Env = map[string]string{"DOCKER_HOST": "unix:///run/user.sock"}
	if sb, err = (&Driver{opts: Options{Binary: "/usr/local/bin/sbx"}}).sandboxContainer(sp, nil, &protection{}, "tmpl"); err != nil {
		t.Fatal(err)
	}
	if n := slices.IndexFunc(sb.Env, func(kv string) bool { return strings.HasPrefix(kv, "DOCKER_HOST=") }); n < 0 || sb.Env[n] != "DOCKER_HOST=unix:///run/user.sock" || slices.Contains(sb.Env, "DOCKER_HOST=tcp://docker:2375") {
		t.Errorf("the file's DOCKER_HOST is not kept: %q", sb.Env)
	}
	// A service that is not a daemon keeps the image's entrypoint and
	// the sandbox's safeguards.
	sp.Services["docker"] = spec.Service{Image: "docker:28-dind", Ports: []int{2375}}
	c = serviceContainer(sp, "docker", img, "/usr/local/bin/sbx")
	if c.HostConfig.CapAdd != nil || c.HostConfig.Tmpfs != nil || !slices.Contains(c.Entrypoint, "dockerd-entrypoint.sh") {
		t.Errorf("a plain service: %+v", c)
	}
}

// TestDockerdRuntime: the plan refuses a dockerd service whose runtime
// the daemon does not have, or runs with something other than gVisor's
// runsc, from the daemon's GET /info (Engine API v1.41 SystemInfo.Runtimes,
// as Docker 20.10 answers it); a sandbox without one asks nothing.
func TestDockerdRuntime(t *testing.T) {
	dir, err := os.MkdirTemp("", "sbx-dockerd-runtime-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	sock := filepath.Join(dir, "docker.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	var infos atomic.Int32
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasSuffix(r.URL.Path, "/info") {
			http.Error(w, "unexpected", http.StatusNotFound)
			return
		}
		infos.Add(1)
		io.WriteString(w, `{"Runtimes":{"runc":{"path":"runc"},"runsc":{"path":"/usr/bin/runsc","runtimeArgs":["--network=none"]},`+
			`"gvisor":{"path":"/var/cache/sbx-gvisor/v1/runsc"},"kata":{"path":"/usr/bin/kata-runtime"}},"DefaultRuntime":"runc"}`)
	})}
	go srv.Serve(l)
	defer srv.Close()
	newDriver := func() *Driver {
		return New(Options{Runner: &runner.Runner{Env: []string{"DOCKER_HOST=unix://" + sock}}})
	}
	withDockerd := func(name, runtime string) *spec.Spec {
		return &spec.Spec{Name: name, Docker: spec.Docker{Runtime: runtime},
			Services: map[string]spec.Service{"docker": {Image: "docker:28-dind", Ports: []int{2375}, Dockerd: true}}}
	}
	plain := withDockerd("plain", "kata")
	plain.Services["docker"] = spec.Service{Image: "docker:28-dind", Ports: []int{2375}}
	// A sandbox without a daemon asks nothing.
	d := newDriver()
	d.Configure([]*spec.Spec{plain})
	if ps, err := d.runtimeProblems(context.Background(), "plain"); err != nil || len(ps) > 0 || infos.Load() != 0 {
		t.Errorf("a sandbox without a daemon: %v, %v, %d requests for /info", ps, err, infos.Load())
	}
	d = newDriver()
	d.Configure([]*spec.Spec{withDockerd("a", "runsc"), withDockerd("b", "gvisor"), withDockerd("c", "kata"), withDockerd("d", "nosuch"), plain})
	for name, want := range map[string]string{
		"a": "", "b": "", "plain": "",
		"c": `docker.runtime "kata" runs /usr/bin/kata-runtime, not gVisor's runsc`,
		"d": `this Docker daemon has no runtime "nosuch"`,
	} {
		ps, err := d.runtimeProblems(context.Background(), name)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case want == "" && len(ps) > 0:
			t.Errorf("%s: %v", name, ps)
		case want != "" && (len(ps) != 1 || ps[0].Path != "services.docker.dockerd" || !strings.Contains(ps[0].Message, want)):
			t.Errorf("%s: %v, want %q", name, ps, want)
		}
	}
	if n := infos.Load(); n != 1 {
		t.Errorf("%d requests for /info, want one per driver", n)
	}
}

// TestDockerdFailure: what an apply quotes of a daemon that stopped is why
// it stopped, even when a restart logged more after it (lines as Debian's
// dockerd 20.10 wrote them under bookworm's runsc).
func TestDockerdFailure(t *testing.T) {
	l := func(s ...string) [][]byte {
		var out [][]byte
		for _, x := range s {
			out = append(out, []byte(x))
		}
		return out
	}
	warning := `time="2026-11-27T20:39:09.595614913Z" level=warning msg="Binding to an IP address, even on localhost, can also give access to scripts run in a browser. Be safe out there!" host="tcp://127.0.0.1:2375"`
	for _, tc := range []struct {
		lines [][]byte
		want  string
	}{
		{l(warning, "failed to start daemon: Devices cgroup isn't mounted", warning), "failed to start daemon: Devices cgroup isn't mounted"},
		{l(warning, `time="x" level=fatal msg="failed to start daemon: no space"`, warning), `time="x" level=fatal msg="failed to start daemon: no space"`},
		{l(`time="x" level=error msg="containerd exited"`, warning), `time="x" level=error msg="containerd exited"`},
		{l(warning), warning},
		{nil, ""},
	} {
		var f dockerdFailure
		for _, l := range tc.lines {
			f.add(l)
		}
		if got := string(f.line()); got != tc.want {
			t.Errorf("dockerdFailure of %q = %q, want %q", tc.lines, got, tc.want)
		}
	}
}
