package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/sbxhq/sbx/driver/kubernetes"
	"github.com/sbxhq/sbx/internal/k8stest"
)

// TestRegistry drives the built sbx, as a user would, with a template
// built from a Dockerfile and a registry named in sandbox.yaml
// (kubernetes.registry): sbx apply builds the template, pushes it and
// sbx's helper image to the registry, and the real node (not kwok) pulls
// both from there; the build's content is what sbx shell sees; a changed
// build context is planned as a rebuild and replacement, pushed under a
// new tag and pulled; sbx destroy leaves nothing labelled.
//
// The registry is the test's own (go-containerregistry's in-memory one,
// on 127.0.0.1), which docker and the cluster's containerd talk to over
// plain HTTP as they do for any loopback registry: docker's default
// insecure registries include 127.0.0.0/8, and containerd 1.6's CRI uses
// http for localhost and 127.0.0.1 without a hosts configuration
// (pkg/cri/server/image_pull.go, defaultScheme). Its port is new to the
// run, so nothing in docker or in the cluster had these images before.
func TestRegistry(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	c.enforce()
	busybox, err := exec.LookPath("busybox")
	if err != nil {
		if os.Getenv("SBX_E2E") == "1" {
			t.Fatalf("SBX_E2E=1 but the template needs busybox-static: %v", err)
		}
		t.Skip(err)
	}
	reg := newRegistry(t)
	// Cleanups run last first: destroy (registered below), then the
	// images of the registry in docker and in the cluster, then the
	// registry stops.
	c.RemovePulled(t, reg.host+"/")
	removeDockerImages(t, reg.host+"/")
	if names := imagesUnder(c.Images(t), reg.host+"/"); len(names) > 0 {
		t.Fatalf("the cluster has images from the new registry before sbx ran: %q", names)
	}

	dir := t.TempDir()
	ws, tpl := filepath.Join(dir, "ws"), filepath.Join(dir, "template")
	for _, d := range []string{ws, tpl} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write := func(path, s string, mode os.FileMode) {
		t.Helper()
		if err := os.WriteFile(path, []byte(s), mode); err != nil {
			t.Fatal(err)
		}
	}
	bb, err := os.ReadFile(busybox)
	if err != nil {
		t.Fatal(err)
	}
	write(filepath.Join(tpl, "busybox"), string(bb), 0o755)
	// The cluster's busybox image (k8stest.BusyboxImage) is not in
	// docker, so the template builds the same FROM scratch, with the
	// marker on top.
	write(filepath.Join(tpl, "Dockerfile"), `FROM scratch
COPY busybox /bin/busybox
RUN ["/bin/busybox", "--install", "-s", "/bin"]
RUN ["/bin/busybox", "mkdir", "-m", "1777", "/tmp"]
COPY marker /sbx-test-marker
CMD ["/bin/sh"]
`, 0o644)
	marker := filepath.Join(tpl, "marker")
	write(marker, "first build "+k8stest.RunID+"\n", 0o644)
	const name = "reg"
	repo := reg.host + "/run-" + k8stest.RunID // the registry and path sbx pushes under
	file := filepath.Join(dir, "sandbox.yaml")
	write(file, fmt.Sprintf(`version: 1
name: %s
agent: shell
driver: kubernetes
workspace: ws
template:
  build:
    context: template
    dockerfile: Dockerfile
resources:
  memory: %s
kubernetes:
  namespace: %s
  registry: %s
  workspaceSize: 64Mi
`, name, k8stest.TestMemory, c.NS, repo), 0o644)

	// No SBX_K8S_HELPER_IMAGE: the helper image is the one sbx builds
	// and pushes to the registry.
	// sbx builds its helper image from a copy of the static sbx with the
	// run's id appended (an ELF runs with trailing bytes): an image of the
	// run's own, not the loaded helper (newCluster) under another name.
	// The cluster's containerd 1.6 CRI, once it pulled an image from a
	// registry and the image was removed, did not take the same image ID
	// from a later import: the next run's pods tried to pull the loaded
	// helper from Docker Hub.
	self := filepath.Join(dir, "sbx")
	bin, err := os.ReadFile(c.Binary)
	if err != nil {
		t.Fatal(err)
	}
	write(self, string(bin)+"\nsbx TestRegistry "+k8stest.RunID+"\n", 0o755)
	sbx := c.CLI(ws, filepath.Join(dir, "state"), "SBX_STATIC_BINARY="+self)
	t.Cleanup(func() {
		if out, err := sbx("destroy", "-y"); err != nil {
			t.Errorf("sbx destroy: %v\n%s", err, out)
		}
	})
	helper, err := kubernetes.HelperImage(self, repo)
	if err != nil {
		t.Fatal(err)
	}
	// want is the registry's and the pods' images after an apply of the
	// file as it is now: the template under the tag of its build hash.
	want := func() (template string) {
		t.Helper()
		sp := k8stest.LoadSpec(t, file)
		h, err := kubernetes.New(kubernetes.Options{}).BuildHash(sp)
		if err != nil {
			t.Fatal(err)
		}
		template = kubernetes.TemplateImage(sp, h)
		if !strings.HasPrefix(template, repo+"/sbx-template-"+name+":") {
			t.Fatalf("the template's image is %s, not under %s", template, repo)
		}
		return template
	}
	first := want()
	// converged checks a plan after an apply has nothing left to do: the
	// driver observes the pushed image as the file's.
	converged := func() {
		t.Helper()
		out, err := sbx("plan")
		if err != nil || !strings.Contains(out, "No changes. Sandbox \""+name+"\" matches its sandbox.yaml") {
			t.Errorf("sbx plan after apply: %v\n%s", err, out)
		}
	}

	if out, err := sbx("apply", "-y"); err != nil {
		t.Fatalf("sbx apply: %v\n%s", err, out)
	}
	converged()
	reg.checkTags(t, map[string][]string{
		"run-" + k8stest.RunID + "/sbx-helper":           {tagOf(helper)},
		"run-" + k8stest.RunID + "/sbx-template-" + name: {tagOf(first)},
	})
	c.checkPods(t, name, first, helper)
	reg.checkPulled(t, first, helper)
	if got := imagesUnder(c.Images(t), reg.host+"/"); !slices.Contains(got, first) || !slices.Contains(got, helper) {
		t.Errorf("the cluster's images from the registry: %q, want %s and %s among them", got, first, helper)
	}
	if out, err := sbx("shell", "--", "cat", "/sbx-test-marker"); err != nil || out != "first build "+k8stest.RunID+"\n" {
		t.Fatalf("sbx shell -- cat /sbx-test-marker: %v %q", err, out)
	}

	// A new build context: the plan says the template is built again,
	// pushed under a new tag and the sandbox replaced. The change is a
	// widening (THREATS.md 3: the agent may have written the context), so
	// apply -y alone refuses it and pushes nothing.
	write(marker, "second build "+k8stest.RunID+"\n", 0o644)
	second := want()
	if second == first {
		t.Fatalf("the changed build context has the same image %s", first)
	}
	out, err := sbx("plan")
	if err != nil {
		t.Fatalf("sbx plan: %v\n%s", err, out)
	}
	for _, s := range []string{
		"-/+ sandbox \"" + name + "\"",
		"~ template.build: ",
		"build template of sandbox \"" + name + "\"",
		"docker push -q " + second + "\n",
		"Sandbox " + name + " (" + second + ",",
		"! template build context or Dockerfile changed (" + tpl + ")",
		"1 to replace",
	} {
		if !strings.Contains(out, s) {
			t.Errorf("sbx plan after the build context changed does not say %q:\n%s", s, out)
		}
	}
	if out, err := sbx("apply", "-y"); err == nil || !strings.Contains(out, "--approve-widening") {
		t.Errorf("sbx apply -y of a changed build context: %v, want a refusal that asks for --approve-widening:\n%s", err, out)
	}
	reg.checkTags(t, map[string][]string{
		"run-" + k8stest.RunID + "/sbx-helper":           {tagOf(helper)},
		"run-" + k8stest.RunID + "/sbx-template-" + name: {tagOf(first)},
	})
	if out, err := sbx("apply", "-y", "--approve-widening"); err != nil {
		t.Fatalf("sbx apply after the build context changed: %v\n%s", err, out)
	}
	converged()
	reg.checkTags(t, map[string][]string{
		"run-" + k8stest.RunID + "/sbx-helper":           {tagOf(helper)},
		"run-" + k8stest.RunID + "/sbx-template-" + name: sorted(tagOf(first), tagOf(second)),
	})
	c.checkPods(t, name, second, helper)
	reg.checkPulled(t, second)
	if out, err := sbx("shell", "--", "cat", "/sbx-test-marker"); err != nil || out != "second build "+k8stest.RunID+"\n" {
		t.Fatalf("sbx shell -- cat /sbx-test-marker after the rebuild: %v %q", err, out)
	}

	if out, err := sbx("destroy", "-y"); err != nil {
		t.Fatalf("sbx destroy: %v\n%s", err, out)
	}
	if left := c.Labelled(name); len(left) > 0 {
		t.Errorf("destroy left: %v", left)
	}
}

