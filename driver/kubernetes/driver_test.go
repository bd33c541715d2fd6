package kubernetes

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sbxhq/sbx/driver"
	"github.com/sbxhq/sbx/internal/k8stest"
	"github.com/sbxhq/sbx/netlog"
	"github.com/sbxhq/sbx/reconcile"
)

// TestSandbox is the driver's life on the real cluster, with NetworkPolicy
// enforcement emulated: apply from nothing (the probe passes), exec, an
// allowed host answers through the proxy and an unlisted one is refused,
// an allow-list change in place, an env change that replaces the sandbox
// but keeps its workspace, stop and start keeping it too, pull, destroy
// leaving nothing labelled.
func TestSandbox(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	c.enforce()
	allowed, other := c.Web("web-allowed"), c.Web("web-other")
	d := c.driver(0)
	b := k8stest.NewBox(t, d, "life")
	os.WriteFile(filepath.Join(b.Dir, "ws", "from-host.txt"), []byte("host file\n"), 0o644)
	net := fmt.Sprintf("network:\n  agentHosts: false\n  blockCIDRs: [127.0.0.0/8]\n  allow: [%s:8080%%s]\n", allowed)
	body := c.Head() + "env: {STAGE: one}\n" + net
	sp := b.Spec(fmt.Sprintf(body, ""))
	p := b.MustApply(sp)
	if a := p.Sandboxes[0].Action; a != reconcile.ActionCreate {
		t.Fatalf("first apply: %s", a)
	}
	secret := "tok-" + k8stest.RunID + "-secret"
	if code, out := b.Sh(`printf '%s %s ' "$STAGE" "$TOKEN"; cat from-host.txt; pwd; exit 7`, map[string]string{"TOKEN": secret}); code != 7 || out != "one "+secret+" host file\n"+filepath.Join(b.Dir, "ws")+"\n" {
		t.Errorf("exec: %d %q", code, out)
	}
	// A TTY exec takes the other path (the header saved to a file first).
	var tty bytes.Buffer
	if code, err := d.Exec(context.Background(), b.Name, []string{"sh", "-c", `printf '%s' "$TOKEN"`}, driver.ExecOptions{TTY: true, Env: map[string]string{"TOKEN": secret}, Stdin: strings.NewReader(""), Stdout: &tty, Stderr: &tty}); err != nil || code != 0 || !strings.Contains(tty.String(), secret) {
		t.Errorf("tty exec: %d %v %q", code, err, tty.String())
	}
	t.Run("the secret is in no object, event or log", func(t *testing.T) {
		var all strings.Builder
		all.WriteString(c.Kubectl(t, "get", "-A", "-o", "yaml",
			"sandboxes.agents.x-k8s.io,sandboxclaims.extensions.agents.x-k8s.io,sandboxwarmpools.extensions.agents.x-k8s.io,sandboxtemplates.extensions.agents.x-k8s.io,pods,networkpolicies.networking.k8s.io,persistentvolumeclaims,configmaps,secrets,events"))
		for _, pod := range []string{b.Name, b.Name + ".egress"} {
			all.WriteString(c.Kubectl(t, "-n", c.NS, "logs", "pod/"+pod, "--all-containers"))
		}
		if strings.Contains(all.String(), secret) {
			t.Errorf("the secret's value is in the cluster's objects, events or logs")
		}
		if !strings.Contains(all.String(), "life.egress") {
			t.Fatalf("the listing does not hold the sandbox's objects: %.300s", all.String())
		}
		if _, out := b.Sh(`ls -a /.sbx-run; cat /proc/1/environ | tr '\0' '\n'`, nil); strings.Contains(out, secret) || strings.Contains(out, "exec-") {
			t.Errorf("the secret or a saved exec header stays in the sandbox: %q", out)
		}
	})
	// busybox-static's wget crashes (Debian 1.35's static build), so the
	// requests are written by hand: to the proxy, or straight to the host.
	get := func(ip string) string {
		_, out := b.Sh(fmt.Sprintf(`printf 'GET http://%s:8080/ HTTP/1.0\r\nHost: %s:8080\r\n\r\n' | nc -w 5 127.0.0.1 3128 2>&1; echo rc=$?`, ip, ip), nil)
		return strings.TrimSpace(out)
	}
	if out := get(allowed); !strings.Contains(out, "hello from web-allowed") {
		t.Errorf("allowed host through the proxy: %q", out)
	}
	if out := get(other); !strings.Contains(out, "403") || strings.Contains(out, "hello") {
		t.Errorf("unlisted host: %q, want the proxy's 403", out)
	}
	// Past the proxy: the emulated policy drops it.
	if code, out := b.Sh(`printf 'GET / HTTP/1.0\r\n\r\n' | nc -w 3 `+allowed+` 8080`, nil); code == 0 || strings.Contains(out, "hello") {
		t.Errorf("a direct connection bypassed the proxy: %q", out)
	}
	decisions := map[string]int{}
	if err := d.NetLog(context.Background(), b.Name, false, func(e netlog.Entry) error { decisions[e.Decision]++; return nil }); err != nil || decisions["deny"] == 0 || decisions["allow"] == 0 {
		t.Errorf("netlog: %v, decisions %v", err, decisions)
	}
	if c, err := d.EgressCount(context.Background(), b.Name, time.Now().Add(-time.Hour), time.Now(), 50); err != nil || c.Denied < 1 || len(c.FirstDenied) != min(c.Denied, 50) || c.FirstDenied[0].Host == "" {
		t.Errorf("denials: %+v, %v", c, err)
	}

	t.Run("allow-list change in place", func(t *testing.T) {
		next := b.Spec(fmt.Sprintf(body, ", "+other+":8080"))
		p := b.MustApply(next)
		if a := p.Sandboxes[0].Action; a != reconcile.ActionUpdate {
			t.Fatalf("an added allow rule is planned as %s", a)
		}
		if out := get(other); !strings.Contains(out, "hello from web-other") {
			t.Errorf("newly allowed host: %q", out)
		}
		sp = next
	})

	b.Sh("echo agent work > agent.txt", nil)
	t.Run("env change replaces, keeping the workspace", func(t *testing.T) {
		next := b.Spec(strings.Replace(fmt.Sprintf(body, ", "+other+":8080"), "STAGE: one", "STAGE: two", 1))
		p := b.MustApply(next)
		if a := p.Sandboxes[0].Action; a != reconcile.ActionReplace {
			t.Fatalf("an env change is planned as %s", a)
		}
		if _, out := b.Sh(`echo "$STAGE"; cat agent.txt`, nil); out != "two\nagent work\n" {
			t.Errorf("after the replacement: %q", out)
		}
		sp = next
	})

	t.Run("stop and start keep the workspace", func(t *testing.T) {
		live, _ := d.Observe(context.Background(), []string{b.Name})
		calls, err := d.Calls(reconcile.Step{Kind: reconcile.StepStop, Sandbox: b.Name}, sp, live[b.Name])
		if err != nil {
			t.Fatal(err)
		}
		for _, call := range calls {
			if err := call.Run(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
		live, _ = d.Observe(context.Background(), []string{b.Name})
		if l := live[b.Name]; l == nil || !l.Stopped {
			t.Fatalf("after stop: %+v", l)
		}
		if got := c.Kubectl(t, "-n", c.NS, "get", "pods", "-l", driver.LabelRole+"="+roleAgent, "-o", "name"); strings.TrimSpace(got) != "" {
			t.Errorf("the sandbox's pod is still there: %s", got)
		}
		p := b.MustApply(sp)
		if st := p.Sandboxes[0].Steps; len(st) == 0 || st[0].Kind != reconcile.StepStart {
			t.Fatalf("a stopped sandbox is not started: %+v", st)
		}
		if _, out := b.Sh("cat agent.txt", nil); out != "agent work\n" {
			t.Errorf("after start: %q", out)
		}
		if out := get(allowed); !strings.Contains(out, "hello from web-allowed") {
			t.Errorf("egress after start: %q", out)
		}
	})

	t.Run("pull", func(t *testing.T) {
		var rep bytes.Buffer
		if _, err := d.Pull(context.Background(), sp, &rep); err != nil {
			t.Fatal(err)
		}
		if got, _ := os.ReadFile(filepath.Join(b.Dir, "ws", "agent.txt")); string(got) != "agent work\n" {
			t.Errorf("pulled agent.txt: %q (%s)", got, rep.String())
		}
	})

	t.Run("destroy leaves nothing labelled", func(t *testing.T) {
		if err := b.Destroy(); err != nil {
			t.Fatal(err)
		}
		if left := c.Labelled(b.Name); len(left) > 0 {
			t.Errorf("left: %v", left)
		}
	})
}

// TestProbeRefusesWithoutEnforcement: on this cluster, whose network
// plugin ignores NetworkPolicy, in a namespace whose Pod Security
// (baseline) does not admit the driver's own pin, a sandbox whose egress
// must be enforced is not created: apply fails saying why (the cluster's
// refusal of the pin included), and removes what it made. Its workspace
// volume, of a class whose reclaim policy is Retain, is not left Released
// with a reference to the deleted claim (which no claim binds again
// without an administrator): it is Available, and the next apply's claim
// binds it.
func TestProbeRefusesWithoutEnforcement(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	c.PodSecurity("baseline")
	class := c.retainVolumes(1)
	volume := class + "-0"
	d := c.driver(3 * time.Second)
	b := k8stest.NewBox(t, d, "noenforce")
	head := c.Head() + "  storageClass: " + class + "\n"
	sp := b.Spec(head)
	_, err := b.Apply(sp)
	var ee *EnforcementError
	if !errors.As(err, &ee) {
		t.Fatalf("apply: %v, want the enforcement error", err)
	}
	if !strings.Contains(err.Error(), "does not enforce the NetworkPolicy") || !strings.Contains(err.Error(), "kubernetes.egress: advisory") ||
		!strings.Contains(err.Error(), `violates PodSecurity "baseline`) || !strings.Contains(err.Error(), "NET_ADMIN") || !strings.Contains(err.Error(), "enforce: privileged") {
		t.Errorf("the error does not say what is wrong and what to do: %v", err)
	}
	if left := c.Labelled(b.Name); len(left) > 0 {
		t.Errorf("a refused create left: %v", left)
	}
	// The PV controller turns a volume without a claim reference
	// Available; wait for that (a Released volume never gets there).
	c.Kubectl(t, "wait", "--for=jsonpath={.status.phase}=Available", "persistentvolumes/"+volume, "--timeout=60s")
	if ref := c.Kubectl(t, "get", "persistentvolumes/"+volume, "-o", "jsonpath={.spec.claimRef}"); ref != "" {
		t.Errorf("the volume still names a claim: %s", ref)
	}

	t.Run("advisory", func(t *testing.T) {
		sp := b.Spec(head + "  egress: advisory\n")
		p := b.MustApply(sp)
		var out bytes.Buffer
		reconcile.RenderWidth(&out, p, false, 0)
		if !strings.Contains(out.String(), "EGRESS IS ADVISORY") {
			t.Errorf("the plan does not say egress is advisory:\n%s", out.String())
		}
		if code, _ := b.Sh("true", nil); code != 0 {
			t.Errorf("exec in the advisory sandbox: %d", code)
		}
		if got := c.Kubectl(t, "-n", c.NS, "get", "persistentvolumeclaims/"+ClaimName(b.Name), "-o", "jsonpath={.spec.volumeName}"); got != volume {
			t.Errorf("the workspace claim is bound to %q, want the released volume %s", got, volume)
		}
	})
}
