package kubernetes

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sbxhq/sbx/internal/k8stest"
)

// TestWarmPool: a file with kubernetes.warmPool keeps a started sandbox
// in an agent-sandbox SandboxWarmPool; Claim takes it, copies the
// workspace in and probes the emulated enforcement as a create does;
// Exec goes to it (with a secret only in the exec stream); release pulls
// the run's work back and gives the claim up; destroy leaves nothing
// labelled.
func TestWarmPool(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	c.enforce()
	d := c.driver(0)
	b := k8stest.NewBox(t, d, "pooled")
	os.WriteFile(filepath.Join(b.Dir, "ws", "from-host.txt"), []byte("host file\n"), 0o644)
	sp := b.Spec(c.Head() + "  warmPool: 1\nnetwork:\n  agentHosts: false\n")
	b.MustApply(sp)
	c.Kubectl(t, "-n", c.NS, "wait", "--for=jsonpath={.status.readyReplicas}=1", "sandboxwarmpools.extensions.agents.x-k8s.io/"+poolName(b.Name), "--timeout=180s")

	var rep bytes.Buffer
	release, err := d.Claim(context.Background(), sp, &rep)
	if err != nil {
		t.Fatalf("claim: %v", err)
	}
	secret := "pool-" + k8stest.RunID + "-secret"
	if code, out := b.Sh(`cat from-host.txt; printf '%s\n' "$TOKEN"; hostname; echo run work > run.txt`, map[string]string{"TOKEN": secret}); code != 0 || !strings.HasPrefix(out, "host file\n"+secret+"\n") || strings.Contains(out, "\n"+b.Name+"\n") {
		t.Errorf("exec in the claimed sandbox: %d %q (want the workspace copy, the secret, and not the sandbox's own pod)", code, out)
	}
	if err := release(context.Background()); err != nil {
		t.Fatalf("release: %v\n%s", err, rep.String())
	}
	if got, _ := os.ReadFile(filepath.Join(b.Dir, "ws", "run.txt")); string(got) != "run work\n" {
		t.Errorf("the run's work was not pulled back: %q\n%s", got, rep.String())
	}
	if left := c.Kubectl(t, "-n", c.NS, "get", "sandboxclaims.extensions.agents.x-k8s.io", "-o", "name"); strings.TrimSpace(left) != "" {
		t.Errorf("the claim is still there: %s", left)
	}
	if err := b.Destroy(); err != nil {
		t.Fatal(err)
	}
	if left := c.Labelled(b.Name); len(left) > 0 {
		t.Errorf("destroy left: %v", left)
	}
}

