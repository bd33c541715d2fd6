package docker

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sbxhq/sbx/driver"
	"github.com/sbxhq/sbx/driver/runner"
	"github.com/sbxhq/sbx/internal/dockertest"
	"github.com/sbxhq/sbx/netlog"
	"github.com/sbxhq/sbx/reconcile"
	"github.com/sbxhq/sbx/schema"
	"github.com/sbxhq/sbx/spec"
	"github.com/sbxhq/sbx/state"
)

// The tests run against a real Docker daemon. They skip when none is
// reachable, and fail instead when SBX_E2E=1 (CI). Every image is built
// here from Debian's busybox-static; nothing is pulled, and the only
// servers are this test's own container and loopback listener
// (internal/dockertest). The tests that drive the sbx binary as a user
// does are in ./e2e.

var env = dockertest.New("docker")

func TestMain(m *testing.M) { os.Exit(env.Run(m)) }

// box is one sandbox under test, applied through reconcile as sbx apply
// does.
type box struct {
	t     *testing.T
	d     *Driver
	store *reconcile.Store
	key   reconcile.Key
	dir   string
	name  string
	trace bytes.Buffer
}

func newBox(t *testing.T, name string) *box {
	t.Helper()
	env.Require(t)
	b := &box{t: t, dir: t.TempDir(), name: env.Uniq(name)}
	r := &runner.Runner{Trace: &b.trace}
	b.d = New(Options{Runner: r, Binary: env.Binary})
	var err error
	if b.store, err = reconcile.OpenStore(state.Dir(filepath.Join(b.dir, "state"))); err != nil {
		t.Fatal(err)
	}
	if b.key, err = b.store.Key(); err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(filepath.Join(b.dir, "ws"), 0o755)
	t.Cleanup(func() {
		b.d.remove(context.Background(), b.name)
	})
	return b
}

// spec resolves a sandbox.yaml body (name, driver and workspace added).
func (b *box) spec(body string, extra ...string) *spec.Spec {
	b.t.Helper()
	sch, err := schema.Compile()
	if err != nil {
		b.t.Fatal(err)
	}
	doc := fmt.Sprintf("version: 1\nname: %s\nagent: shell\ndriver: docker\nworkspace: ws\n%s", b.name, body)
	if !strings.Contains(body, "template:") {
		doc += "template: " + env.Image + "\n"
	}
	res, err := spec.Parse("sandbox.yaml", b.dir, []byte(doc), spec.Options{Schema: sch})
	if err != nil {
		b.t.Fatalf("spec: %v\n%s", err, doc)
	}
	return res.Specs[0]
}

func (b *box) observe() (map[string]*reconcile.Live, map[string]*reconcile.Record) {
	b.t.Helper()
	live, err := b.d.Observe(context.Background(), []string{b.name})
	if err != nil {
		b.t.Fatal(err)
	}
	recs, err := b.store.Records("docker", []string{b.name})
	if err != nil {
		b.t.Fatal(err)
	}
	return live, recs
}

func (b *box) plan(sp *spec.Spec) *reconcile.Changes {
	b.t.Helper()
	return b.planWith(sp, reconcile.Options{})
}

// planWith plans with the options apply's flags give (--adopt).
func (b *box) planWith(sp *spec.Spec, opts reconcile.Options) *reconcile.Changes {
	b.t.Helper()
	hash, err := b.d.BuildHash(sp)
	if err != nil {
		b.t.Fatal(err)
	}
	des, err := reconcile.NewDesired(sp, b.key, hash)
	if err != nil {
		b.t.Fatal(err)
	}
	live, recs := b.observe()
	p := reconcile.Plan([]reconcile.Desired{des}, live, recs, b.d.Caps(), opts)
	if p.Err() == nil {
		if err := p.Prepare(b.d, live); err != nil {
			b.t.Fatal(err)
		}
	}
	return p
}

