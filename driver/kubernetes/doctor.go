package kubernetes

import (
	"context"
	"fmt"
	"io"
	"os/exec"
	"strings"

	"github.com/sbxhq/sbx/driver"
	"github.com/sbxhq/sbx/driver/cliutil"
	"github.com/sbxhq/sbx/driver/runner"
)

// Checks are sbx doctor's lines for the kubernetes driver, for kubectl's
// current context (or the driver's): the cluster answers, agent-sandbox's
// resources are there, and what cannot be known before an apply.
func (d *Driver) Checks(ctx context.Context) []driver.Check {
	p := place{d.opts.Context, d.opts.Namespace}
	var cs []driver.Check
	out, err := d.run(ctx, p, "version", "-o", "json", "--request-timeout=10s")
	if err != nil {
		return append(cs, driver.Check{Name: "cluster", Detail: fmt.Sprintf("not reachable with kubectl's current context: %v", oneLine(err))})
	}
	vs, err := parseVersions(out)
	if err != nil {
		return append(cs, driver.Check{Name: "cluster", Detail: err.Error()})
	}
	cs = append(cs, driver.Check{Name: "cluster", OK: true, Detail: "Kubernetes " + vs.serverGit + " answers (" + p.String() + ")"}, vs.skewCheck(kubectlPath(d.opts.Kubectl)))
	for _, r := range []struct{ group, resource, why string }{
		{"agents.x-k8s.io", "sandboxes", "install agent-sandbox v1.0 or later (its CRDs and controller)"},
		{"extensions.agents.x-k8s.io", "sandboxwarmpools", "only kubernetes.warmPool needs it: run agent-sandbox's controller with --extensions"},
	} {
		out, err := d.run(ctx, p, "api-resources", "--api-group="+r.group, "-o", "name")
		found := err == nil && strings.Contains("\n"+string(out), "\n"+r.resource+"."+r.group+"\n")
		c := driver.Check{Name: r.resource + "." + r.group, OK: found, Detail: "served"}
		if !found {
			c.Detail = "not served: " + r.why
		}
		cs = append(cs, c)
	}
	for _, verb := range []string{"create sandboxes.agents.x-k8s.io", "create pods", "create pods/exec", "create pods/attach", "create networkpolicies.networking.k8s.io"} {
		out, _ := d.run(ctx, p, append([]string{"auth", "can-i"}, strings.Fields(verb)...)...)
		ok := strings.TrimSpace(string(out)) == "yes"
		c := driver.Check{Name: "can " + verb, OK: ok, Detail: "yes"}
		if !ok {
			c.Detail = "no: the driver needs it in the sandbox's namespace"
		}
		cs = append(cs, c)
	}
	if out, err := d.run(ctx, p, "get", "runtimeclasses", "-o", "name"); err == nil {
		rcs := strings.Fields(strings.ReplaceAll(string(out), "runtimeclass.node.k8s.io/", ""))
		detail := "none: kubernetes.runtimeClassName cannot name one (gVisor or Kata need one installed)"
		if len(rcs) > 0 {
			detail = strings.Join(rcs, ", ")
		}
		cs = append(cs, driver.Check{Name: "RuntimeClasses", Info: true, Detail: detail})
	}
	cs = append(cs, driver.Check{Name: "NetworkPolicy enforcement", Info: true,
		Detail: "unknown until an apply probes it from inside a sandbox: with kubernetes.egress: enforced (the default), apply refuses a sandbox that reaches more than its proxy, which happens when the cluster's network plugin ignores NetworkPolicy and the namespace's Pod Security (baseline, restricted) does not admit sbx's pin in the pod's own network namespace"})
	return cs
}

// versions are kubectl's and the cluster's, from kubectl version -o json.
type versions struct {
	clientGit, serverGit string
	client, server       cliutil.Version
}