// TestLoopPooled drives sbx loop --ephemeral through the built binary on
// a file with a warm pool, as a user would: sbx apply makes the sandbox
// and its pool; the ephemeral run claims the warm sandbox (not the
// sandbox's own pod), runs the agent there with the workspace copied in
// and a secret only in the exec stream, pulls the run's work back as
// sbx pull does (a link the agent points at a host file does not come
// back) and gives the claim up; the applied sandbox stays.
func TestLoopPooled(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	c.enforce()
	dir := t.TempDir()
	ws := filepath.Join(dir, "ws")
	if err := os.MkdirAll(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	const name = "pool-cli"
	secret := "loop-" + k8stest.RunID + "-secret"
	for file, body := range map[string]string{
		"PROMPT.md":     "Do the task.\n",
		"from-host.txt": "host file\n",
		"sandbox.yaml": "version: 1\nname: " + name + "\nagent: shell\ndriver: kubernetes\nworkspace: .\n" + c.Head() +
			"  namespace: " + c.NS + "\n  warmPool: 1\n" + `network: {agentHosts: false}
secrets:
  TOKEN: {env: LOOP_TOKEN}
loop:
  prompt: PROMPT.md
  maxIterations: 2
  completion: {promise: DONE}
  command: [sh, -c, 'cp from-host.txt seen.txt; touch /tmp/ran-here; [ "$$TOKEN" = ` + secret + ` ] && echo yes > had-token; ln -s /etc/hostname leak; echo "<promise>DONE</promise>"']
`,
	} {
		if err := os.WriteFile(filepath.Join(ws, file), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	sbx := c.CLI(ws, filepath.Join(dir, "state"), "SBX_K8S_HELPER_IMAGE="+c.Helper, "LOOP_TOKEN="+secret)
	t.Cleanup(func() {
		if out, err := sbx("destroy", "-y"); err != nil {
			t.Errorf("sbx destroy: %v\n%s", err, out)
		}
	})
	if out, err := sbx("apply", "-y"); err != nil {
		t.Fatalf("sbx apply: %v\n%s", err, out)
	}
	c.Kubectl(t, "-n", c.NS, "wait", "--for=jsonpath={.status.readyReplicas}=1", "sandboxwarmpools.extensions.agents.x-k8s.io/"+poolName(name), "--timeout=180s")

	out, err := sbx("loop", "-y", "--ephemeral")
	if err != nil || !strings.Contains(out, "completed: complete after 1 iteration(s)") {
		t.Fatalf("sbx loop --ephemeral: %v\n%s", err, out)
	}
	m := regexp.MustCompile(`claimed warm sandbox (\S+) from the pool of "` + name + `" in `).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("sbx loop --ephemeral did not say it claimed a warm sandbox:\n%s", out)
	}
	read := func(file string) string {
		b, _ := os.ReadFile(filepath.Join(ws, file))
		return string(b)
	}
	if m[1] == SandboxPodName(name) {
		t.Errorf("the claimed sandbox is the applied one, %s", m[1])
	}
	// The agent left a mark outside its workspace; the sandbox's own pod
	// has neither it nor the run's work.
	if got, err := sbx("shell", "--", "sh", "-c", "test ! -e /tmp/ran-here && test ! -e seen.txt && echo untouched"); err != nil || got != "untouched\n" {
		t.Errorf("the run touched the applied sandbox's own pod: %v %q", err, got)
	}
	if got := read("seen.txt"); got != "host file\n" {
		t.Errorf("the workspace was not copied in: seen.txt = %q", got)
	}
	if got := read("had-token"); got != "yes\n" {
		t.Errorf("the agent did not get the secret: had-token = %q", got)
	}
	if target, err := os.Readlink(filepath.Join(ws, "leak")); err == nil {
		t.Errorf("the agent's link came back, to %q", target)
	}
	if strings.Contains(out, secret) {
		t.Errorf("the secret is in sbx's output:\n%s", out)
	}
	if left := c.Kubectl(t, "-n", c.NS, "get", "sandboxclaims.extensions.agents.x-k8s.io", "-o", "name"); strings.TrimSpace(left) != "" {
		t.Errorf("the claim is still there: %s", left)
	}
	// The run neither made nor destroyed a sandbox of its own.
	if got := c.Kubectl(t, "-n", c.NS, "get", "sandboxes.agents.x-k8s.io/"+name, "-o", "name"); strings.TrimSpace(got) == "" {
		t.Errorf("the applied sandbox is gone after the pooled run")
	}
	if out, err := sbx("destroy", "-y"); err != nil {
		t.Fatalf("sbx destroy: %v\n%s", err, out)
	}
	if left := c.Labelled(name); len(left) > 0 {
		t.Errorf("destroy left: %v", left)
	}
}

// BenchmarkClaim times Claim on the real node: what sbx loop --ephemeral
// waits for before the agent starts. That is the SandboxClaim bound to a
// warm sandbox, the workspace copied in, the bridge pointed at the pool's
// proxy and, with egress enforced, the enforcement probe, whose canary
// dial waits out the 2 s a dropped connection takes. "advisory" is the
// same without the probe. Waiting for the pool to be full again and the
// release are outside the timing. floor-ms/op, timed in the same
// iterations, is kubectl alone claiming a warm sandbox from the same
// pool: kubectl create of a SandboxClaim, then kubectl wait for it to be
// Ready (BENCHMARKS.md).
func BenchmarkClaim(b *testing.B) {
	for _, egress := range []string{"enforced", "advisory"} {
		b.Run(egress, func(b *testing.B) {
			c := newCluster(b)
			if egress == "enforced" {
				c.enforce()
			}
			d := c.driver(0)
			bx := k8stest.NewBox(b, d, "bench")
			sp := bx.Spec(c.Head() + "  warmPool: 1\n  egress: " + egress + "\nnetwork:\n  agentHosts: false\n")
			bx.MustApply(sp)
			ctx := context.Background()
			full := func() {
				c.Kubectl(b, "-n", c.NS, "wait", "--for=jsonpath={.status.readyReplicas}=1", "sandboxwarmpools.extensions.agents.x-k8s.io/"+poolName(bx.Name), "--timeout=180s")
			}
			claim := fmt.Sprintf("apiVersion: %s\nkind: SandboxClaim\nmetadata: {name: floor, namespace: %s}\nspec: {warmPoolRef: {name: %s}}\n", apiExtensions, c.NS, poolName(bx.Name))
			var floor time.Duration
			for b.Loop() {
				b.StopTimer()
				full()
				start := time.Now()
				c.KubectlInput(b, claim, "create", "-f", "-")
				c.Kubectl(b, "-n", c.NS, "wait", "--for=condition=Ready", "sandboxclaims.extensions.agents.x-k8s.io/floor", "--timeout=180s")
				floor += time.Since(start)
				c.Kubectl(b, "-n", c.NS, "delete", "sandboxclaims.extensions.agents.x-k8s.io/floor", "--cascade=foreground", "--wait=true", "--timeout=180s")
				full()
				b.StartTimer()
				release, err := d.Claim(ctx, sp, io.Discard)
				if err != nil {
					b.Fatalf("claim: %v", err)
				}
				b.StopTimer()
				if err := release(ctx); err != nil {
					b.Fatalf("release: %v", err)
				}
				b.StartTimer()
			}
			b.ReportMetric(float64(floor.Microseconds())/1000/float64(b.N), "floor-ms/op")
			if err := bx.Destroy(); err != nil {
				b.Fatal(err)
			}
		})
	}
}
