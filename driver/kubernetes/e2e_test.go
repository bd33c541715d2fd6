package kubernetes

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sbxhq/sbx/driver"
	"github.com/sbxhq/sbx/driver/runner"
	"github.com/sbxhq/sbx/internal/fixture"
	"github.com/sbxhq/sbx/internal/k8stest"
	"github.com/sbxhq/sbx/reconcile"
	"github.com/sbxhq/sbx/schema"
	"github.com/sbxhq/sbx/spec"
	"github.com/sbxhq/sbx/state"
)

// The e2e tests run against the repository's test cluster
// (test/kubernetes/cluster): they skip without one and fail instead under
// SBX_E2E=1. They run in parallel (the package stays well within go
// test's per-package limit on a loaded machine: most of a test is waiting
// for the cluster), each in a namespace of its own; workspace claims get
// their volumes from the cluster's default StorageClass, as users' do on
// kind or a managed cluster (test/kubernetes/cluster runs a provisioner
// for it, and the namespace's cleanup waits for them to go); the helper image is
// built from this sbx once, under a tag unique to the run, and loaded into
// the cluster once for all of them. Everything is removed when the test,
// or for the image the run, ends. The only servers the sandboxes reach
// are the test's own pods.

var env struct {
	once   sync.Once
	err    error
	dir    string
	binary string // static sbx
	helper string // its helper image, tagged for this run

	load       sync.Once
	loadErr    error
	loadedInto *k8stest.Env // the cluster the helper image was loaded into
}

var runID = func() string {
	b := make([]byte, 4)
	rand.Read(b)
	return hex.EncodeToString(b)
}()

func TestMain(m *testing.M) {
	fixture.SweepDocker()
	fixture.SweepTemp()
	code := m.Run()
	if env.loadedInto != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		if err := env.loadedInto.UnloadImage(ctx, env.helper); err != nil {
			fmt.Fprintf(os.Stderr, "removing the helper image from the cluster: %v\n", err)
			code = 1
		}
		cancel()
	}
	if env.helper != "" {
		exec.Command("docker", "rmi", "-f", env.helper).Run()
	}
	if env.dir != "" {
		os.RemoveAll(env.dir)
	}
	os.Exit(code)
}

// setup builds the static sbx and its helper image once per run.
func setup(t testing.TB) {
	t.Helper()
	env.once.Do(func() {
		env.dir, env.err = fixture.TempDir("sbx-k8s-e2e-")
		if env.err != nil {
			return
		}
		env.binary = filepath.Join(env.dir, "sbx")
		build := exec.Command("go", "build", "-o", env.binary, "github.com/sbxhq/sbx/cmd/sbx")
		build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux")
		if out, err := build.CombinedOutput(); err != nil {
			env.err = fmt.Errorf("building a static sbx: %v: %s", err, out)
			return
		}
		env.helper = "sbx-helper-test:" + runID
		env.err = BuildHelperImage(context.Background(), &runner.Runner{}, "docker", env.binary, env.helper, fixture.Labels("driver/kubernetes")...)
	})
	if env.err != nil {
		t.Fatal(env.err)
	}
}

// loadHelper loads the run's helper image into the cluster, once for all
// the package's tests; TestMain removes it.
func loadHelper(t testing.TB, e *k8stest.Env) {
	t.Helper()
	env.load.Do(func() {
		// Set before the load: one that fails half way may still have
		// left the image in the cluster.
		env.loadedInto = e
		env.loadErr = e.LoadImageCtx(context.Background(), env.helper)
	})
	if env.loadErr != nil {
		t.Fatal(env.loadErr)
	}
}

// cluster is one test's part of the cluster: a namespace, the helper
// image loaded. Workspace claims name no class: the cluster's default
// StorageClass provisions them, as on kind or a managed cluster.
type cluster struct {
	*k8stest.Env
	t  testing.TB
	ns string
	id string // unique to the test, for what it makes outside the cluster
}

// newCluster gives the test a namespace with the helper image.
func newCluster(t testing.TB) *cluster {
	t.Helper()
	e := k8stest.Cluster(t)
	setup(t)
	loadHelper(t, e)
	b := make([]byte, 4)
	rand.Read(b)
	c := &cluster{Env: e, t: t, id: "sbx-test-" + hex.EncodeToString(b)}
	c.ns = e.Namespace(t)
	return c
}

