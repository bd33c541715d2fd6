package dockersandbox

import (
	"github.com/sbxhq/sbx/reconcile"
)

// noCheckpoints says why the plugin keeps no checkpoints: `docker sandbox
// save SANDBOX TAG` loads the image into the host's Docker (§1.2), and the
// plugin no longer creates a sandbox from a local image
// (--load-local-template is gone since Desktop 4.61, §5.2), so a saved
// image could not be restored.
const noCheckpoints = "the docker-sandbox backend cannot restore checkpoints: docker sandbox save puts the image in the host's Docker, and the plugin no longer creates sandboxes from local images (docker-sandboxes-cli.md §1.2, §5.2); use the sbx or docker driver"

// blockedBeatsAllow says why an allowed IP literal cannot pass a blocked
// range: the plugin keeps blocked ranges apart from its host rules
// (--block-cidr, --allow-host), and nothing documents that an allowed
// address gets through a blocked range (docker-sandboxes-cli.md §3.2,
// §3.5).
const blockedBeatsAllow = "the docker-sandbox backend keeps blocked ranges apart from its host rules and is not documented to let an allowed address through one (docker-sandboxes-cli.md §3.5)"

// Capabilities is the table of the docker-sandbox driver (the Docker
// Desktop plugin), from docker-sandboxes-cli.md §3.2, §3.5 and §4.2: ls
// --json reports agent and workspaces only, and the proxy configuration's
// field names are undocumented, so the network is compared with the record.
func Capabilities() reconcile.Caps {
	const d = "docker-sandbox"
	return reconcile.Caps{Driver: d,
		// docker sandbox stop stops the VM; its state directory stays
		// (docker sandbox reset is what deletes those:
		// docker-sandboxes-cli.md §1.2).
		StopKeeps:   "its VM is stopped, its state kept: what was installed inside stays",
		Constraints: reconcile.Constraints{MountsAtSource: true, NoCheckpoints: noCheckpoints, BlockedBeatsAllow: blockedBeatsAllow}, Fields: map[reconcile.Field]reconcile.Cap{
			reconcile.FieldAgent:           reconcile.ReplaceCap(d, "the agent", true),
			reconcile.FieldTemplate:        reconcile.ReplaceCap(d, "the template", false),
			reconcile.FieldTemplateBuild:   {Mode: reconcile.Unsupported, Reason: "the docker-sandbox backend cannot use template.build (the plugin no longer loads local images); push the image and name it in template.image, or use the sbx or docker driver"},
			reconcile.FieldWorkspace:       reconcile.ReplaceCap(d, "the workspace", true),
			reconcile.FieldMounts:          reconcile.ReplaceCap(d, "mounts", true),
			reconcile.FieldEnv:             {Mode: reconcile.PerExec, Reason: "the docker-sandbox backend has no stored env: sbx passes it to each exec"},
			reconcile.FieldSecrets:         reconcile.PerExecCap,
			reconcile.FieldSecretHosts:     {Mode: reconcile.Unsupported, Reason: "the docker-sandbox backend has no proxy sbx can hand a secret to, so the sandbox would hold the value"},
			reconcile.FieldSecretFiles:     {Mode: reconcile.Unsupported, Reason: "the docker-sandbox backend has no proxy sbx can hand a secret to, so the sandbox would hold the value"},
			reconcile.FieldResources:       {Mode: reconcile.Unsupported, Reason: "the docker-sandbox backend cannot set resources"},
			reconcile.FieldResourcesUnset:  {Mode: reconcile.Unsupported, Reason: "the docker-sandbox backend cannot set resources"},
			reconcile.FieldPids:            {Mode: reconcile.Unsupported, Reason: "the docker-sandbox backend cannot set resources"},
			reconcile.FieldPorts:           {Mode: reconcile.Unsupported, Reason: "the docker-sandbox backend cannot publish ports"},
			reconcile.FieldNetworkAdd:      reconcile.InPlaceCap("docker sandbox network proxy adds network rules in place", false),
			reconcile.FieldNetworkRemove:   {Mode: reconcile.Replace, Reason: "the docker-sandbox backend cannot remove a network rule"},
			reconcile.FieldRuntime:         reconcile.DockerOnlyCap("docker.runtime"),
			reconcile.FieldNoNewPrivileges: reconcile.DockerOnlyCap("docker.noNewPrivileges"),
			reconcile.FieldProtect:         {Mode: reconcile.Ignored, Reason: "the docker-sandbox backend cannot mount the declaration read-only; sbx flags every widening it causes instead"},
			reconcile.FieldHardening:       {Mode: reconcile.Ignored},
			// The plugin has stop but no start (§1.2, noStart): a stopped
			// sandbox is left as it is, and exec runs in it as the plugin
			// does.
			reconcile.FieldStatus:         {Mode: reconcile.Ignored, Reason: "the docker sandbox plugin has no start command (docker-sandboxes-cli.md §1.2: create, exec, ls, network, reset, rm, run, save, stop, version): a stopped sandbox is not drift; sbx shell and sbx loop run in it as the plugin's exec does"},
			reconcile.FieldUser:           {Mode: reconcile.PerExec, Reason: "sbx passes the user to each exec (docker sandbox exec -u)"},
			reconcile.FieldKubernetes:     reconcile.KubernetesOnlyCap("the kubernetes block"),
			reconcile.FieldEgressMode:     reconcile.KubernetesOnlyCap("kubernetes.egress"),
			reconcile.FieldWarmPool:       reconcile.KubernetesOnlyCap("kubernetes.warmPool"),
			reconcile.FieldDockerNetworks: reconcile.DockerOnlyCap("docker.networks"),
			reconcile.FieldServices:       {Mode: reconcile.Unsupported, Reason: "the docker-sandbox backend runs no containers beside the sandbox for sbx: the agent runs them in the microVM's own Docker daemon"},
			reconcile.FieldHostPorts:      {Mode: reconcile.Unsupported, Reason: "the docker-sandbox backend has no way to a port on the host's loopback that sbx can name"},
		}}
}
