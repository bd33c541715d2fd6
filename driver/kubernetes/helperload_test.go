package kubernetes

import (
	"fmt"
	"strings"
	"testing"
)

// nodeJSON is one Node of `kubectl get nodes -o json` as the clusters
// make them (core/v1 Node).
func nodeJSON(name, providerID, runtime string, labels map[string]string, tainted bool, images ...string) string {
	lb := []string{}
	for k, v := range labels {
		lb = append(lb, fmt.Sprintf("%q:%q", k, v))
	}
	taints := ""
	if tainted {
		taints = `,"taints":[{"key":"kwok.x-k8s.io/node","value":"fake","effect":"NoSchedule"}]`
	}
	imgs := []string{}
	for _, i := range images {
		imgs = append(imgs, fmt.Sprintf(`{"names":[%q],"sizeBytes":1}`, i))
	}
	return fmt.Sprintf(`{"apiVersion":"v1","kind":"Node","metadata":{"name":%q,"labels":{%s}},"spec":{"providerID":%q%s},"status":{"images":[%s],"nodeInfo":{"containerRuntimeVersion":%q}}}`,
		name, strings.Join(lb, ","), providerID, taints, strings.Join(imgs, ","), runtime)
}

func nodeList(items ...string) []byte {
	return []byte(`{"apiVersion":"v1","kind":"List","items":[` + strings.Join(items, ",") + `]}`)
}

// TestLoadCommand: sbx tells kind, k3d and minikube clusters by what
// those tools put on their nodes and says their own load command; any
// other cluster gets the generic save-and-import for its runtime, on its
// schedulable nodes.
func TestLoadCommand(t *testing.T) {
	const img = "sbx-helper:0123456789ab"
	for _, tc := range []struct {
		name       string
		nodes      []byte
		tool, want string
	}{
		{"kind", nodeList(nodeJSON("dev-control-plane", "kind://docker/dev/dev-control-plane", "containerd://2.1.1", nil, false)),
			"kind", "kind load docker-image sbx-helper:0123456789ab --name dev"},
		{"k3d", nodeList(nodeJSON("k3d-my-lab-server-0", "k3s://k3d-my-lab-server-0", "containerd://2.0.5-k3s1", map[string]string{"node.kubernetes.io/instance-type": "k3s"}, false)),
			"k3d", "k3d image import sbx-helper:0123456789ab -c my-lab"},
		{"minikube", nodeList(nodeJSON("work", "", "docker://28.1.1", map[string]string{"minikube.k8s.io/name": "work", "minikube.k8s.io/primary": "true"}, false)),
			"minikube", "minikube image load sbx-helper:0123456789ab -p work"},
		{"containerd", nodeList(nodeJSON("localhost", "", "containerd://1.6.20", nil, false), nodeJSON("kwok-node-0", "", "kwok-0.8.0", nil, true)),
			"", "on each node (localhost), as root: docker save sbx-helper:0123456789ab | ctr -n k8s.io images import -"},
		{"cri-o", nodeList(nodeJSON("a", "", "cri-o://1.30.0", nil, false), nodeJSON("b", "", "cri-o://1.30.0", nil, false)),
			"", "on each node (a, b), as root: docker save sbx-helper:0123456789ab | podman load"},
		{"plain k3s is not k3d", nodeList(nodeJSON("box", "k3s://box", "containerd://2.0.5-k3s1", nil, false)),
			"", "on each node (box), as root: docker save sbx-helper:0123456789ab | ctr -n k8s.io images import -"},
		{"mixed runtimes", nodeList(nodeJSON("a", "", "containerd://2.0.0", nil, false), nodeJSON("b", "", "cri-o://1.30.0", nil, false)),
			"", "on each node (a, b), as root: docker save sbx-helper:0123456789ab | <your container runtime's image import>"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nodes, err := parseNodes(tc.nodes)
			if err != nil {
				t.Fatal(err)
			}
			tool, cmd := loadCommand(nodes, img)
			if tool != tc.tool || cmd != tc.want {
				t.Errorf("loadCommand = %q, %q; want %q, %q", tool, cmd, tc.tool, tc.want)
			}
		})
	}
}

// TestMissingHelper: the helper image is missing only when a node a
// sandbox may land on lists all its images and not that one; a node
// listing the kubelet's maximum may have it unlisted, and a tainted node
// (kwok's) takes no sandbox.
func TestMissingHelper(t *testing.T) {
	const img = "sbx-helper:0123456789ab"
	many := make([]string, nodeStatusMaxImages)
	for i := range many {
		many[i] = fmt.Sprintf("docker.io/library/big-%d:latest", i)
	}
	for _, tc := range []struct {
		name  string
		nodes []byte
		want  bool
	}{
		{"listed", nodeList(nodeJSON("n", "", "containerd://1.6.20", nil, false, "docker.io/library/sbx-k8s-pause:local", "docker.io/library/sbx-helper:0123456789ab")), false},
		{"not listed", nodeList(nodeJSON("n", "", "containerd://1.6.20", nil, false, "docker.io/library/sbx-k8s-pause:local")), true},
		{"another tag", nodeList(nodeJSON("n", "", "containerd://1.6.20", nil, false, "docker.io/library/sbx-helper:ffffffffffff")), true},
		{"list full", nodeList(nodeJSON("n", "", "containerd://1.6.20", nil, false, many...)), false},
		{"one node of two lacks it", nodeList(nodeJSON("a", "", "containerd://1.6.20", nil, false, "docker.io/library/sbx-helper:0123456789ab"), nodeJSON("b", "", "containerd://1.6.20", nil, false)), true},
		{"only a tainted node lacks it", nodeList(nodeJSON("a", "", "containerd://1.6.20", nil, false, "docker.io/library/sbx-helper:0123456789ab"), nodeJSON("kwok-node-0", "", "kwok-0.8.0", nil, true)), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nodes, err := parseNodes(tc.nodes)
			if err != nil {
				t.Fatal(err)
			}
			if got := missingHelper(nodes, img); got != tc.want {
				t.Errorf("missingHelper = %v, want %v", got, tc.want)
			}
		})
	}
	if _, err := parseNodes([]byte(`{"apiVersion":"v1","kind":"Node"}`)); err == nil {
		t.Error("a Node read as a List of nodes")
	}
}

func TestFullImageName(t *testing.T) {
	for in, want := range map[string]string{
		"sbx-helper:abc":                   "docker.io/library/sbx-helper:abc",
		"me/sbx-helper:abc":                "docker.io/me/sbx-helper:abc",
		"registry.example.com/x/sbx:abc":   "registry.example.com/x/sbx:abc",
		"localhost/sbx-helper:abc":         "localhost/sbx-helper:abc",
		"127.0.0.1:5000/sbx-helper:abc":    "127.0.0.1:5000/sbx-helper:abc",
		"docker.io/library/sbx-helper:abc": "docker.io/library/sbx-helper:abc",
	} {
		if got := fullImageName(in); got != want {
			t.Errorf("fullImageName(%q) = %q, want %q", in, got, want)
		}
	}
}
