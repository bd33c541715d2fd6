package reconcile

import (
	"fmt"

	"github.com/sbxhq/sbx/spec"
)

// The planner's tests run against fixed capability tables shaped like the
// drivers' (each driver owns and tests its own: driver/*/caps.go). They
// test the planner's semantics for a given table, not a driver's table.

func replace(driver, what string, readable bool) Cap {
	return Cap{Mode: Replace, Readable: readable, Reason: fmt.Sprintf("the %s backend cannot change %s in place", driver, what)}
}

func inPlace(how string, readable bool) Cap {
	return Cap{Mode: InPlace, Readable: readable, Reason: how}
}

// perExec is the row of secrets on every driver: their values reach a
// process only through the environment of the exec that starts it.
var perExec = Cap{Mode: PerExec, Reason: "secrets are passed to each exec, never stored in the sandbox"}

func ignored(what string) Cap {
	return Cap{Mode: Ignored, Reason: what + " applies only to the docker driver"}
}

// sbxCaps is the table of the sbx driver (Docker's standalone sbx CLI),
// from docker-sandboxes-cli.md §3.3 and §4.3. Resources are readable only
// since 0.45 under unconfirmed field names, and the template only through
// a per-sandbox inspect, so both are compared with the record: a no-op plan
// costs one listing and one policy read per sandbox.
func sbxCaps() Caps {
	const d = "sbx"
	return Caps{Driver: d, Fields: map[Field]Cap{
		FieldAgent:           replace(d, "the agent", true),
		FieldTemplate:        replace(d, "the template", false),
		FieldTemplateBuild:   replace(d, "the template", false),
		FieldWorkspace:       replace(d, "the workspace", true),
		FieldMounts:          replace(d, "mounts", true),
		FieldEnv:             replace(d, "env", false),
		FieldSecrets:         perExec,
		FieldResources:       replace(d, "resources", false),
		FieldResourcesUnset:  replace(d, "resources", false),
		FieldPids:            {Mode: Unsupported, Reason: "the sbx backend cannot limit the number of processes"},
		FieldPorts:           inPlace("sbx ports changes ports in place", true),
		FieldNetworkAdd:      inPlace("sbx policy changes network rules in place", true),
		FieldNetworkRemove:   inPlace("sbx policy changes network rules in place", true),
		FieldRuntime:         ignored("docker.runtime"),
		FieldNoNewPrivileges: ignored("docker.noNewPrivileges"),
		FieldProtect:         {Mode: Ignored, Reason: "the sbx backend cannot mount the declaration read-only; sbx flags every widening it causes instead"},
		FieldHardening:       {Mode: Ignored},
		FieldStatus:          {Mode: Ignored, Reason: "Docker's sbx stops an idle sandbox itself and starts it again on exec (evidence §3.2): a stopped sandbox is not drift"},
		FieldUser:            {Mode: PerExec, Reason: "sbx passes the user to each exec (sbx exec -u)"},
		FieldKubernetes:      KubernetesOnlyCap("the kubernetes block"),
		FieldEgressMode:      KubernetesOnlyCap("kubernetes.egress"),
		FieldWarmPool:        KubernetesOnlyCap("kubernetes.warmPool"),
		FieldDockerNetworks:  ignored("docker.networks"),
	}}
}

