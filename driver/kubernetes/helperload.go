package kubernetes

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"

	"github.com/sbxhq/sbx/driver/runner"
)

// Without kubernetes.registry (and without $SBX_K8S_HELPER_IMAGE) the
// nodes must already have sbx's helper image sbx-helper:HASH: a local
// cluster's nodes take images from the host's docker with the cluster
// tool's own command. Before it makes anything, a create looks whether
// the nodes list the image (Node status.images); when they do not, it
// builds the image into the local docker and stops with the one command
// that loads it into the cluster at hand (checkLocalHelper says when),
// which it tells from what kind, k3d and minikube put on their nodes:
//
//   - kind: spec.providerID kind://PROVIDER/CLUSTER/NODE (kind's kubeadm
//     config, pkg/cluster/internal/kubeadm/config.go); loaded with `kind
//     load docker-image IMAGE --name CLUSTER`
//     (https://kind.sigs.k8s.io/docs/user/quick-start/#loading-an-image-into-your-cluster).
//   - k3d: k3s nodes (spec.providerID k3s://NODE) named
//     k3d-CLUSTER-server-N or k3d-CLUSTER-agent-N; loaded with `k3d image
//     import IMAGE -c CLUSTER` (https://k3d.io/stable/usage/commands/k3d_image_import/).
//   - minikube: the label minikube.k8s.io/name=PROFILE (minikube's
//     kubeadm bootstrapper labels every node); loaded with `minikube image
//     load IMAGE -p PROFILE` (https://minikube.sigs.k8s.io/docs/commands/image/).
//
// Any other cluster gets the generic way: save the image from docker and
// import it into each node's container runtime (the runtime is in
// status.nodeInfo.containerRuntimeVersion), or name a registry.

// nodeObj is what sbx reads of a Node (core/v1 Node: metadata,
// spec.providerID, spec.taints, spec.unschedulable, status.allocatable,
// status.images, status.nodeInfo): the helper check and the wait's
// "can this pod ever be scheduled" both read it through parseNodes.
type nodeObj struct {
	Kind     string `json:"kind"`
	Metadata struct {
		Name   string            `json:"name"`
		Labels map[string]string `json:"labels"`
	} `json:"metadata"`
	Spec struct {
		ProviderID    string       `json:"providerID"`
		Unschedulable bool         `json:"unschedulable"`
		Taints        []toleration `json:"taints"`
	} `json:"spec"`
	Status struct {
		Allocatable map[string]string `json:"allocatable"`
		Images      []struct {
			Names []string `json:"names"`
		} `json:"images"`
		NodeInfo struct {
			ContainerRuntimeVersion string `json:"containerRuntimeVersion"`
		} `json:"nodeInfo"`
	} `json:"status"`
}

// nodeStatusMaxImages is the kubelet's default bound on status.images
// (KubeletConfiguration nodeStatusMaxImages: the largest 50): a node
// listing that many may have an image it does not list.
const nodeStatusMaxImages = 50

func parseNodes(out []byte) ([]nodeObj, error) {
	var l struct {
		APIVersion string    `json:"apiVersion"`
		Kind       string    `json:"kind"`
		Items      []nodeObj `json:"items"`
	}
	if err := json.Unmarshal(out, &l); err != nil {
		return nil, fmt.Errorf("kubectl get nodes -o json: %v", err)
	}
	if l.APIVersion != "v1" || l.Kind != "List" {
		return nil, fmt.Errorf("kubectl get nodes -o json: expected a v1 List, got %q %q", l.APIVersion, l.Kind)
	}
	for _, n := range l.Items {
		if n.Kind != "Node" {
			return nil, fmt.Errorf("kubectl get nodes -o json: expected Nodes, got %q", n.Kind)
		}
	}
	if l.Items == nil {
		l.Items = []nodeObj{}
	}
	return l.Items, nil
}

// schedulable reports whether a sandbox's pod may land on n: not cordoned,
// no NoSchedule or NoExecute taint (the pods tolerate none).
func (n nodeObj) schedulable() bool {
	if n.Spec.Unschedulable {
		return false
	}
	for _, t := range n.Spec.Taints {
		if t.Effect == "NoSchedule" || t.Effect == "NoExecute" {
			return false
		}
	}
	return true
}

// has reports whether n lists image, and whether its list is complete.
func (n nodeObj) has(image string) (listed, complete bool) {
	want := fullImageName(image)
	for _, img := range n.Status.Images {
		for _, name := range img.Names {
			if name == want {
				return true, true
			}
		}
	}
	return false, len(n.Status.Images) < nodeStatusMaxImages
}

// fullImageName is the name the runtime reports for a docker reference
// (docker.io/library/NAME:TAG for NAME:TAG), as CRI names images.
func fullImageName(ref string) string {
	first, _, found := strings.Cut(ref, "/")
	switch {
	case !found:
		ref = "docker.io/library/" + ref
	case !strings.ContainsAny(first, ".:") && first != "localhost":
		ref = "docker.io/" + ref
	}
	return ref
}

// missingHelper reports whether a schedulable node surely lacks image:
// it lists its images in full and not that one.
func missingHelper(nodes []nodeObj, image string) bool {
	for _, n := range nodes {
		if !n.schedulable() {
			continue
		}
		if listed, complete := n.has(image); !listed && complete {
			return true
		}
	}
	return false
}

