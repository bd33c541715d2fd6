package docker

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sbxhq/sbx/driver"
	"github.com/sbxhq/sbx/reconcile"
)

// TestPruneImages: a new proxy image's build removes the unused images of
// earlier sbx binaries, never one a container uses nor the new one. The
// test uses a repository of its own, so other runs' images are safe.
func TestPruneImages(t *testing.T) {
	env.Require(t)
	repo := "sbx-egress-test-" + env.RunID
	dir := t.TempDir()
	for _, tag := range []string{"a", "b", "c"} {
		df := "FROM " + env.Image + "\nLABEL " + driver.LabelManaged + "=true\nLABEL dev.sbx.test-tag=" + tag + "\n"
		if err := os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte(df), 0o644); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command("docker", "build", "-q", "-t", repo+":"+tag, dir).CombinedOutput(); err != nil {
			t.Fatalf("docker build: %v: %s", err, out)
		}
		t.Cleanup(func() { exec.Command("docker", "rmi", "-f", repo+":"+tag).Run() })
	}
	user := "sbx-test-prune-" + env.RunID
	if out, err := exec.Command("docker", "create", "--name", user, repo+":a", "true").CombinedOutput(); err != nil {
		t.Fatalf("docker create: %v: %s", err, out)
	}
	t.Cleanup(func() { exec.Command("docker", "rm", "-f", user).Run() })

	d := New(Options{Binary: env.Binary})
	removed, err := d.pruneImages(context.Background(), repo, repo+":c", 0)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(removed, []string{repo + ":b"}) {
		t.Errorf("removed %q, want only the unused %s:b", removed, repo)
	}
	for _, tag := range []string{"a", "c"} {
		if ok, err := d.TemplatePresent(context.Background(), repo+":"+tag); err != nil || !ok {
			t.Errorf("%s:%s is gone (%v)", repo, tag, err)
		}
	}
	if ok, _ := d.TemplatePresent(context.Background(), repo+":b"); ok {
		t.Errorf("%s:b is still there", repo)
	}
	// Young images stay: they may be another sbx's, mid-create.
	if removed, err := d.pruneImages(context.Background(), repo, "", pruneAfter); err != nil || len(removed) > 0 {
		t.Errorf("pruned young images: %q, %v", removed, err)
	}
}

// TestEgressImages: sbx removes its own stale proxy images. Destroying a
// sandbox removes the unused proxy images of other sbx builds (each build
// made one, and they were left behind until a later build's create, an
// hour on), keeping this build's for the next create; and a create whose
// image another sbx pruned in the meantime builds it again rather than
// failing. The test's sbx binary is a copy of its own (a byte appended),
// so its image is the test's alone.
func TestEgressImages(t *testing.T) {
	env.Require(t)
	bin := filepath.Join(t.TempDir(), "sbx")
	data, err := os.ReadFile(env.Binary)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, append(data, []byte("\n"+env.RunID)...), 0o755); err != nil {
		t.Fatal(err)
	}
	own, err := egressTagOf(bin)
	if err != nil {
		t.Fatal(err)
	}
	stale := egressRepo + ":stale-" + env.RunID
	t.Cleanup(func() { exec.Command("docker", "rmi", "-f", own, stale).Run() })
	b := newBox(t, "e2e-egress-images")
	b.d.opts.Binary = bin
	b.d.pruneAfter = 0
	ctx := context.Background()
	if _, err := b.d.egressImage(ctx); err != nil {
		t.Fatal(err)
	}
	// Another sbx prunes it, unused, before the create.
	if out, err := exec.Command("docker", "rmi", own).CombinedOutput(); err != nil {
		t.Fatalf("docker rmi: %v: %s", err, out)
	}
	sp := b.spec("network: {agentHosts: false}\n")
	b.apply(sp)
	if ok, err := b.d.TemplatePresent(ctx, own); err != nil || !ok {
		t.Fatalf("this build's proxy image is not there after the create: %v", err)
	}

	build := exec.Command("docker", "build", "-q", "--label", driver.LabelManaged+"=true", "-t", stale, "-")
	build.Stdin = strings.NewReader("FROM " + env.Image + "\n")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("docker build: %v: %s", err, out)
	}
	live, recs := b.observe()
	dp := reconcile.PlanDestroy([]string{b.name}, live, recs, b.d.Caps(), reconcile.Options{})
	if err := dp.Prepare(b.d, live); err != nil {
		t.Fatal(err)
	}
	if err := reconcile.Apply(ctx, b.d, dp, reconcile.ApplyOptions{Records: b.store}); err != nil {
		t.Fatal(err)
	}
	if ok, _ := b.d.TemplatePresent(ctx, stale); ok {
		t.Errorf("the stale proxy image %s of another build is still there after a destroy", stale)
	}
	if ok, _ := b.d.TemplatePresent(ctx, own); !ok {
		t.Errorf("this build's proxy image %s went with the destroy", own)
	}
}
