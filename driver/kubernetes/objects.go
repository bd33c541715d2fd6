package kubernetes

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/sbxhq/sbx/driver"
	"github.com/sbxhq/sbx/driver/cliutil"
	"github.com/sbxhq/sbx/egress"
	"github.com/sbxhq/sbx/reconcile"
	"github.com/sbxhq/sbx/spec"
)

// The objects, as the small part of the Kubernetes and agent-sandbox APIs
// the driver writes and reads. Shapes: k8s.io/api v0.35 (core/v1 Pod,
// PersistentVolumeClaimSpec; networking/v1 NetworkPolicy) and
// sigs.k8s.io/agent-sandbox@v1.0.3 api/v1beta1 (SandboxSpec, SandboxStatus)
// and extensions/api/v1beta1 (SandboxTemplate, SandboxWarmPool,
// SandboxClaim). Fields the driver does not set are left out, so a
// server-side apply owns only these; reading ignores the others.

const (
	apiSandbox    = "agents.x-k8s.io/v1beta1"
	apiExtensions = "extensions.agents.x-k8s.io/v1beta1"
	apiNetworking = "networking.k8s.io/v1"
)

type meta struct {
	Name              string            `json:"name"`
	Namespace         string            `json:"namespace,omitempty"`
	Labels            map[string]string `json:"labels,omitempty"`
	Annotations       map[string]string `json:"annotations,omitempty"`
	DeletionTimestamp string            `json:"deletionTimestamp,omitempty"`
}

// object is one object to apply, or of a list read back, its spec and
// status kept raw until its kind says how to read them.
type object struct {
	APIVersion string          `json:"apiVersion"`
	Kind       string          `json:"kind"`
	Metadata   meta            `json:"metadata"`
	Spec       json.RawMessage `json:"spec,omitempty"`
	Status     json.RawMessage `json:"status,omitempty"`
}

type list struct {
	APIVersion string   `json:"apiVersion"`
	Kind       string   `json:"kind"`
	Items      []object `json:"items"`
}

type podSpec struct {
	AutomountServiceAccountToken  *bool        `json:"automountServiceAccountToken,omitempty"`
	EnableServiceLinks            *bool        `json:"enableServiceLinks,omitempty"`
	TerminationGracePeriodSeconds *int64       `json:"terminationGracePeriodSeconds,omitempty"`
	Hostname                      string       `json:"hostname,omitempty"`
	RuntimeClassName              string       `json:"runtimeClassName,omitempty"`
	SecurityContext               *podSecurity `json:"securityContext,omitempty"`
	InitContainers                []container  `json:"initContainers,omitempty"`
	Containers                    []container  `json:"containers"`
	Volumes                       []volume     `json:"volumes,omitempty"`
	HostAliases                   []hostAlias  `json:"hostAliases,omitempty"`
}

// hostAlias is an /etc/hosts entry of the pod's (core/v1 HostAlias).
type hostAlias struct {
	IP        string   `json:"ip"`
	Hostnames []string `json:"hostnames"`
}

type podSecurity struct {
	SeccompProfile *seccomp `json:"seccompProfile,omitempty"`
}

type seccomp struct {
	Type string `json:"type"`
}

type container struct {
	Name            string         `json:"name"`
	Image           string         `json:"image"`
	ImagePullPolicy string         `json:"imagePullPolicy,omitempty"`
	Command         []string       `json:"command,omitempty"`
	Args            []string       `json:"args,omitempty"`
	WorkingDir      string         `json:"workingDir,omitempty"`
	Env             []envVar       `json:"env,omitempty"`
	Resources       *resources     `json:"resources,omitempty"`
	SecurityContext *securityCtx   `json:"securityContext,omitempty"`
	VolumeMounts    []volumeMount  `json:"volumeMounts,omitempty"`
	Stdin           bool           `json:"stdin,omitempty"`
	ReadinessProbe  *readiness     `json:"readinessProbe,omitempty"`
	Ports           []containerPrt `json:"ports,omitempty"`
}

type envVar struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

type resources struct {
	Limits   map[string]string `json:"limits,omitempty"`
	Requests map[string]string `json:"requests,omitempty"`
}

