package kubernetes

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/sbxhq/sbx/driver"
	"github.com/sbxhq/sbx/driver/buildctx"
	"github.com/sbxhq/sbx/driver/kubernetes/inpod"
	"github.com/sbxhq/sbx/driver/runner"
	"github.com/sbxhq/sbx/egress"
	"github.com/sbxhq/sbx/internal/tarball"
	"github.com/sbxhq/sbx/reconcile"
	"github.com/sbxhq/sbx/spec"
)

// Calls turns a step into kubectl (and, for builds, docker) commands.
func (d *Driver) Calls(s reconcile.Step, sp *spec.Spec, live *reconcile.Live) ([]reconcile.Call, error) {
	name := s.Sandbox
	p := d.where(name)
	if sp != nil {
		p = d.placeOf(sp)
	}
	o := detailOf(live)
	switch s.Kind {
	case reconcile.StepBuild:
		return d.buildCalls(sp, s.Record)
	case reconcile.StepStop:
		patch := d.command(p, "patch", "sandboxes.agents.x-k8s.io", name, "--type=merge", "-p", `{"spec":{"operatingMode":"Suspended"}}`)
		if sp == nil {
			// Destroying: the pod stops while the rest is removed.
			return []reconcile.Call{patch}, nil
		}
		return []reconcile.Call{patch, d.command(p, "wait", "--for=delete", "pod/"+SandboxPodName(name), "--timeout="+waitTimeout)}, nil
	case reconcile.StepRemove:
		if sp != nil && o != nil && keepsVolume(sp, o) {
			// A replacement whose workspace volume stays: the Sandbox
			// (suspended by the stop before) is updated by the create
			// after, the proxy is made again with the file's policy.
			return []reconcile.Call{d.command(p, "delete", "pod/"+EgressPodName(name), "--ignore-not-found", "--wait=true", "--timeout="+waitTimeout)}, nil
		}
		return []reconcile.Call{d.removeCall(p, name)}, nil
	case reconcile.StepCreate:
		return d.createCalls(sp, s.Record, live)
	case reconcile.StepStart:
		return []reconcile.Call{
			d.command(p, "patch", "sandboxes.agents.x-k8s.io", name, "--type=merge", "-p", `{"spec":{"operatingMode":"Running"}}`),
			d.waitCall(p, name, "sandboxes.agents.x-k8s.io/"+name),
			d.prepareCall(sp, p, false),
		}, nil
	case reconcile.StepSetNetwork:
		return d.policyCalls(sp, p)
	case reconcile.StepRepair:
		return d.repairCalls(sp, p, s.Parts, o)
	case reconcile.StepSetWarmPool:
		return d.poolCalls(sp, p, o)
	case reconcile.StepVerify:
		return []reconcile.Call{
			d.waitCall(p, name, "sandboxes.agents.x-k8s.io/"+name, "pod/"+EgressPodName(name)),
			d.prepareCall(sp, p, false),
		}, nil
	}
	return nil, fmt.Errorf("the kubernetes driver cannot %s", s.Kind)
}

// waitCall is a plan's wait for objs of sandbox name to be Ready
// (waitReady).
func (d *Driver) waitCall(p place, name string, objs ...string) reconcile.Call {
	return reconcile.Call{Desc: d.waitDesc(p, name, objs...), Run: func(ctx context.Context) error {
		return d.waitReady(ctx, p, name, objs...)
	}}
}

// command is one kubectl command of a plan.
func (d *Driver) command(p place, args ...string) reconcile.Call {
	argv := d.kubectl(p, args...)
	return reconcile.Call{Desc: runner.Quote(argv), Run: func(ctx context.Context) error {
		_, err := d.opts.Runner.Output(ctx, argv...)
		return err
	}}
}

// removeKinds are every kind the driver makes, for removal by label.
func (d *Driver) removeKinds(p place) string {
	kinds := "sandboxclaims.extensions.agents.x-k8s.io,sandboxwarmpools.extensions.agents.x-k8s.io,sandboxtemplates.extensions.agents.x-k8s.io,"
	d.mu.Lock()
	if d.noPools[p] {
		kinds = ""
	}
	d.mu.Unlock()
	return kinds + "sandboxes.agents.x-k8s.io,pods,networkpolicies.networking.k8s.io,persistentvolumeclaims"
}

// removeCall deletes everything labelled as the sandbox's, and waits
// until it is gone (the workspace claim last: it goes once no pod uses
// it).
func (d *Driver) removeCall(p place, name string) reconcile.Call {
	return d.command(p, "delete", d.removeKinds(p), "-l", driver.LabelSandbox+"="+name, "--ignore-not-found", "--wait=true", "--timeout="+waitTimeout)
}

