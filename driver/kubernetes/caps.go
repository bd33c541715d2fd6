package kubernetes

import (
	"github.com/sbxhq/sbx/reconcile"
	"github.com/sbxhq/sbx/spec"
)

// MaxName is the longest sandbox name the driver takes: the names of the
// objects and labels made from it must stay DNS labels of 63 characters
// (agent-sandbox names a pool's sandboxes <pool>-<suffix>).
const MaxName = 50

// podTemplateReason is why a change of the pod is a replacement:
// agent-sandbox does not touch a running sandbox's pod when its template
// changes (kubernetes.md §1.2), so sbx suspends the sandbox, updates it
// and resumes it, keeping its workspace volume.
const podTemplateReason = "agent-sandbox does not change a running sandbox's pod: the sandbox is suspended, updated and resumed (its workspace volume is kept)"

// Capabilities is the kubernetes driver's table. What the Sandbox and the
// proxy's pod show is read back from one listing; env is compared with
// the record (the pod template also shows it, but a value interpolated
// from the host must not be read back into a plan).
func Capabilities() reconcile.Caps {
	const d = "kubernetes"
	replace := func(readable bool) reconcile.Cap {
		return reconcile.Cap{Mode: reconcile.Replace, Readable: readable, Reason: podTemplateReason}
	}
	return reconcile.Caps{Driver: d, Defaults: spec.Resources{Memory: DefaultMemory}, Hardening: Hardening, Protects: true, NetworkAtCreate: true,
		// A suspended Sandbox has no pod (agent-sandbox deletes it, and
		// the stop waits until it is gone); its workspace claim stays,
		// and start makes a new pod from the template.
		StopKeeps: "its pod is deleted and its workspace volume kept: the workspace stays, but what was installed outside it is lost (start makes a new pod from the template)",
		Constraints: reconcile.Constraints{DNSLabelNames: MaxName,
			// policies: ipBlock.except holds every blocked range.
			BlockedBeatsAllow: "the kubernetes driver's NetworkPolicy keeps every blocked range closed to the egress proxy's pod (ipBlock.except)",
			NoCheckpoints:     "the kubernetes driver has no checkpoints: a sandbox's pod is remade from its template, and its workspace lives in its volume",
			// objects.go's serviceContainer.
			ServicesShareEgress: "the kubernetes driver runs each service as a container of the sandbox's pod, which shares the pod's network: it reaches what the sandbox reaches (the egress proxy, under the sandbox's policy), and the agent reaches every port it listens on",
			MaxServiceName:      63 - len(ServiceContainer("")),
			NoDockerd:           "the kubernetes driver runs no Docker daemon: it would need gVisor as the pod's runtime and every capability in it, which sbx does not give a pod"},
		Fields: map[reconcile.Field]reconcile.Cap{
			reconcile.FieldAgent:           replace(true),
			reconcile.FieldTemplate:        replace(true),
			reconcile.FieldTemplateBuild:   {Mode: reconcile.Replace, Reason: podTemplateReason},
			reconcile.FieldWorkspace:       {Mode: reconcile.Replace, Readable: true, Reason: "a new workspace is a new volume, copied from the host"},
			reconcile.FieldMounts:          {Mode: reconcile.Unsupported, Reason: "the kubernetes driver cannot mount host paths into a pod that may run on another machine: put what the agent needs in the workspace (copied in) or the template"},
			reconcile.FieldEnv:             replace(false),
			reconcile.FieldSecrets:         reconcile.PerExecCap,
			reconcile.FieldSecretHosts:     reconcile.ProxySecretsCap("sbx's egress proxy pod adds the value to requests for the secret's hosts; the sandbox holds a placeholder"),
			reconcile.FieldSecretFiles:     reconcile.ProxySecretsCap("sbx's helper writes the file in the pod with placeholders; the egress proxy pod adds its credentials for the secret's hosts"),
			reconcile.FieldResources:       replace(true),
			reconcile.FieldResourcesUnset:  replace(true),
			reconcile.FieldPids:            {Mode: reconcile.Unsupported, Reason: "Kubernetes limits processes per node (the kubelet's podPidsLimit), not per pod"},
			reconcile.FieldPorts:           {Mode: reconcile.Unsupported, Reason: "the kubernetes driver publishes no ports: the sandbox's network policy admits nothing in, and its only way out is the egress proxy"},
			reconcile.FieldNetworkAdd:      reconcile.InPlaceCap("the egress proxy takes the new policy over its control channel (pods/attach)", true),
			reconcile.FieldNetworkRemove:   reconcile.InPlaceCap("the egress proxy takes the new policy over its control channel (pods/attach)", true),
			reconcile.FieldRuntime:         {Mode: reconcile.Unsupported, Reason: "the kubernetes driver runs pods under a RuntimeClass: set kubernetes.runtimeClassName (gvisor, kata) instead of docker.runtime"},
			reconcile.FieldNoNewPrivileges: replace(true),
			reconcile.FieldProtect:         reconcile.InPlaceCap("sbx pull reads it: while it is on, a pull never writes the declaration or the prompt (git's configuration never comes back, on or off)", false),
			reconcile.FieldHardening:       {Mode: reconcile.Replace, Readable: true, Reason: "the sandbox was made without the kubernetes driver's current safeguards (pod security, limits, the proxy's readiness, the egress pin in the pod's own network namespace)"},
			reconcile.FieldStatus:          reconcile.InPlaceCap("the suspended sandbox is resumed (operatingMode: Running); its workspace volume was kept", true),
			reconcile.FieldKubernetes:      {Mode: reconcile.Replace, Readable: true, Reason: "a sandbox's RuntimeClass and workspace volume are fixed when it is made"},
			reconcile.FieldEgressMode:      reconcile.InPlaceCap("apply runs the enforcement probe, or stops requiring it", false),
			reconcile.FieldWarmPool:        reconcile.InPlaceCap("the SandboxWarmPool is made, resized or removed", true),
			reconcile.FieldUser:            {Mode: reconcile.Unsupported, Reason: "the kubernetes driver runs the agent as its template's USER; set the user in the template"},
			reconcile.FieldDockerNetworks:  {Mode: reconcile.Unsupported, Reason: "the kubernetes driver's egress proxy is a pod, which joins no Docker network"},
			reconcile.FieldServices:        replace(false),
			reconcile.FieldHostPorts:       {Mode: reconcile.Unsupported, Reason: "the kubernetes driver's egress proxy is a pod on a node, with no way to your machine's loopback: run the service in the cluster and allow it by name"},
		}}
}

// Caps is the kubernetes driver's table.
func (d *Driver) Caps() reconcile.Caps { return Capabilities() }