// apply converges the sandbox and checks that a second plan is empty.
func (b *box) apply(sp *spec.Spec) *reconcile.Changes {
	b.t.Helper()
	p := b.plan(sp)
	if err := p.Err(); err != nil {
		b.t.Fatal(err)
	}
	if err := reconcile.Apply(context.Background(), b.d, p, reconcile.ApplyOptions{Records: b.store}); err != nil {
		b.t.Fatalf("apply: %v\ntrace:\n%s", err, b.trace.String())
	}
	if err := reconcile.Converged(b.plan(sp)); err != nil {
		b.t.Fatal(err)
	}
	return p
}

// sh runs a script inside the sandbox and returns its combined output and
// exit status.
func (b *box) sh(script string, env map[string]string) (string, int) {
	b.t.Helper()
	var out bytes.Buffer
	code, err := b.d.Exec(context.Background(), b.name, []string{"sh", "-c", script}, driver.ExecOptions{Env: env, Stdout: &out, Stderr: &out})
	if err != nil {
		b.t.Fatalf("exec: %v", err)
	}
	return out.String(), code
}

// proxyGet sends one absolute-URI request through the sandbox's proxy
// with nc (raw HTTP: independent of any client's proxy support).
func (b *box) proxyGet(target string) string {
	b.t.Helper()
	out, _ := b.sh(fmt.Sprintf(`printf 'GET http://%s/ HTTP/1.0\r\n\r\n' | nc -w 5 127.0.0.1 3128`, target), nil)
	return out
}

func (b *box) containerID(name string) string {
	b.t.Helper()
	return dockertest.ContainerID(b.t, name)
}

// hostListener is a server on the host's loopback the sandbox must not
// reach.
func hostListener(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "host-secret-service") })}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String()
}

func TestIsolationRunc(t *testing.T) { isolation(t, "") }

func TestIsolationRunsc(t *testing.T) {
	env.RequireRunsc(t)
	isolation(t, "runsc")
}

// TestDefaultRuntimeNamed: a file that names the daemon's default runtime
// (docker: {runtime: runc}) converges: the container runs it, and the
// plan after apply is empty (apply checks), though the daemon reports
// the default whether or not create named it.
func TestDefaultRuntimeNamed(t *testing.T) {
	b := newBox(t, "e2e-runc")
	b.apply(b.spec("docker: {runtime: runc}\n"))
	out, err := exec.Command("docker", "inspect", "-f", "{{.HostConfig.Runtime}}", ContainerName(b.name)).Output()
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(string(out)); got != "runc" {
		t.Errorf("the container runs %q, want runc", got)
	}
}

