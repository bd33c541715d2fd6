// Package kubernetes is the driver for a Kubernetes cluster with
// kubernetes-sigs/agent-sandbox (v1beta1, v1.0 or later): each sandbox is
// a Sandbox whose pod runs the template with sbx's static binary as PID 1,
// its workspace a PersistentVolumeClaim the driver seeds from the host,
// and its only way out sbx's egress proxy, a pod of its own. Two things
// pin the sandbox to it. Where the namespace's Pod Security admits it
// (privileged, or no label; a server-side dry run asks), the sandbox
// pod's first init container, the only one with NET_ADMIN, writes
// nftables rules in the pod's own network namespace through netlink (sbx
// __k8s-pin, github.com/google/nftables: the helper image has no
// iptables) before the agent starts: loopback, replies and TCP to the
// proxy pod's address only, for IPv4 and IPv6 (inpod.Pin). And a
// NetworkPolicy, which many CNIs ignore without a word. Apply does not
// report a sandbox whose egress is to be enforced as applied until a
// probe inside it shows that one of them holds (kubernetes.egress:
// advisory accepts a cluster where neither does, and every plan says
// so); the plan says which pins each sandbox.
//
// The client is kubectl, as docker is the docker driver's: found on PATH
// (or $SBX_KUBECTL), honouring KUBECONFIG, the file's kubernetes.context
// and kubernetes.namespace, and every call in SBX_TRACE. Everything the
// driver creates carries sbx's labels; observing is one listing per
// namespace of every kind it makes, and destroy removes exactly what is
// labelled as the sandbox's.
//
// Formats parsed here come from the agent-sandbox v1.0.3 CRDs
// (sigs.k8s.io/agent-sandbox@v1.0.3/k8s/crds, api/v1beta1) and the
// Kubernetes v1.35 API (core/v1 Pod, networking/v1 NetworkPolicy, the
// kubectl List and version documents); the behaviour relied on is recorded
// in the shared reference kubernetes.md (§1.2, §2.4).
package kubernetes

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/sbxhq/sbx/driver"
	"github.com/sbxhq/sbx/driver/buildctx"
	"github.com/sbxhq/sbx/driver/cliutil"
	"github.com/sbxhq/sbx/driver/runner"
	"github.com/sbxhq/sbx/spec"
)

// Annotations on what the driver creates, beside driver's shared labels
// (valid Kubernetes label keys).
const (
	// annRecord is the last-applied record, as the docker driver keeps it
	// in a label.
	annRecord = driver.LabelRecord
	annAgent  = "dev.sbx.agent"
	// annWorkspace is the host workspace the volume was seeded from.
	annWorkspace = "dev.sbx.workspace"
	annHardening = "dev.sbx.hardening"
	// annPolicy, on the proxy pod, is the policy sbx last put in force
	// (what the proxy answered), so a plan reads every sandbox's policy
	// in one listing instead of one attach each.
	annPolicy = "dev.sbx.policy"
	// annSeeded, on the workspace claim, says the volume holds the host
	// workspace: a replacement that keeps the volume does not copy it
	// again over the agent's work.
	annSeeded = "dev.sbx.seeded"
)

// The roles (driver.LabelRole) of the objects of a sandbox.
const (
	roleSandbox   = "sandbox"   // the Sandbox
	roleAgent     = "agent"     // its pod (made by agent-sandbox from the template)
	roleEgress    = "egress"    // the proxy's pod
	rolePolicy    = "policy"    // the NetworkPolicies
	roleWorkspace = "workspace" // the workspace claim
	rolePool      = "pool"      // the warm pool and its template
	rolePoolAgent = "pool-agent"
	rolePoolProxy = "pool-egress"
)

// ProxyRoles maps the role (driver.LabelRole) of each kind of pod that
// runs an agent to the role of its proxy's pod: the one pod, with the same
// sandbox label, that the driver's NetworkPolicies let it reach.
func ProxyRoles() map[string]string {
	return map[string]string{roleAgent: roleEgress, rolePoolAgent: rolePoolProxy}
}

// Paths and ports inside the pods.
const (
	helperPath   = "/.sbx/sbx" // sbx in the sandbox (read-only)
	runDir       = "/.sbx-run" // in-memory, the sandbox's: the bridge's upstream, TTY exec headers
	upstreamFile = runDir + "/upstream"
	proxyPort    = 3128
	canaryPort   = 3129
	proxyName    = "proxy" // the proxy pod's control container
)

// AgentContainer is the sandbox pod's container, where the agent runs.
const AgentContainer = "agent"

// Hardening versions the safeguards of the pods the driver makes (see
// objects.go); a sandbox made with another is replaced to get them.
const Hardening = "2"

// DefaultMemory is the memory limit of a sandbox whose file sets none.
const DefaultMemory = 8 << 30