// keepsVolume reports whether a replacement can keep the sandbox's
// workspace volume: the file wants the same workspace, claim size and
// class (agent-sandbox's volumeClaimTemplates are immutable), so the
// agent's work in it survives an env or template change, as it does
// with the docker driver's bind mount.
func keepsVolume(sp *spec.Spec, o *observed) bool {
	k := sp.K8s()
	return o.workspace.Path == sp.Workspace.Path && o.size == k.WorkspaceSize && o.class == k.StorageClass
}

func (d *Driver) buildCalls(sp *spec.Spec, rec *reconcile.Record) ([]reconcile.Call, error) {
	if sp.K8s().Registry == "" {
		return nil, fmt.Errorf("sandbox %q: the kubernetes driver pushes a built template to kubernetes.registry; name one", sp.Name)
	}
	hash := ""
	if rec != nil {
		hash = rec.BuildHash
	}
	if hash == "" {
		var err error
		if hash, err = d.BuildHash(sp); err != nil {
			return nil, err
		}
	}
	image := TemplateImage(sp, hash)
	args := buildctx.DockerArgs(sp.Template.Build, image)
	build := append([]string{d.opts.Docker, args[0], "-q"}, args[1:]...)
	push := []string{d.opts.Docker, "push", "-q", image}
	call := func(argv []string) reconcile.Call {
		return reconcile.Call{Desc: runner.Quote(argv), Run: func(ctx context.Context) error {
			_, err := d.opts.Runner.Output(ctx, argv...)
			return err
		}}
	}
	return []reconcile.Call{call(build), call(push)}, nil
}

// buildHash is the record's build hash (the build step before the create
// made it), else the file's.
func (d *Driver) buildHash(sp *spec.Spec, rec *reconcile.Record) string {
	if sp.Template.Build == nil {
		return ""
	}
	if rec != nil && rec.BuildHash != "" {
		return rec.BuildHash
	}
	h, _ := d.BuildHash(sp)
	return h
}

// createCalls make the sandbox. It is one call: what a create cut short
// left is removed first, and a create that fails (the enforcement probe
// included) removes what it made, so nothing half-made or unproven
// stays. A replacement that keeps the workspace volume updates the
// suspended Sandbox instead, and does not copy the workspace again.
func (d *Driver) createCalls(sp *spec.Spec, rec *reconcile.Record, live *reconcile.Live) ([]reconcile.Call, error) {
	n := sp.Name
	p := d.placeOf(sp)
	replace := live != nil && live.Exists && detailOf(live) != nil && keepsVolume(sp, detailOf(live))
	helper, err := d.helperImage(sp.K8s().Registry)
	if err != nil {
		return nil, err
	}
	image := TemplateImage(sp, d.buildHash(sp, rec))
	var steps []string
	if !replace {
		steps = append(steps, "remove anything labelled "+driver.LabelSandbox+"="+n+" (what a create cut short left)")
	}
	switch {
	case d.pushesHelper(sp):
		steps = append(steps, "docker build "+helper+" (FROM scratch: this sbx) unless present; docker push "+helper)
	case d.opts.HelperImage != "":
		steps = append(steps, "(the helper image "+helper+" is SBX_K8S_HELPER_IMAGE's: sbx neither builds nor pushes it; the nodes must have or pull it)")
	default:
		steps = append(steps, "kubectl get nodes: unless they list "+helper+", docker build it (FROM scratch: this sbx) and stop with the command that loads it into this cluster (no kubernetes.registry to push it to)")
	}
	steps = append(steps,
		"kubectl get nodes (their addresses, which the proxy always refuses)",
		runner.Quote(d.kubectl(p, pinCheckArgs...))+"  # Pod "+n+".pin-check: does the namespace admit the egress pin (init container "+pinInit+", root, NET_ADMIN only)?",
		"  admitted (Pod Security privileged or no label): "+runner.Quote(d.kubectl(p, applyArgs...))+
			"  # Pod "+EgressPodName(n)+" (sbx __egress-proxy, the policy of sandbox.yaml), NetworkPolicy "+sandboxPolicyName(n)+" and "+egressPolicyName(n)+
			"; "+d.waitDesc(p, n, "pod/"+EgressPodName(n))+
			"; then Sandbox "+n+" ("+image+", "+resourcesDesc(sp)+", workspace claim "+ClaimName(n)+"), its pod's egress pinned to the proxy's pod address:3128 in its own network namespace (nftables: sbx __k8s-pin) besides the NetworkPolicy",
		"  refused (Pod Security baseline, restricted): the same objects in one apply, the Sandbox's pod without the pin: the NetworkPolicy alone pins it",
		d.waitDesc(p, n, "pod/"+EgressPodName(n), "sandboxes.agents.x-k8s.io/"+n))
	if replace {
		steps = append(steps, "the workspace volume "+ClaimName(n)+" is kept, with the agent's work")
	} else {
		steps = append(steps, "kubectl exec -i "+n+" -c agent -- "+helperPath+" __k8s-prepare --untar "+sp.Workspace.Path+" …  # the workspace, as a tar stream")
	}
	steps = append(steps, d.prepareDesc(sp, p))
	desc := strings.Join(steps, "\n")
	return []reconcile.Call{{Desc: desc, Run: func(ctx context.Context) error {
		return d.create(ctx, sp, p, rec, helper, image, replace)
	}}}, nil
}