type securityCtx struct {
	AllowPrivilegeEscalation *bool         `json:"allowPrivilegeEscalation,omitempty"`
	ReadOnlyRootFilesystem   *bool         `json:"readOnlyRootFilesystem,omitempty"`
	RunAsUser                *int64        `json:"runAsUser,omitempty"`
	RunAsGroup               *int64        `json:"runAsGroup,omitempty"`
	Capabilities             *capabilities `json:"capabilities,omitempty"`
}

type capabilities struct {
	Add  []string `json:"add,omitempty"`
	Drop []string `json:"drop,omitempty"`
}

type volumeMount struct {
	Name      string `json:"name"`
	MountPath string `json:"mountPath"`
	ReadOnly  bool   `json:"readOnly,omitempty"`
}

type readiness struct {
	TCPSocket        *tcpSocket  `json:"tcpSocket,omitempty"`
	Exec             *execAction `json:"exec,omitempty"`
	PeriodSeconds    int         `json:"periodSeconds,omitempty"`
	TimeoutSeconds   int         `json:"timeoutSeconds,omitempty"`
	FailureThreshold int         `json:"failureThreshold,omitempty"`
}

// execAction is a probe's command (core/v1 ExecAction).
type execAction struct {
	Command []string `json:"command"`
}

type tcpSocket struct {
	Port int `json:"port"`
}

type containerPrt struct {
	Name          string `json:"name,omitempty"`
	ContainerPort int    `json:"containerPort"`
}

type volume struct {
	Name     string    `json:"name"`
	EmptyDir *emptyDir `json:"emptyDir,omitempty"`
}

type emptyDir struct {
	Medium    string `json:"medium,omitempty"`
	SizeLimit string `json:"sizeLimit,omitempty"`
}

type podStatus struct {
	Phase      string      `json:"phase"`
	PodIP      string      `json:"podIP"`
	Conditions []condition `json:"conditions"`
}

type condition struct {
	Type    string `json:"type"`
	Status  string `json:"status"`
	Reason  string `json:"reason"`
	Message string `json:"message"`
}

// sandboxSpec is agent-sandbox's SandboxSpec (api/v1beta1/sandbox_types.go)
// and, with NetworkPolicyManagement, its SandboxTemplateSpec
// (extensions/api/v1beta1/sandboxtemplate_types.go).
type sandboxSpec struct {
	PodTemplate          podTemplate `json:"podTemplate"`
	VolumeClaimTemplates []claimTmpl `json:"volumeClaimTemplates,omitempty"`
	OperatingMode        string      `json:"operatingMode,omitempty"`
	// NetworkPolicyManagement (templates only): Unmanaged, so the
	// controller adds no policy of its own; its default allows all
	// public egress, and NetworkPolicies add up.
	NetworkPolicyManagement string `json:"networkPolicyManagement,omitempty"`
}

type podTemplate struct {
	Metadata podMeta `json:"metadata"`
	Spec     podSpec `json:"spec"`
}

type podMeta struct {
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

type claimTmpl struct {
	Metadata meta      `json:"metadata"`
	Spec     claimSpec `json:"spec"`
}

type claimSpec struct {
	AccessModes      []string  `json:"accessModes"`
	StorageClassName *string   `json:"storageClassName,omitempty"`
	Resources        resources `json:"resources"`
}

// sandboxStatus is agent-sandbox's SandboxStatus.
type sandboxStatus struct {
	Conditions []condition `json:"conditions"`
	PodIPs     []string    `json:"podIPs"`
}

type networkPolicySpec struct {
	PodSelector selector   `json:"podSelector"`
	PolicyTypes []string   `json:"policyTypes"`
	Ingress     []ruleSpec `json:"ingress,omitempty"`
	Egress      []ruleSpec `json:"egress,omitempty"`
}

type selector struct {
	MatchLabels map[string]string `json:"matchLabels,omitempty"`
}

type ruleSpec struct {
	From  []peer     `json:"from,omitempty"`
	To    []peer     `json:"to,omitempty"`
	Ports []portSpec `json:"ports,omitempty"`
}

type peer struct {
	PodSelector       *selector `json:"podSelector,omitempty"`
	NamespaceSelector *selector `json:"namespaceSelector,omitempty"`
	IPBlock           *ipBlock  `json:"ipBlock,omitempty"`
}

type ipBlock struct {
	CIDR   string   `json:"cidr"`
	Except []string `json:"except,omitempty"`
}

type portSpec struct {
	Protocol string `json:"protocol"`
	Port     int    `json:"port"`
}

func ptr[T any](v T) *T { return &v }

func raw(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // the driver's own types always marshal
	}
	return b
}