// parseVersions reads `kubectl version -o json`: {"clientVersion":
// {"major":"1","minor":"35","gitVersion":"v1.35.4",…},"kustomizeVersion":
// "v5.7.1","serverVersion":{"major":"1","minor":"35","gitVersion":
// "v1.35.4",…}} (k8s.io/apimachinery/pkg/version.Info for both; recorded
// from kubectl v1.35.4 and v1.32.4 against the test cluster's v1.35.4,
// testdata/version). The versions are read from gitVersion: minor may
// carry a "+" (a vendor's build: "32+"). Any other shape, or a gitVersion
// that is not a version, is an error.
func parseVersions(out []byte) (versions, error) {
	doc, v := cliutil.Decode(cliutil.Source{Command: "kubectl version -o json"}, out)
	o := v.Object()
	vs := versions{
		clientGit: o.Field("clientVersion").Object().Field("gitVersion").String(),
		serverGit: o.Field("serverVersion").Object().Field("gitVersion").String(),
	}
	if err := doc.Err(); err != nil {
		return versions{}, err
	}
	var err error
	if vs.client, err = cliutil.ParseVersion(vs.clientGit); err != nil {
		return versions{}, fmt.Errorf("kubectl version -o json: clientVersion.gitVersion %q: %v", vs.clientGit, err)
	}
	if vs.server, err = cliutil.ParseVersion(vs.serverGit); err != nil {
		return versions{}, fmt.Errorf("kubectl version -o json: serverVersion.gitVersion %q: %v", vs.serverGit, err)
	}
	return vs, nil
}

// skewCheck warns when kubectl is more than one minor version away from
// the cluster's: "kubectl is supported within one minor version (older or
// newer) of kube-apiserver" (Kubernetes' version skew policy,
// https://kubernetes.io/releases/version-skew-policy/#kubectl). Beyond
// it, commands the driver relies on (server-side apply, watches, exec)
// may behave differently.
func (vs versions) skewCheck(kubectl string) driver.Check {
	c := driver.Check{Name: "kubectl version skew", OK: true,
		Detail: fmt.Sprintf("kubectl %s with Kubernetes %s: within one minor version", vs.clientGit, vs.serverGit)}
	skew := vs.client[1] - vs.server[1]
	if vs.client[0] != vs.server[0] || skew > 1 || skew < -1 {
		c.OK, c.Warn = false, true
		c.Detail = fmt.Sprintf("kubectl %s (%s) is more than one minor version away from Kubernetes %s, beyond kubectl's supported skew "+
			"(https://kubernetes.io/releases/version-skew-policy/#kubectl): use a kubectl %d.%d, %d.%d or %d.%d (SBX_KUBECTL names one)",
			vs.clientGit, kubectl, vs.serverGit, vs.server[0], vs.server[1]-1, vs.server[0], vs.server[1], vs.server[0], vs.server[1]+1)
	}
	return c
}

// kubectlPath is where kubectl is found, to name it in a message.
func kubectlPath(kubectl string) string {
	if p, err := exec.LookPath(kubectl); err == nil {
		return p
	}
	return kubectl
}

func oneLine(err error) string {
	s, _, _ := strings.Cut(strings.TrimSpace(err.Error()), "\n")
	return s
}

// Probe checks the formats the driver parses, with read-only commands,
// and writes a report without names (sbx doctor --probe).
func (d *Driver) Probe(ctx context.Context, w io.Writer) error {
	p := place{d.opts.Context, d.opts.Namespace}
	out, err := d.opts.Runner.Output(ctx, d.opts.Kubectl, "version", "--client", "-o", "json")
	if err != nil {
		return err
	}
	v, err := parseClientVersion(out)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "kubernetes: kubectl version --client -o json: ok (%s)\n", v)
	ls, err := d.list(ctx, p)
	if err != nil {
		return err
	}
	proxies, pols := 0, 0
	for _, ps := range ls.policies {
		pols += len(ps)
	}
	proxies = len(ls.proxies)
	fmt.Fprintf(w, "kubernetes: %s: ok (%d sandboxes, %d proxies, %d network policies, %d warm pools)\n",
		runner.Quote(d.kubectl(p, "get", kindsCore, "-l", listSelector, "-o", "json")), len(ls.sandboxes), proxies, pols, len(ls.pools))
	return nil
}