// create runs createCalls' call.
func (d *Driver) create(ctx context.Context, sp *spec.Spec, p place, rec *reconcile.Record, helper, image string, replace bool) error {
	if !replace {
		if _, err := d.run(ctx, p, "delete", d.removeKinds(p), "-l", driver.LabelSandbox+"="+sp.Name, "--ignore-not-found", "--wait=true", "--timeout="+waitTimeout); err != nil {
			return err
		}
	}
	err := d.createObjects(ctx, sp, p, rec, helper, image, !replace)
	if err != nil && !replace {
		// Nothing half-made stays (even after Ctrl-C, within a bound),
		// and no volume is left for the user to repair (volumes.go).
		cleanup, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
		defer cancel()
		volume, uid, vErr := d.boundVolume(cleanup, p, sp.Name)
		if _, rmErr := d.run(cleanup, p, "delete", d.removeKinds(p), "-l", driver.LabelSandbox+"="+sp.Name, "--ignore-not-found", "--wait=true", "--timeout=100s"); rmErr != nil {
			return fmt.Errorf("%w (and removing what was made: %v)", err, rmErr)
		}
		if vErr != nil {
			return fmt.Errorf("%w (and reading the workspace claim's volume: %v)", err, vErr)
		}
		if volume != "" {
			if rErr := d.releaseVolume(cleanup, p, volume, uid); rErr != nil {
				return fmt.Errorf("%w (and %v)", err, d.releaseError(p, volume, uid, rErr))
			}
		}
	}
	return err
}

func (d *Driver) createObjects(ctx context.Context, sp *spec.Spec, p place, rec *reconcile.Record, helper, image string, seed bool) error {
	if d.localHelper(sp.K8s().Registry) {
		if err := d.checkLocalHelper(ctx, p, sp.Name, helper); err != nil {
			return err
		}
	}
	if d.pushesHelper(sp) {
		if err := BuildHelperImage(ctx, d.opts.Runner, d.opts.Docker, d.opts.Binary, helper); err != nil {
			return err
		}
		if _, err := d.opts.Runner.Output(ctx, d.opts.Docker, "push", "-q", helper); err != nil {
			return err
		}
	}
	nodes, err := d.nodeAddrs(ctx, p)
	if err != nil {
		return err
	}
	noPin, err := d.pinAdmitted(ctx, sp, p, helper)
	if err != nil {
		return err
	}
	// hinted adds, when the helper image comes from no registry, the
	// command that loads it into the cluster: a pod that cannot start
	// may be one whose node lacks it.
	hinted := func(err error) error {
		if d.localHelper(sp.K8s().Registry) {
			if hint := d.helperHint(context.WithoutCancel(ctx), p, helper); hint != "" {
				return fmt.Errorf("%w\n%s", err, hint)
			}
		}
		return err
	}
	var proxyIP string
	if noPin == "" {
		// The pod is pinned to its proxy's address, so the proxy comes
		// first: made, Ready, its address read; then the Sandbox.
		objs, err := newSandboxObjects(sp, p, rec, helper, image, nodes, "")
		if err != nil {
			return err
		}
		if err := d.apply(ctx, p, objs[:len(objs)-1]); err != nil {
			return err
		}
		if err := d.waitReady(ctx, p, sp.Name, "pod/"+EgressPodName(sp.Name)); err != nil {
			return hinted(err)
		}
		if proxyIP, err = d.podIP(ctx, p, EgressPodName(sp.Name)); err != nil {
			return err
		}
		sb, err := sandboxObject(sp, p.namespace, image, helper, rec, joinHostPort(proxyIP, proxyPort))
		if err != nil {
			return err
		}
		if err := d.apply(ctx, p, []object{sb}); err != nil {
			return err
		}
		if err := d.waitReady(ctx, p, sp.Name, "sandboxes.agents.x-k8s.io/"+sp.Name); err != nil {
			return hinted(err)
		}
	} else {
		objs, err := newSandboxObjects(sp, p, rec, helper, image, nodes, "")
		if err != nil {
			return err
		}
		if err := d.apply(ctx, p, objs); err != nil {
			return err
		}
		if err := d.waitReady(ctx, p, sp.Name, "pod/"+EgressPodName(sp.Name), "sandboxes.agents.x-k8s.io/"+sp.Name); err != nil {
			return hinted(err)
		}
		if proxyIP, err = d.podIP(ctx, p, EgressPodName(sp.Name)); err != nil {
			return err
		}
	}
	if seed {
		seeded, err := d.seeded(ctx, p, sp.Name)
		if err != nil {
			return err
		}
		seed = !seeded
	}
	pinned := ""
	if noPin == "" {
		pinned = joinHostPort(proxyIP, proxyPort)
	}
	if err := d.prepareAt(ctx, sp, p, SandboxPodName(sp.Name), proxyIP, seed, pinned); err != nil {
		var ee *EnforcementError
		if errors.As(err, &ee) && noPin != "" {
			ee.NoPin = noPin
		}
		return err
	}
	if seed {
		_, err := d.run(ctx, p, "annotate", "persistentvolumeclaims/"+ClaimName(sp.Name), annSeeded+"="+time.Now().UTC().Format(time.RFC3339), "--overwrite")
		return err
	}
	return nil
}

