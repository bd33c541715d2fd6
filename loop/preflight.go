package loop

import (
	"bytes"
	"context"
	"fmt"
	"strings"

	"github.com/sbxhq/sbx/driver"
	"github.com/sbxhq/sbx/internal/untrusted"
)

// Orphan is an agent that a run whose process died left running in a
// sandbox: its process group's pid file inside the sandbox.
type Orphan struct {
	RunID   string `json:"run_id"`
	Sandbox string `json:"sandbox"`
	Pidfile string `json:"pidfile"`
}

// preflight runs before the first iteration: it kills the agents earlier
// runs left running in the run's sandboxes (their process died; the
// agents must not go on writing the workspace beside this run's), and
// checks that each agent can write the workspace, so that an agent that
// cannot is said at once, not found after iterations of "0 files
// changed".
func (it *iterator) preflight(ctx context.Context) error {
	for _, o := range it.run.Status().Orphans {
		for i := range it.cfg.Agents {
			ag := &it.cfg.Agents[i]
			if ag.Sandbox != o.Sandbox {
				continue
			}
			if err := KillOrphan(ctx, ag.Exec, ag.Group, o.Pidfile); err != nil {
				return fmt.Errorf("killing the agent run %s left running in sandbox %q: %v", o.RunID, o.Sandbox, err)
			}
			it.say("killed the agent that run %s left running in sandbox %q (its sbx process died)", o.RunID, o.Sandbox)
			break
		}
	}
	it.run.update(func(s *Status) { s.Orphans = nil })
	checked := map[string]bool{}
	for i := range it.cfg.Agents {
		ag := &it.cfg.Agents[i]
		if ag.WorkspaceReadOnly || checked[ag.Sandbox] {
			continue
		}
		checked[ag.Sandbox] = true
		if err := it.writable(ctx, ag); err != nil {
			return err
		}
	}
	return nil
}

// KillOrphan ends the process group whose pid file is inside the sandbox
// (an agent a dead run left behind); a pid file that is gone is no error.
func KillOrphan(ctx context.Context, sb Sandbox, g Grouper, pidfile string) error {
	if g == nil {
		g = ShellGrouper{}
	}
	var out bytes.Buffer
	code, err := sb.Exec(ctx, g.Kill(pidfile), driver.ExecOptions{Stdout: &out, Stderr: &out})
	if err != nil {
		return err
	}
	if code != 0 {
		return fmt.Errorf("exit %d: %s", code, untrusted.Text(strings.TrimSpace(out.String())))
	}
	return nil
}

// writableScript exits 0 when the agent's user can write the directory it
// starts in (the workspace), 3 with `id`'s line when it cannot.
const writableScript = `test -w . && exit 0; id; exit 3`

// writable checks, as the agent's user, in the workspace, that the agent
// can write it. A template without sh (exit 126/127) is not checked.
func (it *iterator) writable(ctx context.Context, ag *Agent) error {
	var out bytes.Buffer
	code, err := ag.Exec.Exec(ctx, []string{"sh", "-c", writableScript}, driver.ExecOptions{
		Workdir: it.cfg.Workspace, Stdout: &out, Stderr: &out,
	})
	switch {
	case err != nil:
		return fmt.Errorf("checking that the agent can write the workspace in sandbox %q: %v", ag.Sandbox, err)
	case code == 3:
		who := untrusted.Text(strings.TrimSpace(firstLine(out.String())))
		return fmt.Errorf("the agent cannot write the workspace %s in sandbox %q: it runs as %s; make the workspace writable for that user on the host, or set user: in %s to the workspace's owner (user: host runs as you)",
			it.cfg.Workspace, ag.Sandbox, who, ag.File)
	}
	return nil
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	if len(line) > 200 {
		line = line[:200]
	}
	return line
}

// hostProgress measures the workspace on the host with Scanner's
// snapshots, nothing run there.
type hostProgress struct {
	scan *Scanner
}

func (h *hostProgress) Snapshot(ctx context.Context) (Snapshot, error) { return h.scan.Snapshot(ctx) }
