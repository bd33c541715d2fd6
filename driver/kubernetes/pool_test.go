package kubernetes

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestWarmPool: a file with kubernetes.warmPool keeps a started sandbox
// in an agent-sandbox SandboxWarmPool; Claim takes it, copies the
// workspace in and probes the emulated enforcement as a create does;
// Exec goes to it (with a secret only in the exec stream); release pulls
// the run's work back and gives the claim up; destroy leaves nothing
// labelled.
func TestWarmPool(t *testing.T) {
	c := newCluster(t, 1)
	c.enforce()
	d := c.driver(0)
	b := newBox(t, d, "pooled")
	os.WriteFile(filepath.Join(b.dir, "ws", "from-host.txt"), []byte("host file\n"), 0o644)
	sp := b.spec(c.head() + "  warmPool: 1\nnetwork:\n  agentHosts: false\n")
	b.mustApply(sp)
	c.Kubectl(t, "-n", c.ns, "wait", "--for=jsonpath={.status.readyReplicas}=1", "sandboxwarmpools.extensions.agents.x-k8s.io/"+poolName(b.name), "--timeout=180s")

	var rep bytes.Buffer
	release, err := d.Claim(context.Background(), sp, &rep)
	if err != nil {
		t.Fatalf("claim: %v", err)
	}
	secret := "pool-" + runID + "-secret"
	if code, out := b.sh(`cat from-host.txt; printf '%s\n' "$TOKEN"; hostname; echo run work > run.txt`, map[string]string{"TOKEN": secret}); code != 0 || !strings.HasPrefix(out, "host file\n"+secret+"\n") || strings.Contains(out, "\n"+b.name+"\n") {
		t.Errorf("exec in the claimed sandbox: %d %q (want the workspace copy, the secret, and not the sandbox's own pod)", code, out)
	}
	if err := release(context.Background()); err != nil {
		t.Fatalf("release: %v\n%s", err, rep.String())
	}
	if got, _ := os.ReadFile(filepath.Join(b.dir, "ws", "run.txt")); string(got) != "run work\n" {
		t.Errorf("the run's work was not pulled back: %q\n%s", got, rep.String())
	}
	if left := c.Kubectl(t, "-n", c.ns, "get", "sandboxclaims.extensions.agents.x-k8s.io", "-o", "name"); strings.TrimSpace(left) != "" {
		t.Errorf("the claim is still there: %s", left)
	}
	if err := b.destroy(); err != nil {
		t.Fatal(err)
	}
	if left := c.labelled(b.name); len(left) > 0 {
		t.Errorf("destroy left: %v", left)
	}
}