// pinAdmitted asks the cluster whether the namespace admits the pin's
// init container (root, NET_ADMIN): a server-side dry run of a pod made
// of that container alone, so that Pod Security admission (the
// namespace's pod-security.kubernetes.io/enforce label, or the cluster's
// default level and exemptions) and any other admission webhook decide
// as they will for the sandbox's pod. It returns "" when admitted, else
// the cluster's reason. Pod Security's privileged level (and a namespace
// without a label under the default configuration) admits it; baseline
// and restricted forbid NET_ADMIN, and the sandbox is then pinned by its
// NetworkPolicy alone.
func (d *Driver) pinAdmitted(ctx context.Context, sp *spec.Spec, p place, helper string) (string, error) {
	doc, err := applyList(pinCheckPod(sp, p.namespace, helper))
	if err != nil {
		return "", err
	}
	_, err = d.runInput(ctx, p, bytes.NewReader(doc), pinCheckArgs...)
	if err == nil {
		return "", nil
	}
	var re *runner.Error
	if errors.As(err, &re) && strings.Contains(re.Stderr, "(Forbidden)") {
		return strings.TrimSpace(re.Stderr), nil
	}
	return "", fmt.Errorf("asking the cluster whether namespace %s admits the pod's egress pin (a dry run): %w", p, err)
}

// pinCheckArgs create from stdin as a server-side dry run: admission
// decides, nothing is stored.
var pinCheckArgs = []string{"create", "--dry-run=server", "-o", "name", "-f", "-"}

// pinCheckPod is the pod pinAdmitted submits: the pin's init container,
// as the pod's only container, under the sandbox's RuntimeClass.
func pinCheckPod(sp *spec.Spec, ns, helper string) object {
	ps := podSpec{
		AutomountServiceAccountToken: ptr(false),
		EnableServiceLinks:           ptr(false),
		RuntimeClassName:             sp.K8s().RuntimeClassName,
		SecurityContext:              &podSecurity{SeccompProfile: &seccomp{Type: "RuntimeDefault"}},
		Containers:                   []container{pinContainer(helper, "127.0.0.1:"+strconv.Itoa(proxyPort))},
	}
	return object{APIVersion: "v1", Kind: "Pod", Metadata: meta{Name: sp.Name + ".pin-check", Namespace: ns}, Spec: raw(ps)}
}

// pushesHelper reports whether a create builds (unless docker has it) and
// pushes the helper image: only sbx's own, REGISTRY/sbx-helper:HASH, when
// the file names a registry. A helper image given by the user
// (Options.HelperImage: a mirror) is theirs, already where the nodes pull
// it from: building a FROM scratch image under its name and pushing it
// would overwrite the user's image, or push to wherever the name points.
func (d *Driver) pushesHelper(sp *spec.Spec) bool {
	return sp.K8s().Registry != "" && d.opts.HelperImage == ""
}

// newSandboxObjects are the objects of a new sandbox given the cluster's
// node addresses (nodeAddrs): its proxy, its policies and, last, the
// Sandbox, its pod pinned to pinTo when set.
func newSandboxObjects(sp *spec.Spec, p place, rec *reconcile.Record, helper, image string, nodes []string, pinTo string) ([]object, error) {
	proxy, err := proxyPod(sp, EgressPodName(sp.Name), p.namespace, helper, roleEgress, egress.PolicyOf(sp, nodes))
	if err != nil {
		return nil, err
	}
	sb, err := sandboxObject(sp, p.namespace, image, helper, rec, pinTo)
	if err != nil {
		return nil, err
	}
	objs := []object{proxy}
	objs = append(objs, policies(sp, p.namespace, roleAgent, roleEgress, sandboxPolicyName(sp.Name), egressPolicyName(sp.Name))...)
	return append(objs, sb), nil
}

