package docker

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sbxhq/sbx/internal/dockertest"
	"github.com/sbxhq/sbx/reconcile"
)

// TestTemplateBuild: a template built from a Dockerfile, tagged by the
// content hash of its context; a change to a file .dockerignore excludes
// changes nothing; a real change rebuilds first, then replaces.
func TestTemplateBuild(t *testing.T) {
	b := newBox(t, "e2e-build")
	ctxDir := filepath.Join(b.dir, "tmpl")
	os.MkdirAll(ctxDir, 0o755)
	write := func(name, content string) {
		if err := os.WriteFile(filepath.Join(ctxDir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("Dockerfile", "FROM "+env.Image+"\nCOPY motd /etc/motd\n")
	write("motd", "version one\n")
	write(".dockerignore", "*.log\n")
	sp := func() string { return "template: {build: {context: tmpl}}\n" }
	p := b.apply(b.spec(sp()))
	if got := stepKinds(p); !strings.HasPrefix(got, "build create") {
		t.Errorf("steps %q, want the build first", got)
	}
	if out, _ := b.sh("cat /etc/motd", nil); strings.TrimSpace(out) != "version one" {
		t.Errorf("motd = %q", out)
	}
	id := b.containerID(ContainerName(b.name))

	write("debug.log", "ignored\n")
	if p := b.plan(b.spec(sp())); !p.Empty() {
		t.Errorf("an ignored file changed the plan: %+v", p.Sandboxes[0].Changes)
	}

	write("motd", "version two\n")
	p = b.apply(b.spec(sp()))
	if got := stepKinds(p); !strings.HasPrefix(got, "build stop remove create") {
		t.Errorf("steps %q, want build before the replace", got)
	}
	if out, _ := b.sh("cat /etc/motd", nil); strings.TrimSpace(out) != "version two" || b.containerID(ContainerName(b.name)) == id {
		t.Errorf("after the rebuild: motd %q", out)
	}
	t.Cleanup(func() {
		b.d.remove(context.Background(), b.name) // the images are in use until then
		dockertest.RemoveBuiltTemplates(b.name)
	})
}

func stepKinds(p *reconcile.Changes) string {
	var kinds []string
	for _, s := range p.Sandboxes[0].Steps {
		kinds = append(kinds, s.Kind.String())
	}
	return strings.Join(kinds, " ")
}

// TestTemplateMissing: an image (the template's, a service's) that is
// neither here nor pullable gives a clear error. The registry named is on loopback, where nothing listens,
// so the pull fails at once without leaving the machine.
func TestTemplateMissing(t *testing.T) {
	b := newBox(t, "e2e-missing")
	p := b.plan(b.spec("template: 127.0.0.1:9/sbx-none:1\n"))
	err := reconcile.Apply(t.Context(), b.d, p, reconcile.ApplyOptions{Records: b.store})
	if err == nil || !strings.Contains(err.Error(), "template image 127.0.0.1:9/sbx-none:1 is not on this machine and cannot be pulled") {
		t.Errorf("apply: %v", err)
	}
	// A service's image likewise, named as the service's; nothing of
	// the sandbox stays.
	p = b.plan(b.spec("services:\n  db: {image: \"127.0.0.1:9/sbx-none:2\", ports: [5432]}\n"))
	err = reconcile.Apply(t.Context(), b.d, p, reconcile.ApplyOptions{Records: b.store})
	if err == nil || !strings.Contains(err.Error(), "service db's image 127.0.0.1:9/sbx-none:2 is not on this machine and cannot be pulled") {
		t.Errorf("apply with a service: %v", err)
	}
	if left := dockertest.Leftovers(b.name); left != "" {
		t.Errorf("a failed create left %s", left)
	}
	// The failed create leaves nothing half-made (the proxy it started
	// would block the next create).
	if left := dockertest.Leftovers(b.name); left != "" {
		t.Errorf("a failed create left behind: %s", left)
	}
}
