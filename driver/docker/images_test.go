package docker

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
)

// TestPruneImages: a new proxy image's build removes the unused images of
// earlier sbx binaries, never one a container uses nor the new one. The
// test uses a repository of its own, so other runs' images are safe.
func TestPruneImages(t *testing.T) {
	requireDocker(t)
	repo := "sbx-egress-test-" + runID
	dir := t.TempDir()
	for _, tag := range []string{"a", "b", "c"} {
		df := "FROM " + testImage + "\nLABEL " + LabelManaged + "=true\nLABEL dev.sbx.test-tag=" + tag + "\n"
		if err := os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte(df), 0o644); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command("docker", "build", "-q", "-t", repo+":"+tag, dir).CombinedOutput(); err != nil {
			t.Fatalf("docker build: %v: %s", err, out)
		}
		t.Cleanup(func() { exec.Command("docker", "rmi", "-f", repo+":"+tag).Run() })
	}
	user := "sbx-test-prune-" + runID
	if out, err := exec.Command("docker", "create", "--name", user, repo+":a", "true").CombinedOutput(); err != nil {
		t.Fatalf("docker create: %v: %s", err, out)
	}
	t.Cleanup(func() { exec.Command("docker", "rm", "-f", user).Run() })

	d := New(Options{Binary: env.binary})
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