// nodeAddrs are the cluster's node addresses, which the proxy refuses
// whatever the policy says: a sandbox has no business with its node's
// kubelet. Without them the proxy would not know what to refuse, so a
// user who may not list nodes, or a listing of another shape, is an
// error, never a proxy without them.
func (d *Driver) nodeAddrs(ctx context.Context, p place) ([]string, error) {
	args := []string{"get", "nodes", "-o", "json"}
	out, err := d.run(ctx, p, args...)
	if err != nil {
		return nil, fmt.Errorf("listing the cluster's nodes, whose addresses every sandbox's egress proxy refuses (sbx needs permission to list nodes): %w", err)
	}
	addrs, err := parseNodeAddrs(out)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", runner.Quote(d.kubectl(p, args...)), err)
	}
	return hostAddrsOf(addrs), nil
}

// parseNodeAddrs reads `kubectl get nodes -o json`: a v1 List of v1 Nodes,
// each with status.addresses of {type, address} (core/v1 NodeStatus,
// NodeAddress; the types are core/v1 NodeAddressType). The IP types'
// addresses must be IP addresses. Any other shape is an error.
func parseNodeAddrs(out []byte) ([]string, error) {
	var l struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Items      []struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
			Metadata   struct {
				Name string `json:"name"`
			} `json:"metadata"`
			Status struct {
				Addresses []struct {
					Type    string `json:"type"`
					Address string `json:"address"`
				} `json:"addresses"`
			} `json:"status"`
		} `json:"items"`
	}
	if err := json.Unmarshal(out, &l); err != nil {
		return nil, fmt.Errorf("cannot parse its JSON: %v", err)
	}
	if l.APIVersion != "v1" || l.Kind != "List" {
		return nil, fmt.Errorf("expected a v1 List, got %q %q", l.APIVersion, l.Kind)
	}
	var addrs []string
	for i, n := range l.Items {
		if n.APIVersion != "v1" || n.Kind != "Node" || n.Metadata.Name == "" {
			return nil, fmt.Errorf("item %d: expected a v1 Node with a name, got %q %q %q", i, n.APIVersion, n.Kind, n.Metadata.Name)
		}
		for _, a := range n.Status.Addresses {
			switch a.Type {
			case "InternalIP", "ExternalIP":
				if _, err := netip.ParseAddr(a.Address); err != nil {
					return nil, fmt.Errorf("node %s: %s %q is not an IP address", n.Metadata.Name, a.Type, a.Address)
				}
				addrs = append(addrs, a.Address)
			case "Hostname", "InternalDNS", "ExternalDNS":
				// Names: the proxy resolves and checks every host it
				// connects to, so a name for a node's address is refused
				// by its address.
			default:
				return nil, fmt.Errorf("node %s: unknown address type %q (known: InternalIP, ExternalIP, Hostname, InternalDNS, ExternalDNS)", n.Metadata.Name, a.Type)
			}
		}
	}
	return addrs, nil
}

// seeded reports whether the sandbox's workspace claim holds the host
// workspace already (annSeeded).
func (d *Driver) seeded(ctx context.Context, p place, name string) (bool, error) {
	out, err := d.run(ctx, p, "get", "persistentvolumeclaims/"+ClaimName(name), "-o", "json")
	if err != nil {
		return false, err
	}
	var o object
	if err := json.Unmarshal(out, &o); err != nil || o.Kind != "PersistentVolumeClaim" {
		return false, fmt.Errorf("kubectl get persistentvolumeclaims/%s -o json: not a PersistentVolumeClaim (%v)", ClaimName(name), err)
	}
	return o.Metadata.Annotations[annSeeded] != "", nil
}

// prepareDesc is how the plan shows the prepare exec.
func (d *Driver) prepareDesc(sp *spec.Spec, p place) string {
	desc := runner.Quote(d.kubectl(p, "exec", "-i", SandboxPodName(sp.Name), "-c", AgentContainer, "--", helperPath, "__k8s-prepare", "--upstream", "<proxy pod address>:3128", "--upstream-file", upstreamFile))
	if sp.K8s().Egress == spec.EgressEnforced {
		desc += " --probe-open <proxy>:3128 --probe-closed <proxy>:3129  # refuses unless the pod's pin or the cluster's NetworkPolicy holds"
	} else {
		desc += "  # egress advisory: no enforcement probe"
	}
	return desc
}

// prepareCall points the sandbox's bridge at its proxy and, unless egress
// is advisory, probes that the policy is enforced.
func (d *Driver) prepareCall(sp *spec.Spec, p place, seed bool) reconcile.Call {
	return reconcile.Call{Desc: d.prepareDesc(sp, p), Run: func(ctx context.Context) error {
		return d.prepare(ctx, sp, p, SandboxPodName(sp.Name), seed)
	}}
}