// testRegistry is an OCI registry for one test: go-containerregistry's
// in-memory registry served on 127.0.0.1. It records the manifests the
// cluster's containerd asked for (its requests carry User-Agent
// containerd/VERSION; docker's carry docker/VERSION).
type testRegistry struct {
	host string // 127.0.0.1:PORT
	log  k8stest.SyncBuffer

	mu    sync.Mutex
	pulls map[string]bool // REPOSITORY:REFERENCE of each manifest containerd asked for
}

func newRegistry(t *testing.T) *testRegistry {
	t.Helper()
	r := &testRegistry{pulls: map[string]bool{}}
	h := registry.New(registry.Logger(log.New(&r.log, "", 0)))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if strings.HasPrefix(req.UserAgent(), "containerd/") {
			// Distribution spec, pulling manifests:
			// /v2/<name>/manifests/<reference>, by HEAD or GET.
			if repo, ref, ok := strings.Cut(strings.TrimPrefix(req.URL.Path, "/v2/"), "/manifests/"); ok {
				r.mu.Lock()
				r.pulls[repo+":"+ref] = true
				r.mu.Unlock()
			}
		}
		h.ServeHTTP(w, req)
	}))
	t.Cleanup(func() {
		srv.Close()
		if t.Failed() {
			t.Logf("the registry's requests:\n%s", r.log.String())
		}
	})
	r.host = srv.Listener.Addr().String()
	return r
}