// isolation is the set of properties the sandbox must have, whatever its
// runtime.
func isolation(t *testing.T, runtime string) {
	b := newBox(t, "e2e-iso-"+map[string]string{"": "runc", "runsc": "runsc"}[runtime])
	rt := ""
	if runtime != "" {
		rt = "docker: {runtime: " + runtime + "}\n"
	}
	// The web server lives in a private range (docker's bridge): one
	// sandbox allows it with blockCIDRs that leave that range open, the
	// other keeps the default ranges.
	open := b.spec(rt + fmt.Sprintf("network:\n  allow: [%s, allowed.invalid]\n  deny: [denied.invalid]\n  blockCIDRs: [127.0.0.0/8, 169.254.0.0/16]\n", env.WebIP))
	b.apply(open)
	if runtime != "" {
		if out, _ := b.sh("dmesg 2>&1 | head -1", nil); !strings.Contains(out, "gVisor") {
			t.Fatalf("the sandbox does not run under gVisor: %q", out)
		}
	}

	t.Run("allowed host answers through the proxy", func(t *testing.T) {
		if out := b.proxyGet(env.WebIP + ":8080"); !strings.Contains(out, "200 OK") || !strings.Contains(out, "hello-from-web") {
			t.Errorf("got %q", out)
		}
		// A real client honours HTTP_PROXY set in the sandbox.
		if out, code := b.sh("wget -q -O- http://"+env.WebIP+":8080/", nil); code != 0 || !strings.Contains(out, "hello-from-web") {
			t.Errorf("wget: %d %q", code, out)
		}
	})
	t.Run("denied and unlisted hosts are refused and logged", func(t *testing.T) {
		for _, host := range []string{"denied.invalid", "unlisted.invalid"} {
			if out := b.proxyGet(host); !strings.Contains(out, "403 Forbidden") {
				t.Errorf("%s: %q", host, out)
			}
		}
		wants := []string{`"host":"denied.invalid","port":80,"decision":"deny","reason":"denied by policy","rule":"denied.invalid"`,
			`"host":"unlisted.invalid","port":80,"decision":"deny","reason":"not in the allow list (policy: deny)","rule":"default"`}
		// The daemon writes the proxy's output to its log a moment after
		// the proxy answered: read until both lines are there.
		log := netlogUntil(t, b.d, b.name, wants)
		for _, want := range wants {
			if !strings.Contains(log, want) {
				t.Errorf("netlog lacks %s:\n%s", want, log)
			}
		}
		c, err := b.d.EgressCount(context.Background(), b.name, time.Now().Add(-time.Minute), time.Now(), 1)
		if err != nil || c.Denied < 2 || len(c.FirstDenied) != 1 || c.FirstDenied[0].Reason == "" {
			lines, lerr := b.d.readLog(context.Background(), b.name, time.Now().Add(-time.Minute))
			t.Errorf("EgressCount = %+v, %v; log since a minute ago (%v):\n%s", c, err, lerr, strings.Join(lines, "\n"))
		}
	})
	t.Run("a listener on the host is unreachable", func(t *testing.T) {
		addr := hostListener(t)
		_, port, _ := net.SplitHostPort(addr)
		if out := b.proxyGet(addr); !strings.Contains(out, "403") || strings.Contains(out, "host-secret-service") {
			t.Errorf("through the proxy: %q", out)
		}
		// The sandbox's own loopback is its own: nothing listens there.
		if out, code := b.sh("nc -w 2 127.0.0.1 "+port+" </dev/null", nil); code == 0 || strings.Contains(out, "host-secret-service") {
			t.Errorf("direct: %d %q", code, out)
		}
		gw, _ := exec.Command("docker", "network", "inspect", "bridge", "-f", "{{(index .IPAM.Config 0).Gateway}}").Output()
		if g := strings.TrimSpace(string(gw)); g != "" {
			if out, code := b.sh("nc -w 2 "+g+" "+port+" </dev/null", nil); code == 0 {
				t.Errorf("host gateway %s reachable: %q", g, out)
			}
		}
	})
	t.Run("raw TCP and DNS do not leave the sandbox", func(t *testing.T) {
		// With no interface but loopback there is no route: runc says
		// "Network is unreachable", gVisor "No route to host".
		noRoute := func(out string) bool {
			return strings.Contains(out, "unreachable") || strings.Contains(out, "No route to host")
		}
		out, code := b.sh("nc -w 2 "+env.WebIP+" 8080 </dev/null", nil)
		if code == 0 || !noRoute(out) {
			t.Errorf("raw TCP: %d %q", code, out)
		}
		out, code = b.sh("nslookup example.invalid 2>&1", nil)
		if code == 0 || !noRoute(out) {
			t.Errorf("DNS: %d %q", code, out)
		}
		out, _ = b.sh("ip -o link 2>/dev/null || cat /proc/net/dev", nil)
		if strings.Contains(out, "eth0") {
			t.Errorf("the sandbox has a network interface: %q", out)
		}
	})
	t.Run("the sandbox cannot change its policy", func(t *testing.T) {
		before, _, err := b.d.readPolicy(context.Background(), b.name)
		if err != nil {
			t.Fatal(err)
		}
		out, _ := b.sh("ls /policy 2>&1; echo '{\"default\":\"allow\"}' > /policy/policy.json 2>&1; kill -HUP -1 2>&1; kill -9 -1 2>&1; echo done", nil)
		if !strings.Contains(out, "No such file or directory") {
			t.Errorf("the policy is visible inside: %q", out)
		}
		after, _, err := b.d.readPolicy(context.Background(), b.name)
		if err != nil {
			t.Fatal(err)
		}
		if before == nil || after == nil || after.Default != "deny" {
			t.Errorf("policy changed: %+v → %+v", before, after)
		}
		if err := b.d.verify(context.Background(), b.name); err != nil {
			t.Errorf("after signalling from inside: %v", err)
		}
		if out := b.proxyGet("unlisted.invalid"); !strings.Contains(out, "403") {
			t.Errorf("egress open after the attempt: %q", out)
		}
	})

	// Default blocked ranges: private and link-local addresses are
	// unreachable as IP literals even under an allow-everything policy
	// (only an allow entry naming the address exactly is an exception:
	// TestNamedNetwork).
	strict := newBox(t, b.name+"-strict")
	strict.apply(strict.spec(rt + "network:\n  policy: allow\n"))
	t.Run("private and link-local ranges are unreachable as IP literals", func(t *testing.T) {
		for _, target := range []string{env.WebIP + ":8080", "169.254.169.254", "10.0.0.1"} {
			if out := strict.proxyGet(target); !strings.Contains(out, "403") || !strings.Contains(out, "blocked address") {
				t.Errorf("%s: %q", target, out)
			}
		}
	})
}