// EnforcementError is a sandbox that can reach more than its proxy: the
// cluster does not enforce the NetworkPolicy pinning it there, and the
// pod is not pinned in its own network namespace either.
type EnforcementError struct {
	Sandbox string
	Detail  string
	// NoPin is why the pod is not pinned in its own network namespace
	// (the cluster's answer to the dry run), when the create knows it.
	NoPin string
}

func (e *EnforcementError) Error() string {
	noPin := "it was made without sbx's pin in its own network namespace"
	if e.NoPin != "" {
		noPin = "the namespace does not admit sbx's pin in the pod's own network namespace (an init container with NET_ADMIN): " + e.NoPin
	}
	return fmt.Sprintf("sandbox %q: the cluster does not enforce the NetworkPolicy that pins the sandbox to its egress proxy: from inside the sandbox, %s. "+
		"Its network plugin ignores NetworkPolicy (a plain bridge, flannel alone, …), and %s: with it, the agent could bypass the proxy and its allow-list. "+
		"Use a namespace whose Pod Security admits the pin (pod-security.kubernetes.io/enforce: privileged), a cluster whose CNI enforces NetworkPolicy (Calico, Cilium, …), "+
		"or accept advisory egress with kubernetes.egress: advisory (the plan will say so)", e.Sandbox, e.Detail, noPin)
}

// prepare runs __k8s-prepare in a sandbox pod: the proxy's address for its
// bridge, the workspace when seed is set, and the enforcement probe.
func (d *Driver) prepare(ctx context.Context, sp *spec.Spec, p place, pod string, seed bool) error {
	ip, err := d.podIP(ctx, p, EgressPodName(sp.Name))
	if err != nil {
		return err
	}
	return d.prepareAt(ctx, sp, p, pod, ip, seed, "")
}

// prepareAt is prepare with the proxy's address known. pinned is the
// address the pod is pinned to in its own network namespace ("" when it
// is not, or not known).
func (d *Driver) prepareAt(ctx context.Context, sp *spec.Spec, p place, pod, proxyIP string, seed bool, pinned string) error {
	proxy := joinHostPort(proxyIP, proxyPort)
	args := []string{"exec", "-i", pod, "-c", AgentContainer, "--", helperPath, "__k8s-prepare", "--upstream", proxy, "--upstream-file", upstreamFile}
	enforced := sp.K8s().Egress == spec.EgressEnforced
	if enforced {
		args = append(args, "--probe-open", proxy, "--probe-closed", joinHostPort(proxyIP, canaryPort), "--probe-for", d.opts.ProbeFor.String())
	}
	var stdin io.Reader = strings.NewReader("")
	var werr chan error
	if seed {
		args = append(args, "--untar", sp.Workspace.Path)
		pr, pw := io.Pipe()
		stdin = pr
		werr = make(chan error, 1)
		go func() {
			err := writeWorkspace(ctx, sp.Workspace.Path, pw)
			pw.CloseWithError(err)
			werr <- err
		}()
	}
	out, err := d.runInput(ctx, p, stdin, args...)
	if werr != nil {
		if wErr := <-werr; wErr != nil && err == nil {
			err = fmt.Errorf("copying the workspace %s: %v", sp.Workspace.Path, wErr)
		}
	}
	if err != nil {
		return err
	}
	var rep inpod.Report
	if err := json.Unmarshal(out, &rep); err != nil {
		return fmt.Errorf("sbx __k8s-prepare in sandbox %q: %v (output %q)", sp.Name, err, truncate(out))
	}
	if enforced {
		switch {
		case rep.Probe == nil:
			return fmt.Errorf("sbx __k8s-prepare in sandbox %q ran no probe", sp.Name)
		case !rep.Probe.ProxyReached:
			return fmt.Errorf("sandbox %q cannot reach its egress proxy: %s", sp.Name, rep.Probe.Detail)
		case rep.Probe.CanaryReached && pinned != "":
			// Never expected: the kernel's rules in the pod's namespace
			// did not hold.
			return fmt.Errorf("sandbox %q: the pod is pinned to its egress proxy %s in its own network namespace, yet from inside it %s", sp.Name, pinned, rep.Probe.Detail)
		case rep.Probe.CanaryReached:
			return &EnforcementError{Sandbox: sp.Name, Detail: rep.Probe.Detail}
		}
	}
	return nil
}

// writeWorkspace streams the host workspace as a tar (tarball.Write: no
// link followed, nothing but directories, files and links, bounded).
func writeWorkspace(ctx context.Context, dir string, w io.Writer) error {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	_, err = tarball.Write(ctx, root, w, tarball.DefaultLimits)
	return err
}