// labels are sbx's labels on an object of the sandbox.
func labels(name, role string) map[string]string {
	return map[string]string{driver.LabelManaged: "true", driver.LabelSandbox: name, driver.LabelRole: role}
}

// Object names. Sandbox names are DNS labels (no periods), so a name with
// a period is never another sandbox's.
func sandboxPolicyName(name string) string { return name + ".sandbox" }
func egressPolicyName(name string) string  { return name + ".egress" }

// EgressPodName is the pod of sandbox name's egress proxy.
func EgressPodName(name string) string { return name + ".egress" }

// ClaimName is the workspace's PersistentVolumeClaim of sandbox name
// (agent-sandbox names it <volume claim template>-<sandbox>).
func ClaimName(name string) string { return "workspace-" + name }

// SandboxPodName is the sandbox's pod: agent-sandbox names it after the
// Sandbox (controllers/sandbox_controller.go, v1.0.3).
func SandboxPodName(name string) string { return name }

// agentSecurity is the agent container's: what agents use (installing
// packages as root, setuid to drop to a package manager's user, binding
// low ports) kept; raw sockets, device nodes, audit writes, file
// capabilities and chroot dropped, as the docker driver does.
func agentSecurity(sp *spec.Spec) *securityCtx {
	return &securityCtx{
		AllowPrivilegeEscalation: ptr(!sp.Docker.NoNewPrivileges),
		Capabilities:             &capabilities{Drop: []string{"NET_RAW", "MKNOD", "AUDIT_WRITE", "SETFCAP", "SYS_CHROOT"}},
	}
}

// lockedDown is the security of sbx's own containers (the helper's
// install step, the proxy, the canary): no capability, no privilege
// escalation, read-only root, an unprivileged user.
func lockedDown() *securityCtx {
	return &securityCtx{
		AllowPrivilegeEscalation: ptr(false),
		ReadOnlyRootFilesystem:   ptr(true),
		RunAsUser:                ptr(int64(65534)),
		RunAsGroup:               ptr(int64(65534)),
		Capabilities:             &capabilities{Drop: []string{"ALL"}},
	}
}

// cpuQuantity writes cpus as millicores, memoryQuantity bytes.
func cpuQuantity(cpus float64) string { return strconv.FormatInt(int64(cpus*1000+0.5), 10) + "m" }
func memoryQuantity(b int64) string   { return strconv.FormatInt(b, 10) }
func effectiveMemory(sp *spec.Spec) int64 {
	if sp.Resources.Memory > 0 {
		return sp.Resources.Memory
	}
	return DefaultMemory
}

// What the agent container requests, when its limit is higher: what the
// scheduler sets aside for it on a node. A request equal to the limit (8
// GiB by default) finds no room on a laptop's kind or minikube node (a
// Docker Desktop VM has 8 GiB in all) or a busy shared node, and the pod
// waits Unschedulable for good. An agent mostly waits on its model: its
// CLI, a shell and sbx's init hold a few hundred MiB, and builds and
// tests it starts use more for a while, up to the limit, which stays as
// declared and bounds the damage (THREATS.md 5). The price: with requests
// below limits the pod is Burstable, so a node that runs out of memory
// reclaims from it before Guaranteed pods.
const (
	memoryRequest = 512 << 20
	cpuRequest    = 0.25
)

// agentResources are the agent container's limits (the file's, memory
// DefaultMemory when it sets none) and requests (memoryRequest and
// cpuRequest, or the limit when it is lower). Kubernetes takes a limit
// without a request for the request, so both are always written.
func agentResources(sp *spec.Spec) (limits, requests map[string]string) {
	mem := effectiveMemory(sp)
	limits = map[string]string{"memory": memoryQuantity(mem)}
	requests = map[string]string{"memory": memoryQuantity(min(mem, memoryRequest))}
	if sp.Resources.CPUs > 0 {
		limits["cpu"] = cpuQuantity(sp.Resources.CPUs)
		requests["cpu"] = cpuQuantity(min(sp.Resources.CPUs, cpuRequest))
	}
	return limits, requests
}