// Options configure the driver.
type Options struct {
	Runner *runner.Runner
	// Kubectl is the kubectl CLI ("kubectl": found on PATH).
	Kubectl string
	// Docker builds and pushes images when the file names a registry.
	Docker string
	// Binary is a static Linux build of sbx: the helper image's content.
	Binary string
	// HelperImage, when set, is the helper image the pods run instead of
	// sbx-helper:<hash of Binary> ($SBX_K8S_HELPER_IMAGE: a mirror, or a
	// test's own tag); it must hold Binary's build at /sbx, and be where
	// the nodes find it: sbx never builds or pushes it, registry or not.
	HelperImage string
	// Context and Namespace place a sandbox whose file names neither
	// ("": kubectl's current context and its namespace).
	Context, Namespace string
	// ProbeFor bounds how long the enforcement probe waits for the
	// network policy to be in force (default 20 s: CNIs program a new
	// pod's policy asynchronously).
	ProbeFor time.Duration
}

// Driver is the kubernetes driver.
type Driver struct {
	opts Options

	mu sync.Mutex
	// places are where each configured sandbox lives.
	places map[string]place
	// specs are the configured sandboxes, for Exec's workspace.
	specs map[string]*spec.Spec
	// claims are warm sandboxes claimed for an ephemeral run, by the
	// name of the sandbox they stand in for.
	claims map[string]*claim
	// helperTag is the helper image, once its tag is known.
	helperTag string
	// noPools is set once a listing found the cluster without
	// agent-sandbox's extension CRDs (no warm pools there).
	noPools map[place]bool
}

var (
	_ driver.Backend       = (*Driver)(nil)
	_ driver.Configurer    = (*Driver)(nil)
	_ driver.Execer        = (*Driver)(nil)
	_ driver.NetLogger     = (*Driver)(nil)
	_ driver.EgressCounter = (*Driver)(nil)
	_ driver.Helper        = (*Driver)(nil)
	_ driver.Prober        = (*Driver)(nil)
	_ driver.Puller        = (*Driver)(nil)
	_ driver.Claimer       = (*Driver)(nil)
	_ driver.Doctor        = (*Driver)(nil)
)

// New returns a kubernetes driver.
func New(opts Options) *Driver {
	if opts.Runner == nil {
		opts.Runner = &runner.Runner{}
	}
	if opts.Kubectl == "" {
		opts.Kubectl = "kubectl"
	}
	if opts.Docker == "" {
		opts.Docker = "docker"
	}
	if opts.ProbeFor == 0 {
		opts.ProbeFor = 20 * time.Second
	}
	return &Driver{opts: opts, places: map[string]place{}, specs: map[string]*spec.Spec{}, claims: map[string]*claim{}, noPools: map[place]bool{}}
}

// Name is the driver's name in sandbox.yaml.
func (d *Driver) Name() string { return "kubernetes" }

// Executable is kubectl.
func (d *Driver) Executable() string { return d.opts.Kubectl }

// SandboxHelper is where sbx's own binary is inside a sandbox.
func (d *Driver) SandboxHelper() string { return helperPath }

// place is where a sandbox's objects are: a kubeconfig context and a
// namespace ("" for kubectl's defaults).
type place struct{ context, namespace string }

func (p place) String() string {
	ctx, ns := p.context, p.namespace
	if ctx == "" {
		ctx = "the current context"
	}
	if ns == "" {
		ns = "its namespace"
	}
	return fmt.Sprintf("%s, %s", ctx, ns)
}

// Configure learns where each sandbox of the files lives (their
// kubernetes.context and kubernetes.namespace): Observe gets only names.
func (d *Driver) Configure(specs []*spec.Spec) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, sp := range specs {
		d.places[sp.Name] = d.placeOf(sp)
		d.specs[sp.Name] = sp
	}
	return nil
}

func (d *Driver) placeOf(sp *spec.Spec) place {
	p := place{d.opts.Context, d.opts.Namespace}
	if sp != nil {
		k := sp.K8s()
		if k.Context != "" {
			p.context = k.Context
		}
		if k.Namespace != "" {
			p.namespace = k.Namespace
		}
	}
	return p
}

// where is the place of a sandbox by name.
func (d *Driver) where(name string) place {
	d.mu.Lock()
	defer d.mu.Unlock()
	if p, ok := d.places[name]; ok {
		return p
	}
	return place{d.opts.Context, d.opts.Namespace}
}

func (d *Driver) specOf(name string) *spec.Spec {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.specs[name]
}

// kubectl is the argv of a kubectl command at a place.
func (d *Driver) kubectl(p place, args ...string) []string {
	argv := []string{d.opts.Kubectl}
	if p.context != "" {
		argv = append(argv, "--context", p.context)
	}
	if p.namespace != "" {
		argv = append(argv, "--namespace", p.namespace)
	}
	return append(argv, args...)
}

// run runs a kubectl command and returns its stdout.
func (d *Driver) run(ctx context.Context, p place, args ...string) ([]byte, error) {
	return d.opts.Runner.Output(ctx, d.kubectl(p, args...)...)
}

// runInput runs a kubectl command with input on its stdin.
func (d *Driver) runInput(ctx context.Context, p place, input io.Reader, args ...string) ([]byte, error) {
	var out strings.Builder
	err := d.opts.Runner.Run(ctx, runner.Cmd{Args: d.kubectl(p, args...), Stdin: input, Stdout: &out})
	return []byte(out.String()), err
}