// retainVolumes makes n hostPath PersistentVolumes with the Retain
// reclaim policy, of a class of the test's own (no provisioner serves
// it), in a directory of the test's, and returns the class. They are
// removed when the test ends, after its namespace and claims.
func (c *cluster) retainVolumes(n int) string {
	c.t.Helper()
	class := c.id
	dir := c.t.TempDir()
	c.t.Cleanup(func() {
		if _, err := c.kubectlErr("delete", "persistentvolumes", "-l", "dev.sbx.test="+class, "--ignore-not-found", "--wait=true", "--timeout=120s"); err != nil {
			c.t.Error(err)
		}
	})
	var docs []string
	for i := range n {
		docs = append(docs, fmt.Sprintf(`apiVersion: v1
kind: PersistentVolume
metadata:
  name: %s-%d
  labels: {dev.sbx.test: %s}
spec:
  capacity: {storage: 1Gi}
  accessModes: [ReadWriteOnce]
  storageClassName: %s
  persistentVolumeReclaimPolicy: Retain
  hostPath: {path: %s, type: DirectoryOrCreate}
`, class, i, class, class, filepath.Join(dir, fmt.Sprint(i))))
	}
	c.KubectlInput(c.t, strings.Join(docs, "---\n"), "create", "-f", "-")
	return class
}

// driver is a kubernetes driver for the test's namespace.
func (c *cluster) driver(probeFor time.Duration) *Driver {
	d, _ := c.tracedDriver(probeFor)
	return d
}

// tracedDriver is driver, with more variables in its commands'
// environment, and its trace (SBX_TRACE's) for the test to read.
func (c *cluster) tracedDriver(probeFor time.Duration, extraEnv ...string) (*Driver, *syncBuffer) {
	// The driver's commands are logged when the test fails.
	trace := &syncBuffer{}
	c.t.Cleanup(func() {
		if c.t.Failed() {
			c.t.Logf("the driver's commands:\n%s", trace.String())
		}
	})
	r := &runner.Runner{Env: append(append(os.Environ(), "KUBECONFIG="+c.Kubeconfig), extraEnv...), Trace: trace}
	return New(Options{Runner: r, Kubectl: c.KubectlPath(), Binary: env.binary, HelperImage: env.helper, Namespace: c.ns, ProbeFor: probeFor}), trace
}

// head is the part of a test's sandbox.yaml that places it on the
// cluster: the busybox template, the memory a test sandbox uses (a limit
// of 256 MiB: the tests run in parallel) and a small workspace volume of
// the default class. It ends inside the kubernetes mapping, which tests
// extend.
func (c *cluster) head() string {
	return fmt.Sprintf("template: %s\nresources:\n  memory: %s\nkubernetes:\n  workspaceSize: 64Mi\n", k8stest.BusyboxImage, testMemory)
}

// testMemory is a test sandbox's memory limit (and request): a shell,
// sbx's init and a loop's agent script fit in it many times over.
const testMemory = "256m"

// box is one sandbox of a test, applied through reconcile as sbx apply
// does.
type box struct {
	t     testing.TB
	d     *Driver
	store *reconcile.Store
	key   reconcile.Key
	dir   string // holds sandbox.yaml and the workspace ws/
	name  string
}

func newBox(t testing.TB, d *Driver, name string) *box {
	t.Helper()
	store, err := reconcile.OpenStore(state.Dir(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	key, err := store.Key()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "ws"), 0o755); err != nil {
		t.Fatal(err)
	}
	b := &box{t: t, d: d, store: store, key: key, dir: dir, name: name}
	t.Cleanup(func() {
		if err := b.destroy(); err != nil {
			t.Errorf("destroying sandbox %s: %v", name, err)
		}
	})
	return b
}

// loadSpec resolves the one sandbox of file, with no variables set.
func loadSpec(t testing.TB, file string) *spec.Spec {
	t.Helper()
	sch, err := schema.Compile()
	if err != nil {
		t.Fatal(err)
	}
	res, err := spec.Load([]string{file}, spec.Options{Schema: sch, LookupEnv: func(string) (string, bool) { return "", false }})
	if err != nil {
		doc, _ := os.ReadFile(file)
		t.Fatalf("spec: %v\n%s", err, doc)
	}
	if len(res.Specs) != 1 {
		t.Fatalf("%s declares %d sandboxes, want 1", file, len(res.Specs))
	}
	return res.Specs[0]
}