// TestInPlaceAndReplace: an allow-list change applies in place (same
// container, effective at once); an env change replaces the container; a
// resources change is a docker update; destroy leaves nothing labelled.
func TestInPlaceAndReplace(t *testing.T) {
	b := newBox(t, "e2e-change")
	base := "env: {NODE_ENV: development}\nnetwork:\n  blockCIDRs: [127.0.0.0/8]\n"
	b.apply(b.spec(base))
	id := b.containerID(ContainerName(b.name))
	if out := b.proxyGet(env.WebIP + ":8080"); !strings.Contains(out, "403") {
		t.Fatalf("before the change: %q", out)
	}

	p := b.apply(b.spec(base + "  allow: [" + env.WebIP + "]\n"))
	if c := p.Sandboxes[0]; c.Action != reconcile.ActionUpdate {
		t.Errorf("allow-list change: action %s, want update in place", c.Action)
	}
	if got := b.containerID(ContainerName(b.name)); got != id {
		t.Errorf("the sandbox was recreated by an allow-list change")
	}
	if out := b.proxyGet(env.WebIP + ":8080"); !strings.Contains(out, "hello-from-web") {
		t.Errorf("after the change: %q", out)
	}

	p = b.apply(b.spec(strings.Replace(base, "development", "production", 1) + "  allow: [" + env.WebIP + "]\n"))
	if c := p.Sandboxes[0]; c.Action != reconcile.ActionReplace {
		t.Errorf("env change: action %s, want replace", c.Action)
	}
	if got := b.containerID(ContainerName(b.name)); got == id {
		t.Error("an env change did not replace the container")
	}
	if out, _ := b.sh("echo $NODE_ENV", nil); strings.TrimSpace(out) != "production" {
		t.Errorf("NODE_ENV = %q", out)
	}

	id = b.containerID(ContainerName(b.name))
	p = b.apply(b.spec(strings.Replace(base, "development", "production", 1) + "  allow: [" + env.WebIP + "]\nresources: {cpus: 0.5, memory: 64m}\n"))
	if c := p.Sandboxes[0]; c.Action != reconcile.ActionUpdate || b.containerID(ContainerName(b.name)) != id {
		t.Errorf("resources change: action %s", c.Action)
	}

	live := mustLive(b)
	destroy := reconcile.PlanDestroy([]string{b.name}, live, nil, b.d.Caps(), reconcile.Options{})
	if err := destroy.Prepare(b.d, live); err != nil {
		t.Fatal(err)
	}
	if err := reconcile.Apply(context.Background(), b.d, destroy, reconcile.ApplyOptions{Records: b.store}); err != nil {
		t.Fatal(err)
	}
	if left := dockertest.Leftovers(b.name); left != "" {
		t.Errorf("destroy left behind: %s", left)
	}
}