// Identify asks kubectl its version (kubectl version --client -o json);
// it fails when kubectl is missing, or sbx is not a static Linux build
// (the pods run this binary). The cluster is asked nothing: which one
// depends on the files, and Observe reaches it.
func (d *Driver) Identify(ctx context.Context) (driver.Identity, error) {
	out, err := d.opts.Runner.Output(ctx, d.opts.Kubectl, "version", "--client", "-o", "json")
	if err != nil {
		return driver.Identity{}, fmt.Errorf("kubectl does not run: %v", err)
	}
	v, err := parseClientVersion(out)
	if err != nil {
		return driver.Identity{}, err
	}
	if err := driver.CheckStatic(d.opts.Binary); err != nil {
		return driver.Identity{}, err
	}
	return driver.Identity{Version: "kubectl " + v}, nil
}

// parseClientVersion reads `kubectl version --client -o json`
// ({"clientVersion":{"gitVersion":"v1.35.4",…},"kustomizeVersion":…},
// k8s.io/apimachinery/pkg/version.Info).
func parseClientVersion(out []byte) (string, error) {
	doc, v := cliutil.Decode(cliutil.Source{Command: "kubectl version --client -o json"}, out)
	gv := v.Object().Field("clientVersion").Object().Field("gitVersion").String()
	if err := doc.Err(); err != nil {
		return "", err
	}
	if _, err := cliutil.ParseVersion(gv); err != nil {
		return "", fmt.Errorf("kubectl version --client -o json: gitVersion %q: %v", gv, err)
	}
	return gv, nil
}

// Use does nothing: no behaviour depends on kubectl's version.
func (d *Driver) Use(driver.Identity) {}

// BuildHash fingerprints a template's build context and the registry it
// is pushed to (another registry is another image).
func (d *Driver) BuildHash(sp *spec.Spec) (string, error) {
	if sp.Template.Build == nil {
		return "", nil
	}
	h, err := buildctx.Hash(sp.Template.Build)
	if err != nil || sp.K8s().Registry == "" {
		return h, err
	}
	sum := sha256.Sum256([]byte(h + "\x00" + sp.K8s().Registry))
	return "sha256:" + hex.EncodeToString(sum[:]), nil
}

// TemplateImage is the image a sandbox runs: the template's, or the one
// sbx builds and pushes, named by its content hash.
func TemplateImage(sp *spec.Spec, hash string) string {
	if sp.Template.Build == nil {
		return sp.Template.Image
	}
	h := strings.TrimPrefix(hash, "sha256:")
	if len(h) > 12 {
		h = h[:12]
	}
	return sp.K8s().Registry + "/sbx-template-" + sp.Name + ":" + h
}

// HelperImage is the tag of the helper image for a static sbx binary:
// FROM scratch with the binary at /sbx, named by its content, so that a
// new sbx never runs an old helper. Under a registry it is
// REGISTRY/sbx-helper:HASH; without one, sbx-helper:HASH, which must
// already be on the nodes (kind load, a local cluster's image store).
func HelperImage(binary, registry string) (string, error) {
	h, err := driver.BinaryHash(binary)
	if err != nil {
		return "", err
	}
	tag := "sbx-helper:" + h
	if registry != "" {
		tag = registry + "/" + tag
	}
	return tag, nil
}

// helperImage is HelperImage for this driver's binary.
func (d *Driver) helperImage(registry string) (string, error) {
	if d.opts.HelperImage != "" {
		return d.opts.HelperImage, nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.helperTag == "" {
		tag, err := HelperImage(d.opts.Binary, "")
		if err != nil {
			return "", fmt.Errorf("sbx's helper image: %v", err)
		}
		d.helperTag = tag
	}
	if registry != "" {
		return registry + "/" + d.helperTag, nil
	}
	return d.helperTag, nil
}

// BuildHelperImage builds the helper image for binary with docker, under
// tag (HelperImage), unless docker has it: the test harness loads it into
// a cluster; with a registry the driver pushes it. labels are more
// --label flags for docker build (the test harness marks its image so
// that a killed run's is swept).
func BuildHelperImage(ctx context.Context, r *runner.Runner, dockerCLI, binary, tag string, labels ...string) error {
	if err := driver.CheckStatic(binary); err != nil {
		return err
	}
	if _, err := r.Output(ctx, dockerCLI, "image", "inspect", "--format", "{{.Id}}", tag); err == nil {
		return nil
	}
	dir, err := os.MkdirTemp("", "sbx-helper-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if err := copyFile(binary, filepath.Join(dir, "sbx"), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte("FROM scratch\nCOPY sbx /sbx\nENTRYPOINT [\"/sbx\"]\n"), 0o644); err != nil {
		return err
	}
	args := append([]string{dockerCLI, "build", "-q", "--label", driver.LabelManaged + "=true"}, labels...)
	_, err = r.Output(ctx, append(args, "-t", tag, dir)...)
	return err
}

func copyFile(src, dst string, mode os.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