// podIP reads a pod's address.
func (d *Driver) podIP(ctx context.Context, p place, pod string) (string, error) {
	out, err := d.run(ctx, p, "get", "pod/"+pod, "-o", "json")
	if err != nil {
		return "", err
	}
	var o object
	var st podStatus
	if err := json.Unmarshal(out, &o); err != nil || o.Kind != "Pod" {
		return "", fmt.Errorf("kubectl get pod/%s -o json: not a Pod (%v)", pod, err)
	}
	if err := json.Unmarshal(o.Status, &st); err != nil {
		return "", fmt.Errorf("kubectl get pod/%s -o json: status: %v", pod, err)
	}
	if st.PodIP == "" {
		return "", fmt.Errorf("pod %s has no address yet (phase %s)", pod, st.Phase)
	}
	return st.PodIP, nil
}

func joinHostPort(ip string, port int) string {
	if strings.Contains(ip, ":") {
		return "[" + ip + "]:" + strconv.Itoa(port)
	}
	return ip + ":" + strconv.Itoa(port)
}

func truncate(b []byte) string {
	s := strings.TrimSpace(string(b))
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}

// policyCalls put the file's policy in force in place: over the proxy's
// control channel (pods/attach to its stdin), which answers once it is in
// force (and written to the proxy's volume for a restart of its
// container), then on the pod's annotation, which plans read.
func (d *Driver) policyCalls(sp *spec.Spec, p place) ([]reconcile.Call, error) {
	pod := EgressPodName(sp.Name)
	// The policy is made once (the nodes are listed once), so that the
	// annotation records exactly what the proxy put in force.
	var inForce []byte
	return []reconcile.Call{{
		Desc: runner.Quote(d.kubectl(p, "attach", "-i", pod, "-c", proxyName)) + "  # set the policy of sandbox.yaml, in force when the proxy answers",
		Run: func(ctx context.Context) error {
			nodes, err := d.nodeAddrs(ctx, p)
			if err != nil {
				return err
			}
			data, err := json.Marshal(egress.PolicyOf(sp, nodes))
			if err != nil {
				return err
			}
			rep, err := d.control(ctx, p, pod, egress.ControlRequest{Op: "set", Policy: data})
			if err != nil {
				return err
			}
			if rep.Error != "" {
				return fmt.Errorf("the egress proxy of %q refused the new policy (the previous one stays in force): %s", sp.Name, rep.Error)
			}
			inForce = data
			return nil
		},
	}, {
		// The pod's annotation is what plans read as the policy in force.
		Desc: runner.Quote(d.kubectl(p, "annotate", "pod/"+pod, annPolicy+"=<the policy>", "--overwrite")),
		Run: func(ctx context.Context) error {
			if inForce == nil {
				return fmt.Errorf("the egress proxy of %q has no new policy in force to record", sp.Name)
			}
			_, err := d.run(ctx, p, "annotate", "pod/"+pod, annPolicy+"="+string(inForce), "--overwrite")
			return err
		},
	}}, nil
}

// controlTimeout bounds one exchange on the proxy's control channel.
const controlTimeout = 60 * time.Second

// control sends one request on a proxy's control channel (kubectl attach
// -i: the container's stdin, kept open across attaches, and its stdout)
// and returns the reply with the request's id.
func (d *Driver) control(ctx context.Context, p place, pod string, req egress.ControlRequest) (*egress.ControlReply, error) {
	ctx, cancel := context.WithTimeout(ctx, controlTimeout)
	defer cancel()
	req.ID = strconv.FormatInt(time.Now().UnixNano(), 36)
	line, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	pr, pw := io.Pipe()
	defer pw.Close()
	go pw.Write(append(line, '\n'))
	found := make(chan *egress.ControlReply, 1)
	w := &replyWriter{id: req.ID, found: found}
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	done := make(chan error, 1)
	go func() {
		done <- d.opts.Runner.Run(runCtx, runner.Cmd{Args: d.kubectl(p, "attach", "-i", pod, "-c", proxyName), Stdin: pr, Stdout: w})
	}()
	select {
	case rep := <-found:
		// Closing stdin ends the attach; the container's stdin stays
		// open for the next one.
		pw.Close()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			stop()
			<-done
		}
		return rep, nil
	case err := <-done:
		if err == nil {
			err = errors.New("the attach ended without an answer")
		}
		return nil, fmt.Errorf("the egress proxy of %s did not answer on its control channel: %w", pod, err)
	case <-ctx.Done():
		stop()
		<-done
		return nil, fmt.Errorf("the egress proxy of %s did not answer on its control channel: %w", pod, ctx.Err())
	}
}

// replyWriter watches an attach's stdout for the reply to one request.
type replyWriter struct {
	id    string
	buf   []byte
	found chan *egress.ControlReply
	done  bool
}

