//go:build unix

package kubernetes

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/sbxhq/sbx/driver"
	"github.com/sbxhq/sbx/driver/runner"
	"github.com/sbxhq/sbx/egress"
	"github.com/sbxhq/sbx/reconcile"
)

// observeFixture writes what `kubectl get KINDS -l … -o json` lists for n
// sandboxes made by the driver (the Sandbox, the proxy pod, the two
// NetworkPolicies each, from the driver's own object builders) and a fake
// kubectl that prints it; it returns a driver using that kubectl, whose
// trace counts the calls, and the sandboxes' names.
func observeFixture(t testing.TB, n int) (*Driver, *strings.Builder, []string) {
	return observeFixtureWith(t, n, nil)
}

// observeFixtureWith is observeFixture with the listed objects (each
// sandbox's Sandbox, proxy pod and policies, in that order) changed by
// edit first.
func observeFixtureWith(t testing.TB, n int, edit func(t testing.TB, objs []object)) (*Driver, *strings.Builder, []string) {
	dir := t.(interface{ TempDir() string }).TempDir()
	base := testSpec(t, dir)
	var objs []object
	var names []string
	for i := range n {
		sp := *base
		sp.Name = fmt.Sprintf("sb-%d", i)
		names = append(names, sp.Name)
		sb, err := sandboxObject(&sp, "ns", "busybox", "sbx-helper:1", nil, "")
		if err != nil {
			t.Fatal(err)
		}
		proxy, err := proxyPod(&sp, EgressPodName(sp.Name), "ns", "sbx-helper:1", roleEgress, egress.PolicyOf(&sp, nil))
		if err != nil {
			t.Fatal(err)
		}
		objs = append(objs, sb, proxy)
		objs = append(objs, policies(&sp, "ns", roleAgent, roleEgress, sandboxPolicyName(sp.Name), egressPolicyName(sp.Name))...)
	}
	if edit != nil {
		edit(t, objs)
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

// TestObserveStrict: what sbx wrote on a sandbox's objects and cannot
// read back (a hand-edited record or policy annotation, a resource limit
// that is no quantity) fails the observation, naming the object, instead
// of reading as a sandbox without a record, without a policy or without
// limits.
func TestObserveStrict(t *testing.T) {
	rec := &reconcile.Record{ManagedBy: "sbx", FormatVersion: "1", Driver: "kubernetes", Name: "sb-0"}
	recJSON, err := json.Marshal(rec)
	if err != nil {
		t.Fatal(err)
	}
	limit := func(res, q string) func(t testing.TB, objs []object) {
		return func(t testing.TB, objs []object) {
			var s sandboxSpec
			if err := json.Unmarshal(objs[0].Spec, &s); err != nil {
				t.Fatal(err)
			}
			for i := range s.PodTemplate.Spec.Containers {
				if c := &s.PodTemplate.Spec.Containers[i]; c.Name == AgentContainer {
					c.Resources.Limits[res] = q
				}
			}
			var err error
			if objs[0].Spec, err = json.Marshal(s); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, tc := range []struct {
		name string
		edit func(t testing.TB, objs []object)
		err  string // "": observed, with the record rec
	}{
		{name: "record", edit: func(t testing.TB, objs []object) { objs[0].Metadata.Annotations[annRecord] = string(recJSON) }},
		{name: "record not JSON", edit: func(t testing.TB, objs []object) { objs[0].Metadata.Annotations[annRecord] = `{"managedBy":` },
			err: `sandbox "sb-0": the annotation dev.sbx.record of sandboxes.agents.x-k8s.io/sb-0 in namespace ns is not a record sbx wrote`},
		{name: "record of another shape", edit: func(t testing.TB, objs []object) { objs[0].Metadata.Annotations[annRecord] = `["sbx"]` },
			err: `is not a record sbx wrote`},
		{name: "policy not JSON", edit: func(t testing.TB, objs []object) { objs[1].Metadata.Annotations[annPolicy] = "allow all" },
			err: `sandbox "sb-0": the annotation dev.sbx.policy of pod/sb-0.egress in namespace ns is not the policy sbx put in force`},
		{name: "policy gone", edit: func(t testing.TB, objs []object) { delete(objs[1].Metadata.Annotations, annPolicy) },
			err: `is not the policy sbx put in force`},
		{name: "cpu", edit: limit("cpu", "lots"), err: `sandbox "sb-0": sandboxes.agents.x-k8s.io/sb-0 in namespace ns: the agent container's resources.limits: cpu quantity "lots"`},
		{name: "memory", edit: limit("memory", "1Xi"), err: `resources.limits: memory quantity "1Xi"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, _, names := observeFixtureWith(t, 1, func(t testing.TB, objs []object) {
				if objs[0].Metadata.Annotations == nil {
					objs[0].Metadata.Annotations = map[string]string{}
				}
				tc.edit(t, objs)
			})
			live, err := d.Observe(context.Background(), names)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want one saying %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(rec, live["sb-0"].Record); diff != "" {
				t.Errorf("record (-want +got):\n%s", diff)
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
		ls, err := decodeListing("kubectl get", bytes.NewReader(out))
		if err != nil {
			b.Fatal(err)
		}
		for _, n := range names {
			if l, err := d.liveOf(n, place{namespace: "ns"}, ls); err != nil || l == nil {
				b.Fatal("not found", err)
			}
		}
	}
}

// TestObserveListingErrors: a listing kubectl printed but sbx cannot
// read fails naming the command, however much follows the fault; a
// kubectl that fails is reported with what it said, not as a listing cut
// short.
func TestObserveListingErrors(t *testing.T) {
	for _, tc := range []struct {
		name, script, err string
	}{
		{name: "not JSON", script: "echo 'No resources found'", err: "cannot parse its JSON"},
		{name: "fault before a long tail", script: "printf '{\"apiVersion\":\"v1\",\"kind\":\"List\",\"items\":[' ; echo '}'; head -c 4000000 /dev/zero | tr '\\0' ' '; echo ']}'",
			err: "cannot parse its JSON"},
		{name: "not a list", script: `echo '{"apiVersion":"v1","kind":"Pod"}'`, err: "expected a v1 List"},
		{name: "kubectl fails midway", script: `printf '{"apiVersion":"v1","kind":"List","items":['; echo 'error: the server was unable to return a response' >&2; exit 1`,
			err: "the server was unable to return a response"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			kubectl := filepath.Join(dir, "kubectl")
			if err := os.WriteFile(kubectl, []byte("#!/bin/sh\n"+tc.script+"\n"), 0o755); err != nil {
				t.Fatal(err)
			}
			d := New(Options{Runner: &runner.Runner{}, Kubectl: kubectl, Namespace: "ns"})
			_, err := d.Observe(context.Background(), []string{"sb-0"})
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("err = %v, want one saying %q", err, tc.err)
			}
			if !strings.Contains(err.Error(), "kubectl") {
				t.Errorf("err = %v, want it to name the command", err)
			}
		})
	}
}

// TestManaged: sbx ls's listing of the namespace gives each sandbox sbx
// made with its status and the owner its record names (none when it has
// no record, or one that does not read), in one kubectl call.
func TestManaged(t *testing.T) {
	recJSON := func(user, ws string) string {
		b, err := json.Marshal(&reconcile.Record{Owner: reconcile.Owner{User: user, Workspace: ws}})
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	d, trace, _ := observeFixtureWith(t, 4, func(t testing.TB, objs []object) {
		// Four objects per sandbox: the Sandbox, the proxy pod and two
		// policies.
		objs[0].Metadata.Annotations[annRecord] = recJSON("alice", "/home/alice/api")
		objs[0].Status = json.RawMessage(`{"conditions":[{"type":"Ready","status":"True","reason":"DependenciesReady"}]}`)
		objs[4].Metadata.Annotations[annRecord] = recJSON("bob", "/home/bob/api")
		objs[4].Status = json.RawMessage(`{"conditions":[{"type":"Ready","status":"False","reason":"PodNotReady"}]}`)
		objs[8].Metadata.Annotations[annRecord] = `{"managedBy":`
	})
	got, err := d.Managed(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := []driver.Listed{
		{Name: "sb-0", Status: "running", Owner: reconcile.Owner{User: "alice", Workspace: "/home/alice/api"}},
		{Name: "sb-1", Status: "not ready: PodNotReady", Owner: reconcile.Owner{User: "bob", Workspace: "/home/bob/api"}},
		{Name: "sb-2", Status: "not ready"},
		{Name: "sb-3", Status: "not ready"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Managed (-want +got):\n%s", diff)
	}
	if n := strings.Count(trace.String(), "\n$ "); n != 0 || !strings.HasPrefix(trace.String(), "$ ") {
		t.Errorf("Managed made other than one kubectl call:\n%.2000s", trace.String())
	}
}