// get decodes the JSON the registry answers a GET of path with.
func (r *testRegistry) get(t *testing.T, path string, v any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+r.host+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s: %s", path, resp.Status, body)
	}
	if err := json.Unmarshal(body, v); err != nil {
		t.Fatalf("GET %s: %v: %s", path, err, body)
	}
}

// checkTags checks the registry holds exactly want: its repositories
// (GET /v2/_catalog, {"repositories": [...]}) and the tags of each (GET
// /v2/<name>/tags/list, {"name": ..., "tags": [...]}; Docker Registry
// HTTP API V2, "Listing Repositories" and "Listing Image Tags").
func (r *testRegistry) checkTags(t *testing.T, want map[string][]string) {
	t.Helper()
	var cat struct {
		Repositories []string `json:"repositories"`
	}
	r.get(t, "/v2/_catalog", &cat)
	got := map[string][]string{}
	for _, repo := range cat.Repositories {
		var tags struct {
			Name string   `json:"name"`
			Tags []string `json:"tags"`
		}
		r.get(t, "/v2/"+repo+"/tags/list", &tags)
		if tags.Name != repo {
			t.Errorf("the tags of %s are named %q", repo, tags.Name)
		}
		got[repo] = sorted(tags.Tags...)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the registry's repositories and tags (-want +got):\n%s", diff)
	}
}