// resourcesDesc says the agent's limits and requests in a plan.
func resourcesDesc(sp *spec.Spec) string {
	mem := effectiveMemory(sp)
	s := "memory limit " + humanBytes(mem) + ", request " + humanBytes(min(mem, memoryRequest))
	if sp.Resources.CPUs > 0 {
		s += "; cpu limit " + cpuQuantity(sp.Resources.CPUs) + ", request " + cpuQuantity(min(sp.Resources.CPUs, cpuRequest))
	}
	return s
}

// humanBytes writes a byte count in the largest binary unit that divides
// it (8 GiB, 512 MiB, 1000 B).
func humanBytes(b int64) string {
	for _, u := range []struct {
		n    int64
		name string
	}{{1 << 30, "GiB"}, {1 << 20, "MiB"}, {1 << 10, "KiB"}} {
		if b >= u.n && b%u.n == 0 {
			return strconv.FormatInt(b/u.n, 10) + " " + u.name
		}
	}
	return strconv.FormatInt(b, 10) + " B"
}

// agentPod is the sandbox pod's template: the helper installed by an
// init container into a volume the agent sees read-only at /.sbx, the
// template's image running sbx's init (the bridge to the proxy on
// 127.0.0.1:3128, and the reaper) as PID 1, the file's env, the limits,
// and the workspace volume at the same path as on the host.
//
// pinTo, when set, is the address of the egress proxy (ADDR:PORT, the
// pod address the bridge dials): a first init container then pins the
// pod's egress to it in the pod's own network namespace (pinContainer).
func agentPod(sp *spec.Spec, name, image, helper, role string, workspaceVolume bool, pinTo string) podTemplate {
	services := slices.Sorted(maps.Keys(sp.Services))
	env := append(podProxyEnv(services), sortedEnv(sp.Env)...)
	limits, requests := agentResources(sp)
	ws := sp.Workspace.Path
	mounts := []volumeMount{
		{Name: "sbx-helper", MountPath: "/.sbx", ReadOnly: true},
		{Name: "sbx-run", MountPath: runDir},
		{Name: "workspace", MountPath: ws, ReadOnly: sp.Workspace.ReadOnly},
	}
	vols := []volume{
		{Name: "sbx-helper", EmptyDir: &emptyDir{SizeLimit: "256Mi"}},
		{Name: "sbx-run", EmptyDir: &emptyDir{Medium: "Memory", SizeLimit: "1Mi"}},
	}
	if !workspaceVolume {
		// A warm pool's sandboxes have no claim of their own: the
		// workspace of an ephemeral run lives as long as its pod.
		vols = append(vols, volume{Name: "workspace", EmptyDir: &emptyDir{SizeLimit: sp.K8s().WorkspaceSize}})
	}
	ps := podSpec{
		AutomountServiceAccountToken:  ptr(false),
		EnableServiceLinks:            ptr(false),
		TerminationGracePeriodSeconds: ptr(int64(2)),
		Hostname:                      name,
		RuntimeClassName:              sp.K8s().RuntimeClassName,
		SecurityContext:               &podSecurity{SeccompProfile: &seccomp{Type: "RuntimeDefault"}},
		InitContainers: []container{{
			Name: helperInit, Image: helper, ImagePullPolicy: "IfNotPresent",
			Args:            []string{"__k8s-install-self", helperPath},
			VolumeMounts:    []volumeMount{{Name: "sbx-helper", MountPath: "/.sbx"}},
			SecurityContext: lockedDown(),
			Resources:       &resources{Limits: map[string]string{"cpu": "500m", "memory": "128Mi"}},
		}},
		Containers: []container{{
			Name: AgentContainer, Image: image, ImagePullPolicy: "IfNotPresent",
			Command:         []string{helperPath, "__sandbox-init", "--upstream-file", upstreamFile},
			WorkingDir:      ws,
			Env:             env,
			Resources:       &resources{Limits: limits, Requests: requests},
			SecurityContext: agentSecurity(sp),
			VolumeMounts:    mounts,
		}},
		Volumes: vols,
	}
	if pinTo != "" {
		ps.InitContainers = append([]container{pinContainer(helper, pinTo)}, ps.InitContainers...)
	}
	for _, svc := range services {
		ps.Containers = append(ps.Containers, serviceContainer(sp, svc))
	}
	if len(services) > 0 {
		ps.HostAliases = []hostAlias{{IP: "127.0.0.1", Hostnames: services}}
	}
	return podTemplate{Metadata: podMeta{Labels: labels(sp.Name, role)}, Spec: ps}
}