// spec resolves a sandbox.yaml with body for the box.
func (b *box) spec(body string) *spec.Spec {
	b.t.Helper()
	doc := fmt.Sprintf("version: 1\nname: %s\nagent: shell\ndriver: kubernetes\nworkspace: ws\n%s", b.name, body)
	if err := os.WriteFile(filepath.Join(b.dir, "sandbox.yaml"), []byte(doc), 0o644); err != nil {
		b.t.Fatal(err)
	}
	sp := loadSpec(b.t, filepath.Join(b.dir, "sandbox.yaml"))
	if err := b.d.Configure([]*spec.Spec{sp}); err != nil {
		b.t.Fatal(err)
	}
	return sp
}

// plan observes and plans sp, with the calls of each step.
func (b *box) plan(sp *spec.Spec) (*reconcile.Changes, error) {
	live, err := b.d.Observe(context.Background(), []string{b.name})
	if err != nil {
		return nil, err
	}
	recs, err := b.store.Records(b.d.Name(), []string{b.name})
	if err != nil {
		return nil, err
	}
	if recs[b.name] == nil && live[b.name] != nil {
		recs[b.name] = live[b.name].Record
	}
	hash, err := b.d.BuildHash(sp)
	if err != nil {
		return nil, err
	}
	des, err := reconcile.NewDesired(sp, b.key, hash)
	if err != nil {
		return nil, err
	}
	p := reconcile.Plan([]reconcile.Desired{des}, live, recs, b.d.Caps(), reconcile.Options{})
	if err := p.Err(); err != nil {
		return nil, err
	}
	return p, p.Prepare(b.d, live)
}

// apply plans and applies sp; it returns the plan it applied.
func (b *box) apply(sp *spec.Spec) (*reconcile.Changes, error) {
	p, err := b.plan(sp)
	if err != nil {
		return nil, err
	}
	return p, reconcile.Apply(context.Background(), b.d, p, reconcile.ApplyOptions{Records: b.store})
}

func (b *box) mustApply(sp *spec.Spec) *reconcile.Changes {
	b.t.Helper()
	p, err := b.apply(sp)
	if err != nil {
		b.t.Fatalf("apply: %v", err)
	}
	after, err := b.plan(sp)
	if err != nil {
		b.t.Fatal(err)
	}
	if err := reconcile.Converged(after); err != nil {
		var out bytes.Buffer
		reconcile.RenderWidth(&out, after, false, 0)
		b.t.Fatalf("after apply: %v\n%s", err, out.String())
	}
	return p
}

func (b *box) destroy() error {
	live, err := b.d.Observe(context.Background(), []string{b.name})
	if err != nil {
		return err
	}
	recs, err := b.store.Records(b.d.Name(), []string{b.name})
	if err != nil {
		return err
	}
	p := reconcile.PlanDestroy([]string{b.name}, live, recs, b.d.Caps(), reconcile.Options{Adopt: true})
	if err := p.Err(); err != nil {
		return err
	}
	if err := p.Prepare(b.d, live); err != nil {
		return err
	}
	return reconcile.Apply(context.Background(), b.d, p, reconcile.ApplyOptions{Records: b.store})
}

// labelled lists what the cluster holds labelled as a sandbox's, of
// every kind the driver makes.
func (c *cluster) labelled(name string) []string {
	c.t.Helper()
	out := c.Kubectl(c.t, "-n", c.ns, "get",
		"sandboxes.agents.x-k8s.io,sandboxclaims.extensions.agents.x-k8s.io,sandboxwarmpools.extensions.agents.x-k8s.io,sandboxtemplates.extensions.agents.x-k8s.io,pods,networkpolicies.networking.k8s.io,persistentvolumeclaims",
		"-l", driver.LabelSandbox+"="+name, "-o", "name")
	return strings.Fields(out)
}

func (c *cluster) kubectlErr(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out, errOut bytes.Buffer
	cmd := c.Command(ctx, args...)
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	if err != nil {
		return out.String(), fmt.Errorf("kubectl %s: %v: %s", strings.Join(args, " "), err, errOut.String())
	}
	return out.String(), nil
}

// syncBuffer is a buffer safe for concurrent writes.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
