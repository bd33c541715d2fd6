package agenttest

import (
	"archive/tar"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// The containers a run starts carry these labels: its run id, and when it
// made them, so that a later run can remove what a killed one left.
const (
	labelRun     = "dev.sbx.agenttest"
	labelCreated = "dev.sbx.agenttest.created"
	// leftoverAge is how old another run's container must be to count as
	// left behind; the checks take seconds.
	leftoverAge = time.Hour
)

// requireE2E skips the test for reason, or fails it when SBX_E2E=1 (CI),
// where a skip would pass for a success.
func requireE2E(t *testing.T, reason string) {
	t.Helper()
	if os.Getenv("SBX_E2E") == "1" {
		t.Fatalf("SBX_E2E=1 but %s", reason)
	}
	t.Skipf("%s; set SBX_E2E=1 to make this a failure", reason)
}

func requireDocker(t *testing.T) {
	t.Helper()
	if out, err := exec.Command("docker", "version", "--format", "{{.Server.Version}}").CombinedOutput(); err != nil {
		requireE2E(t, "no Docker daemon: "+err.Error()+": "+strings.TrimSpace(string(out)))
	}
}

// testLog sends progress lines to the test's log.
type testLog struct{ t *testing.T }

func (l testLog) Write(p []byte) (int, error) {
	l.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// checks prints, one per line, what TestTemplate compares: who runs, where,
// the agents' versions, ripgrep and git at work, and the Codex config in
// the user's home with its owners and modes.
const checks = `set -e
echo "id: $(id)"
echo "home: $HOME"
echo "pwd: $(pwd)"
echo "path: $PATH"
echo "modes: $(stat -c '%n %a' / /tmp /root | tr '\n' ' ')"
echo "claude: $(claude --version)"
echo "codex: $(codex --version)"
echo "rg: $(command -v rg) $(printf 'needle\n' | rg -c needle)"
repo=$(mktemp -d)
cd "$repo"
git init -q .
git -c user.name=a -c user.email=a@b commit -q --allow-empty -m hello
echo "git: $(git log --format=%s)"
echo "config: $(cat ~/.codex/config.toml)"
echo "owners: $(stat -c '%n %U:%G %a' ~/.codex ~/.codex/config.toml | tr '\n' ' ')"
`

// TestTemplate builds the template, or finds it built, and checks it in a
// container as its default user and as root.
func TestTemplate(t *testing.T) {
	requireDocker(t)
	start := time.Now()
	// With SBX_AGENT_RELEASES=latest the cache holds the newest releases,
	// and --version must print those.
	c, err := Open(t.Context(), os.Getenv)
	if err != nil {
		t.Fatal(err)
	}
	image, err := c.Template(t.Context(), testLog{t})
	if errors.Is(err, ErrNeedRoot) || errors.Is(err, ErrNoDebootstrap) {
		requireE2E(t, err.Error())
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("template %s (%s) in %s", image, c.Pins, time.Since(start).Round(time.Millisecond))
	clearLeftovers(t)
	run := newRunID(t)

	const path = "path: /usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin\nmodes: / 755 /tmp 1777 /root 700 "
	versions := "claude: " + c.Pins.Claude.Release + " (Claude Code)\ncodex: codex-cli " + c.Pins.Codex.Release + "\nrg: /usr/local/bin/rg 1\ngit: hello\n" +
		`config: openai_base_url = "https://model-api:8443/v1"` + "\n"
	tests := []struct {
		name string
		user []string // docker run's -u; none runs as the image's USER
		want string
	}{
		{"agent", nil, "id: uid=1000(agent) gid=1000(agent) groups=1000(agent)\nhome: /home/agent\npwd: /home/agent\n" + path + "\n" +
			versions + "owners: /home/agent/.codex agent:agent 700 /home/agent/.codex/config.toml agent:agent 644 \n"},
		{"root", []string{"-u", "0"}, "id: uid=0(root) gid=0(root) groups=0(root)\nhome: /root\npwd: /home/agent\n" + path + "\n" +
			versions + "owners: /root/.codex root:root 700 /root/.codex/config.toml root:root 644 \n"},
	}
	t.Run("rootfs.tar", func(t *testing.T) {
		// Docker makes / 0755 whatever the tar says; other importers
		// may not.
		f, err := os.Open(c.rootfsTar())
		if errors.Is(err, fs.ErrNotExist) {
			t.Skip("the image was there but its cache entry is gone: nothing to check")
		}
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		h, err := tar.NewReader(f).Next()
		if err != nil {
			t.Fatal(err)
		}
		if got := fmt.Sprintf("%s %o %d:%d", h.Name, h.Mode&0o7777, h.Uid, h.Gid); got != "./ 755 0:0" {
			t.Errorf("the tar's first entry is %q, want %q", got, "./ 755 0:0")
		}
	})
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			name := "sbx-agenttest-" + run + "-" + tc.name
			args := []string{"run", "--rm", "--name", name, "--network", "none",
				"--label", labelRun + "=" + run, "--label", labelCreated + "=" + strconv.FormatInt(time.Now().Unix(), 10)}
			args = append(append(args, tc.user...), image, "bash", "-c", checks)
			// --rm: the daemon removes the container when bash exits,
			// even if this test is killed first.
			cmd := exec.CommandContext(t.Context(), "docker", args...)
			var stderr strings.Builder
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("docker run: %v\nstdout:\n%s\nstderr:\n%s", err, out, stderr.String())
			}
			if diff := cmp.Diff(tc.want, string(out)); diff != "" {
				t.Errorf("in the container (-want +got):\n%s\nstderr:\n%s", diff, stderr.String())
			}
		})
	}
}

func newRunID(t *testing.T) string {
	b := make([]byte, 4)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// clearLeftovers removes the containers of earlier runs that are older
// than leftoverAge: what a run killed before docker's --rm could act left.
// A running test's containers are younger and stay. The format's .Label
// is docker ps's (docs.docker.com/reference/cli/docker/container/ls,
// "Formatting").
func clearLeftovers(t *testing.T) {
	t.Helper()
	out, err := exec.Command("docker", "ps", "--all", "--filter", "label="+labelRun,
		"--format", `{{.ID}} {{.Label "`+labelCreated+`"}}`).Output()
	if err != nil {
		t.Fatalf("docker ps: %v", err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		id, created, _ := strings.Cut(line, " ")
		sec, err := strconv.ParseInt(created, 10, 64)
		if id == "" || err == nil && time.Since(time.Unix(sec, 0)) < leftoverAge {
			continue
		}
		if out, err := exec.Command("docker", "rm", "--force", id).CombinedOutput(); err != nil {
			t.Fatalf("removing a leftover container: %v: %s", err, out)
		}
	}
}