// podProxyEnv is driver.ProxyEnv as a container's env.
func podProxyEnv(direct []string) []envVar {
	var env []envVar
	for _, kv := range driver.ProxyEnv(direct...) {
		k, v, _ := strings.Cut(kv, "=")
		env = append(env, envVar{k, v})
	}
	return env
}

// sortedEnv is env as a container's, by name.
func sortedEnv(env map[string]string) []envVar {
	var out []envVar
	for _, k := range cliutil.SortedKeys(env) {
		out = append(out, envVar{k, env[k]})
	}
	return out
}

// ServiceContainer is the container of service svc in the sandbox's pod.
func ServiceContainer(svc string) string { return "svc-" + svc }

// serviceContainer is service svc of sp as a container of the sandbox's
// pod: its image, the file's command as the image's CMD (args; its
// ENTRYPOINT stays), its env and the pod's proxy (the pod's network is
// the sandbox's, pinned to the egress proxy: every service has egress,
// which the plan requires the file to say, Constraints.ServicesShareEgress),
// the agent container's safeguards and limits, and its readiness check as
// an exec readiness probe: the pod, which apply waits for, is ready once
// every service is. The agent reaches it as NAME, an /etc/hosts alias of
// the pod's loopback (agentPod).
func serviceContainer(sp *spec.Spec, svc string) container {
	s := sp.Services[svc]
	limits, requests := agentResources(sp)
	c := container{
		Name: ServiceContainer(svc), Image: s.Image, ImagePullPolicy: "IfNotPresent",
		Args:            s.Command,
		Env:             append(sortedEnv(s.Env), podProxyEnv(nil)...),
		Resources:       &resources{Limits: limits, Requests: requests},
		SecurityContext: agentSecurity(sp),
	}
	if s.Ready != nil {
		c.ReadinessProbe = &readiness{Exec: &execAction{Command: s.Ready.Command}, PeriodSeconds: 1, TimeoutSeconds: 10,
			FailureThreshold: 1}
	}
	return c
}

// The sandbox pod's init containers.
const (
	pinInit    = "sbx-egress-pin" // __k8s-pin, with NET_ADMIN
	helperInit = "sbx-helper"     // __k8s-install-self
)

// pinContainer is the init container that pins the sandbox pod's egress
// to its proxy (sbx __k8s-pin: nftables rules in the pod's network
// namespace, which its containers share): root with NET_ADMIN and no
// other capability (nftables speaks netlink; NET_RAW, which iptables'
// legacy backend needs for its raw socket, is not), a read-only root, no
// privilege escalation. It ends before the agent's container starts, and
// that container's capabilities never include NET_ADMIN (agentSecurity),
// so nothing the agent runs can change the rules.
func pinContainer(helper, proxy string) container {
	return container{
		Name: pinInit, Image: helper, ImagePullPolicy: "IfNotPresent",
		Args: []string{"__k8s-pin", "--allow", proxy},
		SecurityContext: &securityCtx{
			AllowPrivilegeEscalation: ptr(false),
			ReadOnlyRootFilesystem:   ptr(true),
			RunAsUser:                ptr(int64(0)),
			RunAsGroup:               ptr(int64(0)),
			Capabilities:             &capabilities{Drop: []string{"ALL"}, Add: []string{"NET_ADMIN"}},
		},
		Resources: &resources{Limits: map[string]string{"cpu": "100m", "memory": "32Mi"}},
	}
}

// pinnedTo is the proxy address a pod template's pin init container
// allows, "" when it has none.
func pinnedTo(ps podSpec) string {
	for _, c := range ps.InitContainers {
		if c.Name == pinInit && len(c.Args) == 3 && c.Args[0] == "__k8s-pin" && c.Args[1] == "--allow" {
			return c.Args[2]
		}
	}
	return ""
}

