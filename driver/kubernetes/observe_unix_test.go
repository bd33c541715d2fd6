//go:build unix

package kubernetes

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sbxhq/sbx/driver/runner"
	"github.com/sbxhq/sbx/egress"
	"github.com/sbxhq/sbx/schema"
	"github.com/sbxhq/sbx/spec"
)

// observeFixture writes what `kubectl get KINDS -l … -o json` lists for n
// sandboxes made by the driver (the Sandbox, the proxy pod, the two
// NetworkPolicies each, from the driver's own object builders) and a fake
// kubectl that prints it; it returns a driver using that kubectl, whose
// trace counts the calls, and the sandboxes' names.
func observeFixture(t testing.TB, n int) (*Driver, *strings.Builder, []string) {
	dir := t.(interface{ TempDir() string }).TempDir()
	sch, err := schema.Compile()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "ws"), 0o755); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "sandbox.yaml")
	os.WriteFile(file, []byte("version: 1\nname: base\nagent: shell\ndriver: kubernetes\nworkspace: ws\ntemplate: busybox\nnetwork: {allow: [example.com]}\n"), 0o644)
	res, err := spec.Load([]string{file}, spec.Options{Schema: sch, LookupEnv: func(string) (string, bool) { return "", false }})
	if err != nil {
		t.Fatal(err)
	}
	var objs []object
	var names []string
	for i := range n {
		sp := *res.Specs[0]
		sp.Name = fmt.Sprintf("sb-%d", i)
		names = append(names, sp.Name)
		sb, err := sandboxObject(&sp, "ns", "busybox", "sbx-helper:1", nil)
		if err != nil {
			t.Fatal(err)
		}
		proxy, err := proxyPod(&sp, egressPodName(sp.Name), "ns", "sbx-helper:1", roleEgress, egress.PolicyOf(&sp, nil))
		if err != nil {
			t.Fatal(err)
		}
		objs = append(objs, sb, proxy)
		objs = append(objs, policies(&sp, "ns", roleAgent, roleEgress, sandboxPolicyName(sp.Name), egressPolicyName(sp.Name))...)
	}
	doc, err := applyList(objs...)
	if err != nil {
		t.Fatal(err)
	}
	listing := filepath.Join(dir, "list.json")
	if err := os.WriteFile(listing, doc, 0o644); err != nil {
		t.Fatal(err)
	}
	kubectl := filepath.Join(dir, "kubectl")
	if err := os.WriteFile(kubectl, []byte("#!/bin/sh\nexec cat "+listing+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	trace := &strings.Builder{}
	d := New(Options{Runner: &runner.Runner{Trace: trace}, Kubectl: kubectl, Namespace: "ns"})
	return d, trace, names
}

// TestObserveListsOnce: observing 1, 50 or 500 sandboxes is one kubectl
// call (one list request per kind), never one per sandbox, and finds
// every sandbox.
func TestObserveListsOnce(t *testing.T) {
	for _, n := range []int{1, 50, 500} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			d, trace, names := observeFixture(t, n)
			live, err := d.Observe(context.Background(), names)
			if err != nil {
				t.Fatal(err)
			}
			found := 0
			for _, l := range live {
				if l.Exists {
					found++
				}
			}
			if found != n {
				t.Errorf("observed %d of %d sandboxes", found, n)
			}
			calls := 0
			for _, line := range strings.Split(trace.String(), "\n") {
				if strings.HasPrefix(line, "$ ") {
					calls++
				}
			}
			if calls != 1 {
				t.Errorf("%d kubectl calls for %d sandboxes, want 1:\n%.2000s", calls, n, trace.String())
			}
		})
	}
}

// BenchmarkObserve500 is sbx's own time to observe 500 sandboxes, with
// kubectl a process that prints the listing (BENCHMARKS.md).
func BenchmarkObserve500(b *testing.B) {
	d, _, names := observeFixture(b, 500)
	for b.Loop() {
		if _, err := d.Observe(context.Background(), names); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkObserve500Own is the part of BenchmarkObserve500 that is sbx's
// own: parsing the listing and building each sandbox's Live, without
// kubectl.
func BenchmarkObserve500Own(b *testing.B) {
	d, _, names := observeFixture(b, 500)
	out, err := d.run(context.Background(), place{namespace: "ns"}, "get")
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(out)))
	for b.Loop() {
		ls, err := parseListing("kubectl get", out)
		if err != nil {
			b.Fatal(err)
		}
		for _, n := range names {
			if d.liveOf(n, place{namespace: "ns"}, ls) == nil {
				b.Fatal("not found")
			}
		}
	}
}
