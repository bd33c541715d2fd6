//go:build unix

package kubernetes

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sbxhq/sbx/driver/runner"
	"github.com/sbxhq/sbx/spec"
)

// TestHelperPush: a create builds and pushes the helper image only when
// it is sbx's own under the file's registry; without a registry it asks
// the nodes first (helperload_test.go has what it does then). A helper image the user gave
// (SBX_K8S_HELPER_IMAGE, a mirror) is never built over nor pushed, with
// or without a registry: docker is not run at all, and the plan says so.
func TestHelperPush(t *testing.T) {
	for _, tc := range []struct {
		name     string
		registry string
		override string
		helper   string // the image the pods run; HASH is the binary's
		desc     string // in the create step's description
		err      string // in createObjects' error: what it did first
	}{
		{name: "own helper, registry", registry: "registry.test:5000/team",
			helper: "registry.test:5000/team/sbx-helper:HASH",
			desc:   "docker build registry.test:5000/team/sbx-helper:HASH (FROM scratch: this sbx) unless present; docker push registry.test:5000/team/sbx-helper:HASH",
			// It goes to build the helper from the binary, which is no
			// executable here.
			err: "is not a Linux executable"},
		{name: "own helper, no registry",
			helper: "sbx-helper:HASH",
			desc:   "kubectl get nodes: unless they list sbx-helper:HASH, docker build it (FROM scratch: this sbx) and stop with the command that loads it into this cluster",
			// It first asks the nodes whether they have it.
			err: "listing the cluster's nodes, to see whether they have sbx's helper image"},
		{name: "given helper, registry", registry: "registry.test:5000/team", override: "mirror.test/sbx-helper:v1",
			helper: "mirror.test/sbx-helper:v1",
			desc:   "(the helper image mirror.test/sbx-helper:v1 is SBX_K8S_HELPER_IMAGE's: sbx neither builds nor pushes it",
			err:    "sbx needs permission to list nodes"},
		{name: "given helper, no registry", override: "mirror.test/sbx-helper:v1",
			helper: "mirror.test/sbx-helper:v1",
			desc:   "(the helper image mirror.test/sbx-helper:v1 is SBX_K8S_HELPER_IMAGE's",
			err:    "sbx needs permission to list nodes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			sp := testSpec(t, dir)
			sp.Kubernetes = &spec.Kubernetes{Registry: tc.registry}
			binary := filepath.Join(dir, "sbx")
			if err := os.WriteFile(binary, []byte("not an executable"), 0o755); err != nil {
				t.Fatal(err)
			}
			hash, err := HelperImage(binary, "")
			if err != nil {
				t.Fatal(err)
			}
			hash = strings.TrimPrefix(hash, "sbx-helper:")
			calls := filepath.Join(dir, "docker-calls")
			docker := filepath.Join(dir, "docker")
			if err := os.WriteFile(docker, []byte("#!/bin/sh\necho \"$@\" >>"+calls+"\nexit 1\n"), 0o755); err != nil {
				t.Fatal(err)
			}
			// A kubectl that cannot list nodes: the create stops at its
			// first kubectl call, after the helper image.
			kubectl := fakeKubectl(t, dir, "Error from server (Forbidden)", 1)
			d := New(Options{Runner: &runner.Runner{}, Kubectl: kubectl, Docker: docker, Binary: binary, HelperImage: tc.override, Namespace: "ns"})

			helper, err := d.helperImage(tc.registry)
			if err != nil {
				t.Fatal(err)
			}
			if want := strings.ReplaceAll(tc.helper, "HASH", hash); helper != want {
				t.Errorf("helper image %q, want %q", helper, want)
			}
			cs, err := d.createCalls(sp, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			if len(cs) != 1 {
				t.Fatalf("the create step is %d calls, want 1", len(cs))
			}
			if want := strings.ReplaceAll(tc.desc, "HASH", hash); !strings.Contains(cs[0].Desc, want) {
				t.Errorf("the create step does not say %q:\n%s", want, cs[0].Desc)
			}
			if got, want := strings.Contains(cs[0].Desc, "docker "), tc.override == ""; got != want {
				t.Errorf("the create step names docker: %v, want %v:\n%s", got, want, cs[0].Desc)
			}
			err = d.createObjects(context.Background(), sp, place{namespace: "ns"}, nil, helper, "busybox", true)
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("createObjects: %v, want an error saying %q", err, tc.err)
			}
			ran, _ := os.ReadFile(calls)
			if len(ran) > 0 {
				t.Errorf("docker ran: %s", ran)
			}
		})
	}
}
