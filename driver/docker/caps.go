package docker

import (
	"github.com/sbxhq/sbx/reconcile"
	"github.com/sbxhq/sbx/spec"
)

// Hardening versions the safeguards the docker driver gives every
// container it creates (limits, dropped capabilities, no-new-privileges,
// read-only root and socket for the proxy, log rotation; since 3, the
// agent as the workspace's owner rather than root when the file names no
// user; since 4, the socket of the published ports' forwarder); a sandbox
// made with an older version is replaced to get them.
const Hardening = "4"

// The limits of a docker sandbox whose file sets none.
const (
	DefaultMemory = 8 << 30
	DefaultPids   = 4096
)

// Capabilities is the table of the docker driver (plain Docker Engine with
// sbx's egress proxy). Env is compared with the record kept in the
// container's labels.
func Capabilities() reconcile.Caps {
	const d = "docker"
	return reconcile.Caps{Driver: d, Defaults: spec.Resources{Memory: DefaultMemory, Pids: DefaultPids}, Hardening: Hardening, Protects: true, NetworkAtCreate: true,
		Constraints:  reconcile.Constraints{TCPPortsOnly: "the docker driver's forwarder carries tcp only"},
		ReplaceLoses: "the sandbox's network log (sbx netlog): it is its egress proxy's, which is replaced with it",
		// docker stop keeps a container's filesystem (docker start runs
		// the same container again).
		StopKeeps: "its containers are stopped, their filesystems kept: what was installed inside stays",
		Fields: map[reconcile.Field]reconcile.Cap{
			reconcile.FieldAgent:           reconcile.ReplaceCap(d, "the agent", true),
			reconcile.FieldTemplate:        reconcile.ReplaceCap(d, "the template", true),
			reconcile.FieldTemplateBuild:   reconcile.ReplaceCap(d, "the template", false),
			reconcile.FieldWorkspace:       reconcile.ReplaceCap(d, "the workspace", true),
			reconcile.FieldMounts:          reconcile.ReplaceCap(d, "mounts", true),
			reconcile.FieldEnv:             reconcile.ReplaceCap(d, "env", false),
			reconcile.FieldSecrets:         reconcile.PerExecCap,
			reconcile.FieldSecretHosts:     reconcile.ProxySecretsCap("sbx's egress proxy adds the value to requests for the secret's hosts; the sandbox holds a placeholder"),
			reconcile.FieldSecretFiles:     reconcile.ProxySecretsCap("sbx's helper writes the file in the sandbox with placeholders; the egress proxy adds its credentials for the secret's hosts"),
			reconcile.FieldResources:       reconcile.InPlaceCap("docker update changes resources in place", true),
			reconcile.FieldResourcesUnset:  {Mode: reconcile.Replace, Readable: true, Reason: "docker update cannot remove a cpu limit"},
			reconcile.FieldPids:            reconcile.InPlaceCap("docker update changes resources in place", true),
			reconcile.FieldPorts:           reconcile.InPlaceCap("the forwarder of the published ports is made again; the sandbox runs on", true),
			reconcile.FieldNetworkAdd:      reconcile.InPlaceCap("the egress proxy reloads its policy in place", true),
			reconcile.FieldNetworkRemove:   reconcile.InPlaceCap("the egress proxy reloads its policy in place", true),
			reconcile.FieldRuntime:         reconcile.ReplaceCap(d, "docker.runtime", true),
			reconcile.FieldNoNewPrivileges: reconcile.ReplaceCap(d, "docker.noNewPrivileges", true),
			reconcile.FieldProtect:         reconcile.ReplaceCap(d, "workspace.protect", true),
			reconcile.FieldHardening:       {Mode: reconcile.Replace, Readable: true, Reason: "the sandbox was created without the docker driver's current safeguards (limits, dropped capabilities, read-only declaration, log rotation, the agent as the workspace's owner rather than root, the way in for published ports)"},
			reconcile.FieldStatus:          reconcile.InPlaceCap("docker start starts the stopped containers", true),
			reconcile.FieldUser:            reconcile.ReplaceCap(d, "the user", true),
			reconcile.FieldKubernetes:      reconcile.KubernetesOnlyCap("the kubernetes block"),
			reconcile.FieldEgressMode:      reconcile.KubernetesOnlyCap("kubernetes.egress"),
			reconcile.FieldWarmPool:        reconcile.KubernetesOnlyCap("kubernetes.warmPool"),
			reconcile.FieldServices:        reconcile.ReplaceCap(d, "services", false),
			reconcile.FieldHostPorts:       reconcile.InPlaceCap("the relay to the host's loopback is made again and the egress proxy reloads its policy in place", true),
			reconcile.FieldDockerNetworks:  reconcile.InPlaceCap("the egress proxy's container is made again on the new networks while the sandbox runs on (its network log starts afresh)", true),
		}, ByRuntime: map[string]map[reconcile.Field]reconcile.Cap{
			// runsc (as Debian packages it) has no update command, so
			// docker update fails for a sandbox under gVisor.
			"runsc": {
				reconcile.FieldResources: {Mode: reconcile.Replace, Readable: true, Reason: "docker update cannot change the limits of a sandbox under gVisor (runsc)"},
				reconcile.FieldPids:      {Mode: reconcile.Replace, Readable: true, Reason: "docker update cannot change the limits of a sandbox under gVisor (runsc)"},
			},
		}}
}