var k3dNode = regexp.MustCompile(`^k3d-(.+)-(server|agent)-[0-9]+$`)

// loadCommand is the one command that loads image, from the host's
// docker, into the cluster of nodes, and which tool it is ("" when the
// cluster is none sbx knows).
func loadCommand(nodes []nodeObj, image string) (tool, cmd string) {
	for _, n := range nodes {
		if rest, ok := strings.CutPrefix(n.Spec.ProviderID, "kind://"); ok {
			if f := strings.Split(rest, "/"); len(f) == 3 && f[1] != "" {
				return "kind", runner.Quote([]string{"kind", "load", "docker-image", image, "--name", f[1]})
			}
		}
		if p := n.Metadata.Labels["minikube.k8s.io/name"]; p != "" {
			return "minikube", runner.Quote([]string{"minikube", "image", "load", image, "-p", p})
		}
		if strings.HasPrefix(n.Spec.ProviderID, "k3s://") {
			if m := k3dNode.FindStringSubmatch(n.Metadata.Name); m != nil {
				return "k3d", runner.Quote([]string{"k3d", "image", "import", image, "-c", m[1]})
			}
		}
	}
	var names []string
	runtimes := map[string]bool{}
	for _, n := range nodes {
		if !n.schedulable() {
			continue
		}
		names = append(names, n.Metadata.Name)
		rt, _, _ := strings.Cut(n.Status.NodeInfo.ContainerRuntimeVersion, "://")
		runtimes[rt] = true
	}
	save := runner.Quote([]string{"docker", "save", image})
	var imp string
	switch {
	case len(runtimes) == 1 && runtimes["containerd"]:
		imp = save + " | ctr -n k8s.io images import -"
	case len(runtimes) == 1 && runtimes["cri-o"]:
		imp = save + " | podman load"
	case len(runtimes) == 1 && runtimes["docker"]:
		imp = save + " | docker load"
	default:
		imp = save + " | <your container runtime's image import>"
	}
	return "", "on each node (" + strings.Join(names, ", ") + "), as root: " + imp
}

// HelperImageError is a create stopped because the nodes do not have
// sbx's helper image and sbx has no registry to put it in.
type HelperImageError struct {
	Sandbox, Image string
	// Tool is kind, k3d or minikube when sbx told the cluster's kind.
	Tool    string
	Command string
}

func (e *HelperImageError) Error() string {
	how := "Load it into the cluster's nodes"
	if e.Tool != "" {
		how = "Load it into the " + e.Tool + " cluster"
	}
	return fmt.Sprintf("sandbox %q: the cluster's nodes do not have sbx's helper image %s, and without kubernetes.registry sbx has nowhere to push it. "+
		"It is built in your docker now. %s with\n  %s\nthen run sbx apply again (or set kubernetes.registry to a registry the nodes pull from: sbx pushes it there)",
		e.Sandbox, e.Image, how, e.Command)
}

// localHelper reports whether the nodes must have sbx's own helper image
// without a registry: no kubernetes.registry, no $SBX_K8S_HELPER_IMAGE.
func (d *Driver) localHelper(registry string) bool {
	return registry == "" && d.opts.HelperImage == ""
}

// checkLocalHelper is a create's first step without a registry. When a
// node lacks the helper image and docker does not have it either, the
// user cannot have loaded it: it builds the image in docker and returns
// the HelperImageError that says how to load it. When docker has it the
// create goes on: the user may have loaded it a moment ago, and the
// kubelet lists a node's images some seconds late (its image cache is
// refreshed periodically); if the pod then cannot start, helperHint adds
// the command to the error.
func (d *Driver) checkLocalHelper(ctx context.Context, p place, name, image string) error {
	nodes, err := d.nodes(ctx, p)
	if err != nil {
		return err
	}
	if !missingHelper(nodes, image) {
		return nil
	}
	if _, err := d.opts.Runner.Output(ctx, d.opts.Docker, "image", "inspect", "--format", "{{.Id}}", image); err == nil {
		return nil
	}
	if err := BuildHelperImage(ctx, d.opts.Runner, d.opts.Docker, d.opts.Binary, image); err != nil {
		return fmt.Errorf("sandbox %q: the cluster's nodes do not have sbx's helper image %s, and building it with docker (to load it into the cluster) failed: %w", name, image, err)
	}
	tool, cmd := loadCommand(nodes, image)
	return &HelperImageError{Sandbox: name, Image: image, Tool: tool, Command: cmd}
}

// helperHint is what a create whose pods did not get Ready adds to its
// error when the nodes still do not list the helper image: the command
// that loads it ("" when they list it, or cannot be read).
func (d *Driver) helperHint(ctx context.Context, p place, image string) string {
	nodes, err := d.nodes(ctx, p)
	if err != nil || !missingHelper(nodes, image) {
		return ""
	}
	_, cmd := loadCommand(nodes, image)
	return fmt.Sprintf("the cluster's nodes do not list sbx's helper image %s (there is no kubernetes.registry to pull it from); if they lack it, load it with\n  %s", image, cmd)
}

func (d *Driver) nodes(ctx context.Context, p place) ([]nodeObj, error) {
	out, err := d.run(ctx, p, "get", "nodes", "-o", "json")
	if err != nil {
		return nil, fmt.Errorf("listing the cluster's nodes, to see whether they have sbx's helper image: %w", err)
	}
	return parseNodes(out)
}
