package k8stest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/sbxhq/sbx/driver"
	"github.com/sbxhq/sbx/reconcile"
	"github.com/sbxhq/sbx/schema"
	"github.com/sbxhq/sbx/spec"
	"github.com/sbxhq/sbx/state"
)

// Backend is what a Box drives: the kubernetes driver, whose package
// this one cannot import (the driver's own tests import this one).
type Backend interface {
	driver.Backend
	driver.Execer
	Configure(specs []*spec.Spec) error
}

// Box is one sandbox of a test, applied through reconcile as sbx apply
// does, and destroyed when the test ends.
type Box struct {
	T     testing.TB
	D     Backend
	Store *reconcile.Store
	Key   reconcile.Key
	Dir   string // holds sandbox.yaml and the workspace ws/
	Name  string
}

// NewBox is sandbox name of d for the test, with a state directory and a
// workspace of its own.
func NewBox(t testing.TB, d Backend, name string) *Box {
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
	b := &Box{T: t, D: d, Store: store, Key: key, Dir: dir, Name: name}
	t.Cleanup(func() {
		if err := b.Destroy(); err != nil {
			t.Errorf("destroying sandbox %s: %v", name, err)
		}
	})
	return b
}

// LoadSpec resolves the one sandbox of file, with no variables set.
func LoadSpec(t testing.TB, file string) *spec.Spec {
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

// Spec resolves a sandbox.yaml with body for the box.
func (b *Box) Spec(body string) *spec.Spec {
	b.T.Helper()
	doc := fmt.Sprintf("version: 1\nname: %s\nagent: shell\ndriver: kubernetes\nworkspace: ws\n%s", b.Name, body)
	if err := os.WriteFile(filepath.Join(b.Dir, "sandbox.yaml"), []byte(doc), 0o644); err != nil {
		b.T.Fatal(err)
	}
	sp := LoadSpec(b.T, filepath.Join(b.Dir, "sandbox.yaml"))
	if err := b.D.Configure([]*spec.Spec{sp}); err != nil {
		b.T.Fatal(err)
	}
	return sp
}

// Plan observes and plans sp, with the calls of each step.
func (b *Box) Plan(sp *spec.Spec) (*reconcile.Changes, error) {
	live, err := b.D.Observe(context.Background(), []string{b.Name})
	if err != nil {
		return nil, err
	}
	recs, err := b.Store.Records(b.D.Name(), []string{b.Name})
	if err != nil {
		return nil, err
	}
	if recs[b.Name] == nil && live[b.Name] != nil {
		recs[b.Name] = live[b.Name].Record
	}
	hash, err := b.D.BuildHash(sp)
	if err != nil {
		return nil, err
	}
	des, err := reconcile.NewDesired(sp, b.Key, hash)
	if err != nil {
		return nil, err
	}
	p := reconcile.Plan([]reconcile.Desired{des}, live, recs, b.D.Caps(), reconcile.Options{})
	if err := p.Err(); err != nil {
		return nil, err
	}
	return p, p.Prepare(b.D, live)
}

// Apply plans and applies sp; it returns the plan it applied.
func (b *Box) Apply(sp *spec.Spec) (*reconcile.Changes, error) {
	p, err := b.Plan(sp)
	if err != nil {
		return nil, err
	}
	return p, reconcile.Apply(context.Background(), b.D, p, reconcile.ApplyOptions{Records: b.Store})
}

// MustApply is Apply, failing the test unless it succeeds and the plan
// after it is empty.
func (b *Box) MustApply(sp *spec.Spec) *reconcile.Changes {
	b.T.Helper()
	p, err := b.Apply(sp)
	if err != nil {
		b.T.Fatalf("apply: %v", err)
	}
	after, err := b.Plan(sp)
	if err != nil {
		b.T.Fatal(err)
	}
	if err := reconcile.Converged(after); err != nil {
		var out bytes.Buffer
		reconcile.RenderWidth(&out, after, false, 0)
		b.T.Fatalf("after apply: %v\n%s", err, out.String())
	}
	return p
}

// Destroy plans and applies the sandbox's destruction.
func (b *Box) Destroy() error {
	live, err := b.D.Observe(context.Background(), []string{b.Name})
	if err != nil {
		return err
	}
	recs, err := b.Store.Records(b.D.Name(), []string{b.Name})
	if err != nil {
		return err
	}
	p := reconcile.PlanDestroy([]string{b.Name}, live, recs, b.D.Caps(), reconcile.Options{Adopt: true})
	if err := p.Err(); err != nil {
		return err
	}
	if err := p.Prepare(b.D, live); err != nil {
		return err
	}
	return reconcile.Apply(context.Background(), b.D, p, reconcile.ApplyOptions{Records: b.Store})
}

// Sh runs a shell command in the sandbox and returns its exit status and
// output.
func (b *Box) Sh(script string, env map[string]string) (int, string) {
	b.T.Helper()
	var out bytes.Buffer
	code, err := b.D.Exec(context.Background(), b.Name, []string{"sh", "-c", script}, driver.ExecOptions{Env: env, Stdout: &out, Stderr: &out})
	if err != nil {
		b.T.Fatalf("exec %q: %v", script, err)
	}
	return code, out.String()
}