func (w *replyWriter) Write(b []byte) (int, error) {
	w.buf = append(w.buf, b...)
	for !w.done {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			break
		}
		line := w.buf[:i]
		w.buf = w.buf[i+1:]
		var rep egress.ControlReply
		if json.Unmarshal(line, &rep) == nil && rep.ID == w.id {
			w.done = true
			w.found <- &rep
		}
	}
	if len(w.buf) > 8<<20 {
		w.buf = nil
	}
	return len(b), nil
}

// repairCalls make again what Observe found gone: the proxy (with the
// file's policy) and the policies; then the sandbox's bridge learns the
// new proxy's address, and the probe runs again.
//
// A new proxy has a new address: a sandbox pinned to the old one in its
// own network namespace (o.pinned) gets its pod made again, from its
// template with the new address, by suspending and resuming it (the
// workspace volume stays).
func (d *Driver) repairCalls(sp *spec.Spec, p place, parts []string, o *observed) ([]reconcile.Call, error) {
	n := sp.Name
	var kinds []string
	proxy, pols := false, false
	for _, part := range parts {
		switch part {
		case "egress proxy":
			proxy = true
			kinds = append(kinds, "Pod "+EgressPodName(n))
		case "network policy":
			pols = true
			kinds = append(kinds, "NetworkPolicy "+sandboxPolicyName(n)+" and "+egressPolicyName(n))
		default:
			return nil, fmt.Errorf("the kubernetes driver cannot recreate %s", part)
		}
	}
	apply := reconcile.Call{
		Desc: runner.Quote(d.kubectl(p, applyArgs...)) + "  # " + strings.Join(kinds, ", "),
		Run: func(ctx context.Context) error {
			helper, err := d.helperImage(sp.K8s().Registry)
			if err != nil {
				return err
			}
			var objs []object
			if proxy {
				nodes, err := d.nodeAddrs(ctx, p)
				if err != nil {
					return err
				}
				pod, err := proxyPod(sp, EgressPodName(n), p.namespace, helper, roleEgress, egress.PolicyOf(sp, nodes))
				if err != nil {
					return err
				}
				objs = append(objs, pod)
			}
			if pols {
				objs = append(objs, policies(sp, p.namespace, roleAgent, roleEgress, sandboxPolicyName(n), egressPolicyName(n))...)
			}
			return d.apply(ctx, p, objs)
		},
	}
	calls := []reconcile.Call{apply}
	if proxy {
		calls = append(calls, d.waitCall(p, n, "pod/"+EgressPodName(n)))
		if o != nil && o.pinned != "" {
			calls = append(calls, d.repinCalls(p, n, o.suspended)...)
		}
	}
	return calls, nil
}

// repinCalls point a pinned sandbox's pin at its proxy's current address
// and, unless it is suspended, make its pod again with it.
func (d *Driver) repinCalls(p place, n string, suspended bool) []reconcile.Call {
	sb := "sandboxes.agents.x-k8s.io/" + n
	calls := []reconcile.Call{{
		Desc: runner.Quote(d.kubectl(p, "patch", sb, "--type=json", "-p", "<the pin's --allow: the new proxy's address>")) + "  # the pod is pinned to its proxy's address, which is new",
		Run: func(ctx context.Context) error {
			ip, err := d.podIP(ctx, p, EgressPodName(n))
			if err != nil {
				return err
			}
			patch, err := json.Marshal([]map[string]any{
				{"op": "test", "path": "/spec/podTemplate/spec/initContainers/0/name", "value": pinInit},
				{"op": "replace", "path": "/spec/podTemplate/spec/initContainers/0/args", "value": []string{"__k8s-pin", "--allow", joinHostPort(ip, proxyPort)}},
			})
			if err != nil {
				return err
			}
			_, err = d.run(ctx, p, "patch", sb, "--type=json", "-p", string(patch))
			return err
		},
	}}
	if suspended {
		return calls
	}
	return append(calls,
		d.command(p, "patch", sb, "--type=merge", "-p", `{"spec":{"operatingMode":"Suspended"}}`),
		d.command(p, "wait", "--for=delete", "pod/"+SandboxPodName(n), "--timeout="+waitTimeout),
		d.command(p, "patch", sb, "--type=merge", "-p", `{"spec":{"operatingMode":"Running"}}`))
}

// applyArgs apply a List from stdin server-side, as sbx's field manager,
// taking over fields another manager set.
var applyArgs = []string{"apply", "--server-side", "--field-manager=sbx", "--force-conflicts", "-f", "-"}

// apply applies objs in one server-side apply.
func (d *Driver) apply(ctx context.Context, p place, objs []object) error {
	doc, err := applyList(objs...)
	if err != nil {
		return err
	}
	_, err = d.runInput(ctx, p, bytes.NewReader(doc), applyArgs...)
	return err
}
