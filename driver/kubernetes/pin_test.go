package kubernetes

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/sbxhq/sbx/internal/k8stest"
	"github.com/sbxhq/sbx/reconcile"
)

// TestPin: on this cluster, whose network plugin ignores NetworkPolicy,
// with no emulation of it on the host, in a namespace whose Pod Security
// admits the pin (privileged), a sandbox with egress: enforced is made
// pinned to its proxy in its own network namespace, and the probe shows
// it holds: the agent reaches no other pod directly, and the proxy's
// allow-list decides what it reaches through the proxy. A hostile agent
// cannot remove or rewrite the rules (no NET_ADMIN in its container, not
// even in its bounding set), and after it tried it still reaches nothing
// directly. A new proxy (a new address) gets the pod pinned to it.
func TestPin(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	c.PodSecurity("privileged")
	allowed, other := c.Web("web-allowed"), c.Web("web-other")
	d := c.driver(0)
	b := k8stest.NewBox(t, d, "pinned")
	sp := b.Spec(c.Head() + fmt.Sprintf("network:\n  agentHosts: false\n  blockCIDRs: [127.0.0.0/8]\n  allow: [%s:8080]\n", allowed))
	p := b.MustApply(sp)
	var plan bytes.Buffer
	reconcile.RenderWidth(&plan, p, false, 0)
	if !strings.Contains(plan.String(), "does the namespace admit the egress pin") || !strings.Contains(plan.String(), "pinned to the proxy's pod address:3128 in its own network namespace") {
		t.Errorf("the create's plan does not say which mechanism pins the sandbox:\n%s", plan.String())
	}
	after, err := b.Plan(sp)
	if err != nil {
		t.Fatal(err)
	}
	if n := after.Sandboxes[0].Notes; !strings.Contains(strings.Join(n, "\n"), "egress is pinned to the proxy") {
		t.Errorf("the plan of the made sandbox does not say it is pinned: %q", n)
	}

	// The pod as the cluster runs it: the pin's init container with
	// NET_ADMIN and no other capability, first; the agent's without it.
	var pod struct {
		Spec struct {
			InitContainers []container `json:"initContainers"`
			Containers     []container `json:"containers"`
		} `json:"spec"`
	}
	if err := json.Unmarshal([]byte(c.Kubectl(t, "-n", c.NS, "get", "pod", SandboxPodName(b.Name), "-o", "json")), &pod); err != nil {
		t.Fatal(err)
	}
	if ic := pod.Spec.InitContainers; len(ic) != 2 || ic[0].Name != pinInit || ic[0].SecurityContext == nil || ic[0].SecurityContext.Capabilities == nil ||
		fmt.Sprint(ic[0].SecurityContext.Capabilities.Add) != "[NET_ADMIN]" || fmt.Sprint(ic[0].SecurityContext.Capabilities.Drop) != "[ALL]" {
		t.Errorf("the pod's init containers: %+v", ic)
	}
	for _, ct := range pod.Spec.Containers {
		if sc := ct.SecurityContext; sc != nil && sc.Capabilities != nil && len(sc.Capabilities.Add) > 0 {
			t.Errorf("container %s adds capabilities %v", ct.Name, sc.Capabilities.Add)
		}
	}
	// Inside: CAP_NET_ADMIN (12) is in none of the agent's sets.
	if _, out := b.Sh(`grep -E '^Cap(Inh|Prm|Eff|Bnd|Amb):' /proc/self/status`, nil); !noNetAdmin(t, out) {
		t.Errorf("the agent's process may hold NET_ADMIN:\n%s", out)
	}

	get := func(ip string) string {
		_, out := b.Sh(fmt.Sprintf(`printf 'GET http://%s:8080/ HTTP/1.0\r\nHost: %s:8080\r\n\r\n' | nc -w 5 127.0.0.1 3128 2>&1; echo rc=$?`, ip, ip), nil)
		return strings.TrimSpace(out)
	}
	// direct connects to ip:8080 past the proxy, bounded by nc's 3 s
	// connect timeout: the pod's rules drop the SYN.
	direct := func(ip string) (int, string) {
		return b.Sh(`printf 'GET / HTTP/1.0\r\n\r\n' | nc -w 3 `+ip+` 8080 2>&1`, nil)
	}
	check := func(t *testing.T) {
		t.Helper()
		if out := get(allowed); !strings.Contains(out, "hello from web-allowed") {
			t.Errorf("allowed host through the proxy: %q", out)
		}
		if out := get(other); !strings.Contains(out, "403") || strings.Contains(out, "hello") {
			t.Errorf("unlisted host through the proxy: %q, want the proxy's 403", out)
		}
		for _, ip := range []string{allowed, other} {
			if code, out := direct(ip); code == 0 || strings.Contains(out, "hello") {
				t.Errorf("a direct connection to %s bypassed the proxy: %d %q", ip, code, out)
			}
		}
		// The proxy's other port (the canary), on the address the pod
		// may reach: only 3128 is open.
		if code, out := b.Sh(`nc -w 3 `+d.mustProxyIP(t, c, b.Name)+` 3129 </dev/null 2>&1`, nil); code == 0 {
			t.Errorf("the proxy pod's port 3129 was reached: %q", out)
		}
	}
	t.Run("the proxy decides", check)

	t.Run("hostile agent", func(t *testing.T) {
		// The rules' own writer, run by the agent: remove the table,
		// or rewrite it to allow the unlisted pod. Raw netlink, as nft
		// or iptables-nft would send it.
		for _, args := range []string{"--remove", "--allow " + other + ":8080"} {
			code, out := b.Sh(helperPath+" __k8s-pin "+args, nil)
			if code == 0 || !strings.Contains(out, "operation not permitted") {
				t.Errorf("__k8s-pin %s in the agent's container: %d %q, want it refused (no NET_ADMIN)", args, code, out)
			}
		}
		// Whatever firewall tool the template has, if any.
		for _, cmd := range []string{"iptables -F", "ip6tables -F", "nft flush ruleset"} {
			if code, out := b.Sh(cmd+" 2>&1", nil); code == 0 {
				t.Errorf("%s in the agent's container succeeded: %q", cmd, out)
			}
		}
		check(t)
	})

	t.Run("a new proxy is pinned to", func(t *testing.T) {
		before := d.mustProxyIP(t, c, b.Name)
		c.Kubectl(t, "-n", c.NS, "delete", "pod", EgressPodName(b.Name), "--wait=true")
		p := b.MustApply(sp)
		if a := p.Sandboxes[0].Action; a != reconcile.ActionUpdate {
			t.Fatalf("a sandbox without its proxy is planned as %s", a)
		}
		if now := d.mustProxyIP(t, c, b.Name); now == before {
			t.Logf("the new proxy got the old address %s", now)
		}
		check(t)
	})

	t.Run("a replacement is pinned to its new proxy", func(t *testing.T) {
		before := d.mustProxyIP(t, c, b.Name)
		next := b.Spec(c.Head() + "env: {STAGE: two}\n" + fmt.Sprintf("network:\n  agentHosts: false\n  blockCIDRs: [127.0.0.0/8]\n  allow: [%s:8080]\n", allowed))
		p := b.MustApply(next)
		if a := p.Sandboxes[0].Action; a != reconcile.ActionReplace {
			t.Fatalf("an env change is planned as %s", a)
		}
		if _, out := b.Sh(`echo "$STAGE"`, nil); out != "two\n" {
			t.Errorf("after the replacement: %q", out)
		}
		if now := d.mustProxyIP(t, c, b.Name); now == before {
			t.Logf("the new proxy got the old address %s", now)
		}
		check(t)
	})
}