// labelled lists the containers, volumes and networks labelled as a
// sandbox's, "" when there are none.
// netlogUntil reads the sandbox's network log until it has every one of
// wants or ten seconds pass, and returns the last reading.
func netlogUntil(t *testing.T, d *Driver, name string, wants []string) string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var log bytes.Buffer
		enc := json.NewEncoder(&log)
		if err := d.NetLog(context.Background(), name, false, func(e netlog.Entry) error { return enc.Encode(e) }); err != nil {
			t.Fatal(err)
		}
		all := true
		for _, w := range wants {
			all = all && strings.Contains(log.String(), w)
		}
		if all || time.Now().After(deadline) {
			return log.String()
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestCreateOverLeftovers: a create cut short (here: the sandbox container
// removed by hand, its proxy and volumes left) does not block the next
// apply, which creates the sandbox whole.
func TestCreateOverLeftovers(t *testing.T) {
	b := newBox(t, "e2e-leftovers")
	sp := b.spec("network:\n  allow: [a.example]\n")
	b.apply(sp)
	if out, err := exec.Command("docker", "rm", "-f", ContainerName(b.name)).CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	p := b.apply(sp)
	if c := p.Sandboxes[0]; c.Action != reconcile.ActionCreate {
		t.Errorf("action %s, want create", c.Action)
	}
	if err := b.d.verify(t.Context(), b.name); err != nil {
		t.Error(err)
	}
}

func mustLive(b *box) map[string]*reconcile.Live {
	live, _ := b.observe()
	return live
}

// TestSecretsNeverInConfig: a secret reaches the process through the exec
// environment only; docker inspect, the labels and the trace never show it.
func TestSecretsNeverInConfig(t *testing.T) {
	b := newBox(t, "e2e-secret")
	const secret = "ghp_e2e_Secret_0042"
	b.d.opts.Runner.Redact(secret)
	sp := b.spec("secrets:\n  GITHUB_TOKEN: {env: GH_TOKEN}\n")
	b.apply(sp)
	out, code := b.sh(`echo "$GITHUB_TOKEN"`, map[string]string{"GITHUB_TOKEN": secret})
	if code != 0 || strings.TrimSpace(out) != secret {
		t.Fatalf("the process did not get the secret: %d %q", code, out)
	}
	for _, name := range []string{ContainerName(b.name), EgressName(b.name)} {
		data, _ := exec.Command("docker", "inspect", name).Output()
		if bytes.Contains(data, []byte(secret)) {
			t.Errorf("docker inspect %s shows the secret", name)
		}
	}
	if strings.Contains(b.trace.String(), secret) {
		t.Error("the trace shows the secret")
	}
	live, _ := b.observe()
	rec, _ := json.Marshal(live[b.name].Record)
	if bytes.Contains(rec, []byte(secret)) {
		t.Error("the record label holds the secret")
	}
}

func TestUnmanagedContainer(t *testing.T) {
	env.Require(t)
	b := newBox(t, "e2e-foreign")
	exec.Command("docker", "rm", "-f", ContainerName(b.name)).Run()
	if out, err := exec.Command("docker", "create", "--name", ContainerName(b.name), env.Image, "sleep", "1").CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	defer exec.Command("docker", "rm", "-f", ContainerName(b.name)).Run()
	p := b.plan(b.spec(""))
	if err := p.Err(); err == nil || !strings.Contains(err.Error(), "--adopt") {
		t.Errorf("plan over a container sbx did not create: %v", err)
	}
}

func TestCheckStatic(t *testing.T) {
	env.Require(t)
	if err := driver.CheckStatic(env.Binary); err != nil {
		t.Errorf("static build rejected: %v", err)
	}
	if err := driver.CheckStatic("/bin/sh"); err == nil || !strings.Contains(err.Error(), "CGO_ENABLED=0") {
		t.Errorf("dynamic binary: %v", err)
	}
}

// TestAdoptUnmanagedContainer: --adopt takes over a same-named container
// sbx did not create, as the README says: apply replaces it with sbx's
// sandbox, and a second plan is empty.
func TestAdoptUnmanagedContainer(t *testing.T) {
	env.Require(t)
	b := newBox(t, "e2e-adopt")
	exec.Command("docker", "rm", "-f", ContainerName(b.name)).Run()
	// The container has an anonymous volume (what docker rm -v would
	// remove): adopting replaces the container, never its owner's data.
	if out, err := exec.Command("docker", "run", "-d", "--name", ContainerName(b.name), "-v", "/data", env.Image, "sleep", "600").CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	defer exec.Command("docker", "rm", "-f", ContainerName(b.name)).Run()
	foreign := b.containerID(ContainerName(b.name))
	vol, err := exec.Command("docker", "inspect", "-f", "{{range .Mounts}}{{.Name}}{{end}}", foreign).Output()
	data := strings.TrimSpace(string(vol))
	if err != nil || data == "" {
		t.Fatalf("the container's volume: %v %q", err, vol)
	}
	defer exec.Command("docker", "volume", "rm", "-f", data).Run()
	sp := b.spec("")
	p := b.planWith(sp, reconcile.Options{Adopt: true})
	if err := p.Err(); err != nil {
		t.Fatal(err)
	}
	if !p.Adopts() {
		t.Fatalf("the plan does not adopt: %+v", p.Sandboxes)
	}
	if err := reconcile.Apply(context.Background(), b.d, p, reconcile.ApplyOptions{Records: b.store}); err != nil {
		t.Fatalf("apply --adopt: %v\ntrace:\n%s", err, b.trace.String())
	}
	if id := b.containerID(ContainerName(b.name)); id == foreign {
		t.Error("the foreign container still runs as the sandbox")
	}
	if err := reconcile.Converged(b.plan(sp)); err != nil {
		t.Errorf("after adopting: %v", err)
	}
	if out, code := b.sh("echo adopted", nil); code != 0 || strings.TrimSpace(out) != "adopted" {
		t.Errorf("exec in the adopted sandbox: %d %q", code, out)
	}
	if err := exec.Command("docker", "volume", "inspect", data).Run(); err != nil {
		t.Errorf("adopting removed the container's volume %s: %v", data, err)
	}
}

// TestCreateNameInUse: a container sbx did not create holding one of the
// sandbox's names fails the create with an error that says the name is in
// use (reconcile.ErrNameInUse), not one that points at sandbox.yaml.
func TestCreateNameInUse(t *testing.T) {
	env.Require(t)
	b := newBox(t, "e2e-inuse")
	exec.Command("docker", "rm", "-f", EgressName(b.name)).Run()
	if out, err := exec.Command("docker", "create", "--name", EgressName(b.name), env.Image, "sleep", "1").CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	defer exec.Command("docker", "rm", "-f", EgressName(b.name)).Run()
	p := b.plan(b.spec(""))
	if err := p.Err(); err != nil {
		t.Fatal(err)
	}
	err := reconcile.Apply(context.Background(), b.d, p, reconcile.ApplyOptions{Records: b.store})
	if !errors.Is(err, reconcile.ErrNameInUse) {
		t.Fatalf("apply over a taken name: %v, want reconcile.ErrNameInUse", err)
	}
	if msg := err.Error(); !strings.Contains(msg, "container name "+EgressName(b.name)+" is in use") || !strings.Contains(msg, "--adopt") {
		t.Errorf("the error does not say the name is in use: %v", err)
	}
	if id := b.containerID(EgressName(b.name)); id == "" {
		t.Error("the container holding the name was removed")
	}
}
