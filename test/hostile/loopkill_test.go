package hostile

import (
	"os/exec"
	"strings"
	"testing"
)

// TestIterationKillReachesDetached: an agent that detaches a process from
// its tree (setsid in a subshell that exits, SIGTERM ignored) and then
// outlives its iteration: the iteration kill ends the detached process
// too, so nothing the agent started runs on after the iteration.
func TestIterationKillReachesDetached(t *testing.T) {
	runtimes(t, func(t *testing.T, runtime string) {
		s := newSandbox(t, "kill", runtime, "")
		s.write("agent.sh", `(setsid sh -c 'trap "" TERM; while :; do sleep 1; done' detached-marker &)
sleep 300
`)
		decl := s.read("sandbox.yaml")
		i := strings.Index(decl, "loop:\n")
		s.write("sandbox.yaml", decl[:i]+`loop:
  prompt: PROMPT.md
  maxIterations: 1
  iterationTimeout: 2s
  completion: {promise: NEVER}
  breaker: {noProgress: 0, sameError: 0}
  command: [sh, agent.sh]
`)
		out, code := s.sbx("loop", "-y")
		if code != 3 || !strings.Contains(out, "hit iterationTimeout") {
			t.Fatalf("loop: exit %d, want 3 after the timeout\n%s", code, out)
		}
		ps, err := exec.Command("docker", "exec", "sbx-"+s.name, "sh", "-c",
			`for p in /proc/[0-9]*; do c=$(tr '\0' ' ' < $p/cmdline 2>/dev/null); case "$c" in *[d]etached-marker*) echo "$c";; esac; done`).Output()
		if err != nil {
			t.Fatalf("listing the sandbox's processes: %v", err)
		}
		if p := strings.TrimSpace(string(ps)); p != "" {
			t.Errorf("the detached process survives the iteration kill:\n%s", p)
		}
	})
}