// mustProxyIP is the address of the sandbox's proxy pod.
func (d *Driver) mustProxyIP(t *testing.T, c *cluster, name string) string {
	t.Helper()
	ip, err := d.podIP(context.Background(), place{namespace: c.NS}, EgressPodName(name))
	if err != nil {
		t.Fatal(err)
	}
	return ip
}

// noNetAdmin reads /proc/PID/status's capability lines and reports
// whether CAP_NET_ADMIN (bit 12) is in none of the sets.
func noNetAdmin(t *testing.T, status string) bool {
	t.Helper()
	n := 0
	for _, l := range strings.Split(strings.TrimSpace(status), "\n") {
		k, v, ok := strings.Cut(l, ":")
		if !ok {
			t.Fatalf("not a capability line: %q", l)
		}
		caps, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
		if err != nil {
			t.Fatalf("%s: %v", k, err)
		}
		if caps&(1<<12) != 0 {
			return false
		}
		n++
	}
	if n != 5 {
		t.Fatalf("%d capability sets in %q, want 5", n, status)
	}
	return true
}

// TestPinWarmPool: a warm pool's sandboxes are pinned to the pool's proxy
// as a sandbox is to its own: with no NetworkPolicy emulation, a claim's
// probe passes and the claimed sandbox reaches no other pod directly.
func TestPinWarmPool(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	c.PodSecurity("privileged")
	web := c.Web("web")
	d := c.driver(0)
	b := k8stest.NewBox(t, d, "pinpool")
	sp := b.Spec(c.Head() + "  warmPool: 1\nnetwork:\n  agentHosts: false\n")
	b.MustApply(sp)
	c.Kubectl(t, "-n", c.NS, "wait", "--for=jsonpath={.status.readyReplicas}=1", "sandboxwarmpools.extensions.agents.x-k8s.io/"+poolName(b.Name), "--timeout=180s")
	var tmpl struct {
		Spec sandboxSpec `json:"spec"`
	}
	if err := json.Unmarshal([]byte(c.Kubectl(t, "-n", c.NS, "get", "sandboxtemplates.extensions.agents.x-k8s.io/"+poolName(b.Name), "-o", "json")), &tmpl); err != nil {
		t.Fatal(err)
	}
	proxy, err := d.podIP(context.Background(), place{namespace: c.NS}, poolProxyName(b.Name))
	if err != nil {
		t.Fatal(err)
	}
	if got := pinnedTo(tmpl.Spec.PodTemplate.Spec); got != joinHostPort(proxy, proxyPort) {
		t.Errorf("the pool's template is pinned to %q, want its proxy %s:%d", got, proxy, proxyPort)
	}
	var rep bytes.Buffer
	release, err := d.Claim(context.Background(), sp, &rep)
	if err != nil {
		t.Fatalf("claim (its probe, with no NetworkPolicy emulation): %v", err)
	}
	if code, out := b.Sh(`printf 'GET / HTTP/1.0\r\n\r\n' | nc -w 3 `+web+` 8080 2>&1`, nil); code == 0 || strings.Contains(out, "hello") {
		t.Errorf("a direct connection from the claimed sandbox bypassed the proxy: %d %q", code, out)
	}
	if err := release(context.Background()); err != nil {
		t.Fatalf("release: %v\n%s", err, rep.String())
	}
}