// sandboxObject is the Sandbox: its pod template, its workspace claim
// (agent-sandbox names it workspace-<name> and owns it), sbx's record and
// what the plan reads back that the pod does not show.
func sandboxObject(sp *spec.Spec, ns, image, helper string, rec *reconcile.Record, pinTo string) (object, error) {
	k := sp.K8s()
	ann := map[string]string{annAgent: sp.Agent, annWorkspace: sp.Workspace.Path, annHardening: Hardening}
	if rec != nil {
		b, err := json.Marshal(rec)
		if err != nil {
			return object{}, err
		}
		ann[annRecord] = string(b)
	}
	cs := claimSpec{AccessModes: []string{"ReadWriteOnce"}, Resources: resources{Requests: map[string]string{"storage": k.WorkspaceSize}}}
	if k.StorageClass != "" {
		cs.StorageClassName = ptr(k.StorageClass)
	}
	s := sandboxSpec{
		PodTemplate:          agentPod(sp, sp.Name, image, helper, roleAgent, true, pinTo),
		VolumeClaimTemplates: []claimTmpl{{Metadata: meta{Name: "workspace", Labels: labels(sp.Name, roleWorkspace)}, Spec: cs}},
		OperatingMode:        "Running",
	}
	return object{APIVersion: apiSandbox, Kind: "Sandbox",
		Metadata: meta{Name: sp.Name, Namespace: ns, Labels: labels(sp.Name, roleSandbox), Annotations: ann},
		Spec:     raw(s)}, nil
}

// proxyPod is the egress proxy's pod: sbx's helper image running
// __egress-proxy on the pod network with the file's policy from its
// first request (later changes come over its control channel, the
// container's stdin, through pods/attach), and a canary on the next port
// that the network policy does not allow, for the enforcement probe.
// Both answer a TCP readiness probe, so a Ready pod listens on both.
func proxyPod(sp *spec.Spec, name, ns, helper, role string, policy egress.Policy) (object, error) {
	pol, err := json.Marshal(policy)
	if err != nil {
		return object{}, err
	}
	ps := podSpec{
		AutomountServiceAccountToken:  ptr(false),
		EnableServiceLinks:            ptr(false),
		TerminationGracePeriodSeconds: ptr(int64(2)),
		Hostname:                      "egress",
		SecurityContext:               &podSecurity{SeccompProfile: &seccomp{Type: "RuntimeDefault"}},
		Containers: []container{{
			Name: proxyName, Image: helper, ImagePullPolicy: "IfNotPresent",
			Args: []string{"__egress-proxy", "--policy", "/var/lib/sbx/policy.json", "--init-policy", string(pol),
				"--listen", "0.0.0.0:" + strconv.Itoa(proxyPort), "--control"},
			Stdin: true,
			// One scheduler thread, as in the docker driver (BENCHMARKS.md).
			Env:             []envVar{{"GOMAXPROCS", "1"}, {"GOMEMLIMIT", "96MiB"}},
			Resources:       &resources{Limits: map[string]string{"cpu": "1", "memory": "128Mi"}, Requests: map[string]string{"cpu": "50m", "memory": "32Mi"}},
			SecurityContext: lockedDown(),
			VolumeMounts:    []volumeMount{{Name: "policy", MountPath: "/var/lib/sbx"}},
			ReadinessProbe:  &readiness{TCPSocket: &tcpSocket{Port: proxyPort}, PeriodSeconds: 1},
			Ports:           []containerPrt{{Name: "proxy", ContainerPort: proxyPort}},
		}, {
			Name: "canary", Image: helper, ImagePullPolicy: "IfNotPresent",
			Args:            []string{"__k8s-canary", "--listen", "0.0.0.0:" + strconv.Itoa(canaryPort)},
			Env:             []envVar{{"GOMAXPROCS", "1"}},
			Resources:       &resources{Limits: map[string]string{"cpu": "100m", "memory": "32Mi"}, Requests: map[string]string{"cpu": "10m", "memory": "8Mi"}},
			SecurityContext: lockedDown(),
			ReadinessProbe:  &readiness{TCPSocket: &tcpSocket{Port: canaryPort}, PeriodSeconds: 1},
		}},
		Volumes: []volume{{Name: "policy", EmptyDir: &emptyDir{SizeLimit: "16Mi"}}},
	}
	return object{APIVersion: "v1", Kind: "Pod",
		Metadata: meta{Name: name, Namespace: ns, Labels: labels(sp.Name, role), Annotations: map[string]string{annPolicy: string(pol)}},
		Spec:     raw(ps)}, nil
}

