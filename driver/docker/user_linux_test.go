package docker

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/sbxhq/sbx/internal/dockertest"
	"github.com/sbxhq/sbx/reconcile"
)

// The tests run as root; the workspaces below belong to another uid, as a
// user's checkout belongs to them.
const ownerUID, ownerGID = 4242, 4243

// TestDefaultUser: a file that names no user, with a template whose image
// names none (the busybox template: no USER, no /etc/passwd), runs the
// agent as the workspace's owner, so that what it writes into the
// workspace is the owner's on the host, not root's. The uid, which the
// image has no passwd entry for, gets one (sbx) and a home it can write,
// /home/sbx; the plan after apply is empty.
func TestDefaultUser(t *testing.T) {
	b := newBox(t, "e2e-default-user")
	ws := filepath.Join(b.dir, "ws")
	if err := os.Chown(ws, ownerUID, ownerGID); err != nil {
		t.Fatal(err)
	}
	b.apply(b.spec("network: {agentHosts: false}\n")) // checks the plan after it is empty
	out, code := b.sh(`id -u; id -g; echo "$HOME"; whoami; echo hi > by-agent; echo home > "$HOME/h" && cat "$HOME/h"`, nil)
	if code != 0 || out != "4242\n4243\n/home/sbx\nsbx\nhome\n" {
		t.Fatalf("the agent's identity (exit %d):\n%s", code, out)
	}
	checkOwner(t, filepath.Join(ws, "by-agent"), ownerUID, ownerGID)
	if u := inspectUser(t, ContainerName(b.name)); u != "4242:4243" {
		t.Errorf("the container's user is %q, want the workspace's owner 4242:4243", u)
	}
}

// TestDefaultUserTemplateEntry: a template whose /etc/passwd has an entry
// for the workspace owner's uid keeps it: its name and its home.
func TestDefaultUserTemplateEntry(t *testing.T) {
	b := newBox(t, "e2e-user-entry")
	ws := filepath.Join(b.dir, "ws")
	if err := os.Chown(ws, ownerUID, ownerGID); err != nil {
		t.Fatal(err)
	}
	image := buildImage(t, "user-entry", `RUN ["/bin/sh", "-c", "mkdir -p /etc /home/dev && echo 'root:x:0:0:root:/root:/bin/sh' > /etc/passwd && echo 'dev:x:4242:4243::/home/dev:/bin/sh' >> /etc/passwd && chown 4242:4243 /home/dev"]`)
	b.apply(b.spec("template: " + image + "\nnetwork: {agentHosts: false}\n"))
	if out, code := b.sh(`whoami; echo "$HOME"; grep -c . /etc/passwd`, nil); code != 0 || out != "dev\n/home/dev\n2\n" {
		t.Errorf("the template's own entry (exit %d):\n%s", code, out)
	}
}

// TestDefaultUserHostileTemplate plays the author of a template (or the
// agent whose checkpoint becomes one) who made /etc/passwd a link to a
// file in the workspace, or too large to read: sbx writes nothing through
// the link (the container gets a regular /etc/passwd, the workspace no
// file), and refuses the large one before starting anything, leaving
// nothing behind.
func TestDefaultUserHostileTemplate(t *testing.T) {
	t.Run("link", func(t *testing.T) {
		b := newBox(t, "e2e-user-link")
		ws := filepath.Join(b.dir, "ws")
		if err := os.Chown(ws, ownerUID, ownerGID); err != nil {
			t.Fatal(err)
		}
		image := buildImage(t, "user-link", `RUN ["/bin/sh", "-c", "mkdir -p /etc && ln -s `+ws+`/planted /etc/passwd"]`)
		b.apply(b.spec("template: " + image + "\nnetwork: {agentHosts: false}\n"))
		if out, code := b.sh(`[ -L /etc/passwd ] && echo link; whoami; echo "$HOME"`, nil); code != 0 || out != "sbx\n/home/sbx\n" {
			t.Errorf("in the sandbox (exit %d):\n%s", code, out)
		}
		if _, err := os.Lstat(filepath.Join(ws, "planted")); !os.IsNotExist(err) {
			t.Errorf("sbx wrote through the template's link into the workspace: %v", err)
		}
	})
	t.Run("large", func(t *testing.T) {
		b := newBox(t, "e2e-user-large")
		ws := filepath.Join(b.dir, "ws")
		if err := os.Chown(ws, ownerUID, ownerGID); err != nil {
			t.Fatal(err)
		}
		image := buildImage(t, "user-large", `RUN ["/bin/sh", "-c", "mkdir -p /etc && dd if=/dev/zero bs=1024 count=2048 2>/dev/null | tr '\\0' x > /etc/passwd"]`)
		p := b.plan(b.spec("template: " + image + "\nnetwork: {agentHosts: false}\n"))
		if err := p.Err(); err != nil {
			t.Fatal(err)
		}
		err := reconcile.Apply(context.Background(), b.d, p, reconcile.ApplyOptions{Records: b.store})
		if err == nil || !strings.Contains(err.Error(), "the template's /etc/passwd is 2097152 bytes, more than the 1048576 sbx reads") {
			t.Fatalf("apply of a template with a 2 MiB /etc/passwd: %v", err)
		}
		if left := dockertest.Leftovers(b.name); left != "" {
			t.Errorf("the refused create left: %s", left)
		}
	})
}

// buildImage builds a test image FROM the busybox template with the
// Dockerfile lines rest, removed when the test ends.
func buildImage(t *testing.T, name, rest string) string {
	t.Helper()
	image := "sbx-test-" + name + ":" + env.RunID
	build := exec.Command("docker", "build", "-q", "-t", image, "-")
	build.Stdin = strings.NewReader("FROM " + env.Image + "\n" + rest + "\n")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building %s: %v\n%s", image, err, out)
	}
	t.Cleanup(func() { exec.Command("docker", "rmi", "-f", image).Run() })
	return image
}

func checkOwner(t *testing.T, path string, uid, gid uint32) {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); !ok || st.Uid != uid || st.Gid != gid {
		t.Errorf("%s is owned by %+v on the host, want %d:%d", path, fi.Sys(), uid, gid)
	}
}

func inspectUser(t *testing.T, container string) string {
	t.Helper()
	out, err := exec.Command("docker", "inspect", "-f", "{{.Config.User}}", container).Output()
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(out))
}
