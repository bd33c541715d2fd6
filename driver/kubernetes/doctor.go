package kubernetes

import (
	"context"
	"fmt"
	"io"
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
	doc, v := cliutil.Decode(cliutil.Source{Command: "kubectl version -o json"}, out)
	server := v.Object().Field("serverVersion").Object().Field("gitVersion").String()
	if err := doc.Err(); err != nil {
		return append(cs, driver.Check{Name: "cluster", Detail: err.Error()})
	}
	cs = append(cs, driver.Check{Name: "cluster", OK: true, Detail: "Kubernetes " + server + " answers (" + p.String() + ")"})
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