// policies are the two NetworkPolicies of a sandbox (or of its warm
// pool: agents and proxy are then the pool's roles). The sandbox's pods
// get no ingress and one way out: TCP to their proxy's port. The proxy
// gets ingress from them on that port only, and egress anywhere but the
// blocked ranges, plus DNS to the cluster's resolver (it resolves the
// hosts it allows and checks every address it dials against the same
// ranges itself).
func policies(sp *spec.Spec, ns, agents, proxy, sandboxName, egressName string) []object {
	sel := func(role string) *selector {
		return &selector{MatchLabels: map[string]string{driver.LabelSandbox: sp.Name, driver.LabelRole: role}}
	}
	sandbox := networkPolicySpec{
		PodSelector: *sel(agents),
		PolicyTypes: []string{"Ingress", "Egress"},
		Egress:      []ruleSpec{{To: []peer{{PodSelector: sel(proxy)}}, Ports: []portSpec{{"TCP", proxyPort}}}},
	}
	v4, v6 := blockedRanges(sp)
	out := []peer{{IPBlock: &ipBlock{CIDR: "0.0.0.0/0", Except: v4}}, {IPBlock: &ipBlock{CIDR: "::/0", Except: v6}}}
	proxySpec := networkPolicySpec{
		PodSelector: *sel(proxy),
		PolicyTypes: []string{"Ingress", "Egress"},
		Ingress:     []ruleSpec{{From: []peer{{PodSelector: sel(agents)}}, Ports: []portSpec{{"TCP", proxyPort}}}},
		Egress: []ruleSpec{
			{To: out},
			{To: []peer{{
				NamespaceSelector: &selector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": "kube-system"}},
				PodSelector:       &selector{MatchLabels: map[string]string{"k8s-app": "kube-dns"}},
			}}, Ports: []portSpec{{"UDP", 53}, {"TCP", 53}}},
		},
	}
	mk := func(n string, s networkPolicySpec) object {
		return object{APIVersion: apiNetworking, Kind: "NetworkPolicy",
			Metadata: meta{Name: n, Namespace: ns, Labels: labels(sp.Name, rolePolicy)}, Spec: raw(s)}
	}
	return []object{mk(sandboxName, sandbox), mk(egressName, proxySpec)}
}

// blockedRanges splits network.blockCIDRs by family for ipBlock.except,
// which must lie inside 0.0.0.0/0 or ::/0 (and not be all of it).
func blockedRanges(sp *spec.Spec) (v4, v6 []string) {
	for _, p := range sp.Network.BlockCIDRs {
		switch {
		case p.Bits() == 0:
		case p.Addr().Is4In6():
			// IPv4-mapped addresses (::ffff:0:0/96): Kubernetes takes them
			// for IPv4, which the IPv4 ranges cover.
		case p.Addr().Is4():
			v4 = append(v4, p.String())
		default:
			v6 = append(v6, p.String())
		}
	}
	sort.Strings(v4)
	sort.Strings(v6)
	return v4, v6
}

// hostAddrsOf turns node addresses into the proxy's always-refused
// addresses (egress.Policy.HostAddrs: plain addresses, canonical,
// without duplicates).
func hostAddrsOf(addrs []string) []string {
	var out []string
	seen := map[string]bool{}
	for _, a := range addrs {
		ip, err := netip.ParseAddr(a)
		if err != nil {
			continue
		}
		p := ip.Unmap().WithZone("").String()
		if !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	sort.Strings(out)
	return out
}

// applyList is the document `kubectl apply -f -` reads.
func applyList(objs ...object) ([]byte, error) {
	b, err := json.Marshal(list{APIVersion: "v1", Kind: "List", Items: objs})
	if err != nil {
		return nil, fmt.Errorf("encoding objects: %v", err)
	}
	return b, nil
}
