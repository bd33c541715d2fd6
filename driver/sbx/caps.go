package sbx

import (
	"fmt"

	"github.com/sbxhq/sbx/driver/cliutil"
	"github.com/sbxhq/sbx/reconcile"
)

// Capabilities is the table of the sbx driver (Docker's standalone sbx
// CLI) at version v (zero when not yet known), from docker-sandboxes-cli.md
// §3.3 and §4.3 and docker-sbx-evidence.md. Extra mounts appear at their
// host path, a host IP needs a host port (§3.7), and from 0.53 the gemini
// agent is gone (§4). Resources are readable only
// since 0.45 under unconfirmed field names, and the template only through
// a per-sandbox inspect, so both are compared with the record: a no-op plan
// costs one listing and one policy read per sandbox.
func Capabilities(v cliutil.Version) reconcile.Caps {
	const d = "sbx"
	c := reconcile.Caps{Driver: d,
		// sbx stop: "Sandbox 'NAME' stopped; state preserved"
		// (docker-sbx-evidence.md, sbx 0.47.0); "Stopped sandboxes retain
		// their state" (docker-sandboxes-cli.md §1.3).
		StopKeeps: "its VM is stopped, its state kept: what was installed inside stays",
		Constraints: reconcile.Constraints{MountsAtSource: true, HostIPNeedsPort: true,
			// blockCIDRs are deny rules there (network.go), and "the deny
			// rule wins regardless of specificity" (docker-sandboxes-cli.md
			// §3.5, G3).
			BlockedBeatsAllow: "on the sbx backend blockCIDRs are deny rules, which win over allow rules (docker-sandboxes-cli.md §3.5)"}, Fields: map[reconcile.Field]reconcile.Cap{
			reconcile.FieldAgent:           reconcile.ReplaceCap(d, "the agent", true),
			reconcile.FieldTemplate:        reconcile.ReplaceCap(d, "the template", false),
			reconcile.FieldTemplateBuild:   reconcile.ReplaceCap(d, "the template", false),
			reconcile.FieldWorkspace:       reconcile.ReplaceCap(d, "the workspace", true),
			reconcile.FieldMounts:          reconcile.ReplaceCap(d, "mounts", true),
			reconcile.FieldEnv:             reconcile.ReplaceCap(d, "env", false),
			reconcile.FieldSecrets:         reconcile.PerExecCap,
			reconcile.FieldSecretHosts:     reconcile.ProxySecretsCap("Docker's sbx keeps the value and its proxy adds it to requests for the secret's hosts (sbx secret set, set-custom); the sandbox holds a placeholder"),
			reconcile.FieldSecretFiles:     {Mode: reconcile.Unsupported, Reason: "the sbx backend's proxy takes one value per secret, not a file of credentials"},
			reconcile.FieldResources:       reconcile.ReplaceCap(d, "resources", false),
			reconcile.FieldResourcesUnset:  reconcile.ReplaceCap(d, "resources", false),
			reconcile.FieldPids:            {Mode: reconcile.Unsupported, Reason: "the sbx backend cannot limit the number of processes"},
			reconcile.FieldPorts:           reconcile.InPlaceCap("sbx ports changes ports in place", true),
			reconcile.FieldNetworkAdd:      reconcile.InPlaceCap("sbx policy changes network rules in place", true),
			reconcile.FieldNetworkRemove:   reconcile.InPlaceCap("sbx policy changes network rules in place", true),
			reconcile.FieldRuntime:         reconcile.DockerOnlyCap("docker.runtime"),
			reconcile.FieldNoNewPrivileges: reconcile.DockerOnlyCap("docker.noNewPrivileges"),
			reconcile.FieldProtect:         {Mode: reconcile.Ignored, Reason: "the sbx backend cannot mount the declaration read-only; sbx flags every widening it causes instead"},
			reconcile.FieldHardening:       {Mode: reconcile.Ignored},
			reconcile.FieldStatus:          {Mode: reconcile.Ignored, Reason: "Docker's sbx stops an idle sandbox itself and starts it again on exec (evidence §3.2): a stopped sandbox is not drift"},
			reconcile.FieldUser:            {Mode: reconcile.PerExec, Reason: "sbx passes the user to each exec (sbx exec -u)"},
			reconcile.FieldKubernetes:      reconcile.KubernetesOnlyCap("the kubernetes block"),
			reconcile.FieldEgressMode:      reconcile.KubernetesOnlyCap("kubernetes.egress"),
			reconcile.FieldWarmPool:        reconcile.KubernetesOnlyCap("kubernetes.warmPool"),
			reconcile.FieldDockerNetworks:  reconcile.DockerOnlyCap("docker.networks"),
			reconcile.FieldServices:        {Mode: reconcile.Unsupported, Reason: "Docker's sbx runs no containers beside a sandbox: the agent runs them in the sandbox's own Docker daemon"},
			reconcile.FieldHostPorts:       {Mode: reconcile.Unsupported, Reason: "sbx does not translate network.hostPorts for Docker's sbx yet: allow localhost:PORT there with sbx policy allow network, and reach it as host.docker.internal:PORT"},
		}}
	if !v.Less(geminiRetired) {
		c.Constraints.Agents = map[string]string{"gemini": fmt.Sprintf("Docker's sbx %s no longer has the gemini agent (retired in %s); pick another agent, or use the docker driver, which can still run a gemini template", v, geminiRetired)}
	}
	return c
}