// checkPulled checks the cluster's containerd asked the registry for the
// manifest of each image (REGISTRY/REPOSITORY:TAG).
func (r *testRegistry) checkPulled(t *testing.T, images ...string) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, img := range images {
		if !r.pulls[strings.TrimPrefix(img, r.host+"/")] {
			t.Errorf("the cluster's containerd did not pull %s from the registry (it asked for %v)", img, slices.Sorted(maps.Keys(r.pulls)))
		}
	}
}

// checkPods checks the sandbox's pod and its egress proxy's run on the
// real node, from template (the agent) and helper (everything else), as
// the pods' specs and statuses say (core/v1 Pod: spec.nodeName,
// spec.initContainers[].image, spec.containers[].image,
// status.containerStatuses[].image).
func (c *cluster) checkPods(t *testing.T, name, template, helper string) {
	t.Helper()
	type container struct {
		Name  string `json:"name"`
		Image string `json:"image"`
	}
	for _, pod := range []string{kubernetes.SandboxPodName(name), kubernetes.EgressPodName(name)} {
		var p struct {
			Spec struct {
				NodeName       string      `json:"nodeName"`
				InitContainers []container `json:"initContainers"`
				Containers     []container `json:"containers"`
			} `json:"spec"`
			Status struct {
				ContainerStatuses []container `json:"containerStatuses"`
			} `json:"status"`
		}
		out := c.Kubectl(t, "-n", c.NS, "get", "pod/"+pod, "-o", "json")
		if err := json.Unmarshal([]byte(out), &p); err != nil {
			t.Fatalf("pod %s: %v", pod, err)
		}
		if p.Spec.NodeName != "localhost" {
			t.Errorf("pod %s runs on node %q, want the real node localhost", pod, p.Spec.NodeName)
		}
		got := map[string]string{}
		for _, ct := range slices.Concat(p.Spec.InitContainers, p.Spec.Containers) {
			got[ct.Name] = ct.Image
		}
		for _, st := range p.Status.ContainerStatuses {
			got["status of "+st.Name] = st.Image
		}
		want := map[string]string{}
		for n := range got {
			want[n] = helper
			if pod == kubernetes.SandboxPodName(name) && (n == kubernetes.AgentContainer || n == "status of "+kubernetes.AgentContainer) {
				want[n] = template
			}
		}
		if pod == kubernetes.SandboxPodName(name) && got[kubernetes.AgentContainer] == "" {
			t.Errorf("pod %s has no container %s: %v", pod, kubernetes.AgentContainer, got)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("the images of pod %s (-want +got):\n%s", pod, diff)
		}
	}
}

// removeDockerImages removes, when the test ends, every docker image
// named under prefix (what sbx built and pushed to the test's registry),
// and fails the test if one stays.
func removeDockerImages(t *testing.T, prefix string) {
	t.Helper()
	list := func() ([]string, error) {
		out, err := exec.Command("docker", "image", "ls", "--format", "{{.Repository}}:{{.Tag}}").Output()
		if err != nil {
			return nil, fmt.Errorf("docker image ls: %v", err)
		}
		return imagesUnder(strings.Fields(string(out)), prefix), nil
	}
	t.Cleanup(func() {
		names, err := list()
		if err != nil {
			t.Error(err)
			return
		}
		if len(names) > 0 {
			if out, err := exec.Command("docker", append([]string{"rmi"}, names...)...).CombinedOutput(); err != nil {
				t.Errorf("docker rmi: %v: %s", err, out)
			}
		}
		if left, err := list(); err != nil || len(left) > 0 {
			t.Errorf("docker images left under %s: %q %v", prefix, left, errOrNil(err))
		}
	})
}

func errOrNil(err error) any {
	if err == nil {
		return ""
	}
	return err
}

// imagesUnder are the names that start with prefix.
func imagesUnder(names []string, prefix string) []string {
	var under []string
	for _, n := range names {
		if strings.HasPrefix(n, prefix) {
			under = append(under, n)
		}
	}
	return under
}

// tagOf is the tag of an image reference REPOSITORY:TAG.
func tagOf(image string) string {
	return image[strings.LastIndex(image, ":")+1:]
}

func sorted(s ...string) []string {
	return slices.Sorted(slices.Values(s))
}