// dockerSandboxCaps is the table of the docker-sandbox driver (the Docker
// Desktop plugin), from docker-sandboxes-cli.md §3.2, §3.5 and §4.2: ls
// --json reports agent and workspaces only, and the proxy configuration's
// field names are undocumented, so the network is compared with the record.
func dockerSandboxCaps() Caps {
	const d = "docker-sandbox"
	return Caps{Driver: d, Fields: map[Field]Cap{
		FieldAgent:           replace(d, "the agent", true),
		FieldTemplate:        replace(d, "the template", false),
		FieldTemplateBuild:   replace(d, "the template", false),
		FieldWorkspace:       replace(d, "the workspace", true),
		FieldMounts:          replace(d, "mounts", true),
		FieldEnv:             {Mode: PerExec, Reason: "the docker-sandbox backend has no stored env: sbx passes it to each exec"},
		FieldSecrets:         perExec,
		FieldResources:       {Mode: Unsupported, Reason: "the docker-sandbox backend cannot set resources"},
		FieldResourcesUnset:  {Mode: Unsupported, Reason: "the docker-sandbox backend cannot set resources"},
		FieldPids:            {Mode: Unsupported, Reason: "the docker-sandbox backend cannot set resources"},
		FieldPorts:           {Mode: Unsupported, Reason: "the docker-sandbox backend cannot publish ports"},
		FieldNetworkAdd:      inPlace("docker sandbox network proxy adds network rules in place", false),
		FieldNetworkRemove:   {Mode: Replace, Reason: "the docker-sandbox backend cannot remove a network rule"},
		FieldRuntime:         ignored("docker.runtime"),
		FieldNoNewPrivileges: ignored("docker.noNewPrivileges"),
		FieldProtect:         {Mode: Ignored, Reason: "the docker-sandbox backend cannot mount the declaration read-only; sbx flags every widening it causes instead"},
		FieldHardening:       {Mode: Ignored},
		FieldStatus:          {Mode: Ignored, Reason: "the docker sandbox plugin has no start command; sbx shell and sbx loop run in the sandbox as the plugin does"},
		FieldUser:            {Mode: PerExec, Reason: "sbx passes the user to each exec (docker sandbox exec -u)"},
		FieldKubernetes:      KubernetesOnlyCap("the kubernetes block"),
		FieldEgressMode:      KubernetesOnlyCap("kubernetes.egress"),
		FieldWarmPool:        KubernetesOnlyCap("kubernetes.warmPool"),
		FieldDockerNetworks:  ignored("docker.networks"),
	}}
}

// dockerHardening versions the safeguards the docker driver gives every
// container it creates (limits, dropped capabilities, no-new-privileges,
// read-only root and socket for the proxy, log rotation); a sandbox made
// with an older version is replaced to get them.
const dockerHardening = "2"

// The limits of a docker sandbox whose file sets none.
const (
	dockerDefaultMemory = 8 << 30
	dockerDefaultPids   = 4096
)

// dockerCaps is the table of the docker driver (plain Docker Engine with
// sbx's egress proxy). Env is compared with the record kept in the
// container's labels.
func dockerCaps() Caps {
	const d = "docker"
	return Caps{Driver: d, Defaults: spec.Resources{Memory: dockerDefaultMemory, Pids: dockerDefaultPids}, Hardening: dockerHardening, Protects: true, ReplaceLoses: "the sandbox's network log (sbx netlog): it is its egress proxy's, which is replaced with it", Fields: map[Field]Cap{
		FieldAgent:           replace(d, "the agent", true),
		FieldTemplate:        replace(d, "the template", true),
		FieldTemplateBuild:   replace(d, "the template", false),
		FieldWorkspace:       replace(d, "the workspace", true),
		FieldMounts:          replace(d, "mounts", true),
		FieldEnv:             replace(d, "env", false),
		FieldSecrets:         perExec,
		FieldResources:       inPlace("docker update changes resources in place", true),
		FieldResourcesUnset:  {Mode: Replace, Readable: true, Reason: "docker update cannot remove a cpu limit"},
		FieldPids:            inPlace("docker update changes resources in place", true),
		FieldPorts:           replace(d, "ports", true),
		FieldNetworkAdd:      inPlace("the egress proxy reloads its policy in place", true),
		FieldNetworkRemove:   inPlace("the egress proxy reloads its policy in place", true),
		FieldRuntime:         replace(d, "docker.runtime", true),
		FieldNoNewPrivileges: replace(d, "docker.noNewPrivileges", true),
		FieldProtect:         replace(d, "workspace.protect", true),
		FieldHardening:       {Mode: Replace, Readable: true, Reason: "the sandbox was created without the docker driver's current safeguards (limits, dropped capabilities, read-only declaration, log rotation)"},
		FieldStatus:          InPlaceCap("docker start starts the stopped containers", true),
		FieldUser:            replace(d, "the user", true),
		FieldKubernetes:      KubernetesOnlyCap("the kubernetes block"),
		FieldEgressMode:      KubernetesOnlyCap("kubernetes.egress"),
		FieldWarmPool:        KubernetesOnlyCap("kubernetes.warmPool"),
		FieldDockerNetworks:  inPlace("the egress proxy's container is made again on the new networks", true),
	}, ByRuntime: map[string]map[Field]Cap{
		// runsc (as Debian packages it) has no update command, so
		// docker update fails for a sandbox under gVisor.
		"runsc": {
			FieldResources: {Mode: Replace, Readable: true, Reason: "docker update cannot change the limits of a sandbox under gVisor (runsc)"},
			FieldPids:      {Mode: Replace, Readable: true, Reason: "docker update cannot change the limits of a sandbox under gVisor (runsc)"},
		},
	}}
}
