//go:build unix

package kubernetes

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/sbxhq/sbx/driver/runner"
	"github.com/sbxhq/sbx/egress"
	"github.com/sbxhq/sbx/internal/k8stest"
	"github.com/sbxhq/sbx/spec"
)

// testSpec loads a minimal kubernetes sandbox file.
func testSpec(t testing.TB, dir string) *spec.Spec {
	t.Helper()
	if err := os.Mkdir(filepath.Join(dir, "ws"), 0o755); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "sandbox.yaml")
	if err := os.WriteFile(file, []byte("version: 1\nname: base\nagent: shell\ndriver: kubernetes\nworkspace: ws\ntemplate: busybox\nnetwork: {allow: [example.com]}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return k8stest.LoadSpec(t, file)
}

// fakeKubectl writes a kubectl that prints out and exits with code.
func fakeKubectl(t testing.TB, dir, out string, code int) string {
	t.Helper()
	data := filepath.Join(dir, "out")
	if err := os.WriteFile(data, []byte(out), 0o644); err != nil {
		t.Fatal(err)
	}
	kubectl := filepath.Join(dir, "kubectl")
	script := "#!/bin/sh\ncat " + data + "\n"
	if code != 0 {
		script = "#!/bin/sh\ncat " + data + " >&2\nexit 1\n"
	}
	if err := os.WriteFile(kubectl, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return kubectl
}

// node is one Node as `kubectl get nodes -o json` lists it, addresses as
// the test cluster's kubelet reports them.
const node = `{"apiVersion":"v1","kind":"Node","metadata":{"name":"localhost"},"status":{"addresses":[` +
	`{"address":"192.0.2.2","type":"InternalIP"},{"address":"localhost","type":"Hostname"}]}}`

// TestNodeAddrs: the node addresses the proxy always refuses come from a
// listing of the nodes; a listing that cannot be had or read is an
// error, never a proxy that refuses none of them.
func TestNodeAddrs(t *testing.T) {
	for _, tc := range []struct {
		name string
		out  string
		fail bool
		want []string // the proxy's hostAddrs
		err  string   // in the error when want is nil
	}{
		{name: "nodes", out: `{"apiVersion":"v1","kind":"List","items":[` + node + `,` +
			`{"apiVersion":"v1","kind":"Node","metadata":{"name":"n2"},"status":{"addresses":[{"address":"2001:db8::1","type":"ExternalIP"},{"address":"n2.example","type":"InternalDNS"}]}}]}`,
			want: []string{"192.0.2.2", "2001:db8::1"}},
		{name: "forbidden", out: `Error from server (Forbidden): nodes is forbidden: User "u" cannot list resource "nodes"`, fail: true, err: "sbx needs permission to list nodes"},
		{name: "not JSON", out: `NAME STATUS`, err: "cannot parse its JSON"},
		{name: "not a list", out: node, err: `expected a v1 List, got "v1" "Node"`},
		{name: "not a node", out: `{"apiVersion":"v1","kind":"List","items":[{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"}}]}`, err: `item 0: expected a v1 Node`},
		{name: "addresses not a list", out: `{"apiVersion":"v1","kind":"List","items":[{"apiVersion":"v1","kind":"Node","metadata":{"name":"n"},"status":{"addresses":"192.0.2.2"}}]}`, err: "cannot parse its JSON"},
		{name: "unknown type", out: `{"apiVersion":"v1","kind":"List","items":[{"apiVersion":"v1","kind":"Node","metadata":{"name":"n"},"status":{"addresses":[{"address":"192.0.2.2","type":"PodIP"}]}}]}`, err: `node n: unknown address type "PodIP"`},
		{name: "not an address", out: `{"apiVersion":"v1","kind":"List","items":[{"apiVersion":"v1","kind":"Node","metadata":{"name":"n"},"status":{"addresses":[{"address":"n.example","type":"InternalIP"}]}}]}`, err: `node n: InternalIP "n.example" is not an IP address`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			sp := testSpec(t, dir)
			code := 0
			if tc.fail {
				code = 1
			}
			d := New(Options{Runner: &runner.Runner{}, Kubectl: fakeKubectl(t, dir, tc.out, code), Namespace: "ns"})
			nodes, err := d.nodeAddrs(context.Background(), place{namespace: "ns"})
			var objs []object
			if err == nil {
				objs, err = newSandboxObjects(sp, place{namespace: "ns"}, nil, "sbx-helper:1", "busybox", nodes, "")
			}
			if tc.want == nil {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want one saying %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var pol egress.Policy
			if err := json.Unmarshal([]byte(objs[0].Metadata.Annotations[annPolicy]), &pol); err != nil {
				t.Fatalf("the proxy pod's policy: %v", err)
			}
			if diff := cmp.Diff(tc.want, pol.HostAddrs); diff != "" {
				t.Errorf("the proxy's host addresses (-want +got):\n%s", diff)
			}
		})
	}
}
