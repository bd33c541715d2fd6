package docker

import (
	"strings"
	"testing"

	"github.com/sbxhq/sbx/internal/dockertest"
	"github.com/sbxhq/sbx/reconcile"
)

// TestServiceNotReady: a service whose readiness check never passes
// fails the apply once its timeout is up, saying which check and what it
// last printed (escaped), and the failed create leaves nothing behind; one
// that exits fails at once.
func TestServiceNotReady(t *testing.T) {
	b := newBox(t, "e2e-notready")
	svc := func(cmd, ready string) string {
		return "services:\n  db:\n    image: " + env.Image + "\n    command: [sh, -c, " + cmd + "]\n    ports: [5432]\n    ready: {command: [sh, -c, " + ready + "], timeout: 2s}\n"
	}
	p := b.plan(b.spec(svc(`"exec sleep 3600"`, `"printf 'no\\033[2J'; exit 3"`)))
	err := reconcile.Apply(t.Context(), b.d, p, reconcile.ApplyOptions{Records: b.store})
	if err == nil || !strings.Contains(err.Error(), `service db was not ready within 2s: sh -c printf 'no\033[2J'; exit 3 did not succeed (its last try exited 3: no\x1b[2J)`) {
		t.Errorf("apply: %v", err)
	}
	if left := dockertest.Leftovers(b.name); left != "" {
		t.Errorf("a failed create left %s", left)
	}
	p = b.plan(b.spec(svc(`"exit 4"`, `"true"`)))
	err = reconcile.Apply(t.Context(), b.d, p, reconcile.ApplyOptions{Records: b.store})
	if err == nil || !strings.Contains(err.Error(), "service db exited before it was ready: docker logs sbx-"+b.name+"-svc-db says why") {
		t.Errorf("apply of a service that exits: %v", err)
	}
}
