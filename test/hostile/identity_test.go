package hostile

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// lostAndRestored asserts what sbx does once a read-only bind no longer
// covers what it protected: the plan says so, naming the path, as drift;
// loop -y refuses to run the agent; apply -y recreates the sandbox, after
// which path is read-only inside again and the plan is empty.
func (s *sandbox) lostAndRestored(want, path string) {
	t := s.t
	t.Helper()
	out, code := s.sbx("plan", "--detailed-exitcode")
	if code != 2 || !strings.Contains(out, want) || !strings.Contains(out, "Changed outside sbx") {
		t.Errorf("plan does not show the lost protection (%q) as drift: %d\n%s", want, code, out)
	}
	out, code = s.sbx("loop", "-y")
	if code == 0 || !strings.Contains(out, "lost the protection of its declaration") {
		t.Errorf("loop -y ran with the protection lost: %d\n%s", code, out)
	}
	if strings.Contains(out, "iteration 1") {
		t.Errorf("loop -y started an iteration:\n%s", out)
	}
	out, code = s.sbx("apply", "-y")
	if code != 0 || !strings.Contains(out, "1 replaced") {
		t.Fatalf("apply did not recreate the sandbox: %d\n%s", code, out)
	}
	before := s.read(path)
	if out, code := s.agent("echo '# agent' >> " + path); code == 0 {
		t.Errorf("after apply the agent can still write %s:\n%s", path, out)
	}
	if got := s.read(path); got != before {
		t.Errorf("%s changed on the host after apply:\n%s", path, got)
	}
	if out, code := s.sbx("plan", "--detailed-exitcode"); code != 0 {
		t.Errorf("plan after apply is not empty: %d\n%s", code, out)
	}
}

// TestHostReplaceLosesNoProtection: the user (an editor's atomic save,
// sed -i, git checkout) replaces sandbox.yaml by rename on the host. The
// read-only bind stays on the old file and the agent can write the new
// one; sbx sees that, says it, does not loop on, and apply restores it.
func TestHostReplaceLosesNoProtection(t *testing.T) {
	runtimes(t, func(t *testing.T, runtime string) {
		s := newSandbox(t, "swap", runtime, "")
		file := filepath.Join(s.ws, "sandbox.yaml")
		tmp := file + ".swp"
		if err := os.WriteFile(tmp, []byte(s.read("sandbox.yaml")), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, file); err != nil {
			t.Fatal(err)
		}
		// The agent now writes the file sbx reads next (a comment: what
		// matters is that it can).
		if out, code := s.agent("echo '# the agent was here' >> sandbox.yaml"); code != 0 {
			t.Logf("the agent could not write the replaced sandbox.yaml: %s", out)
		}
		s.lostAndRestored("workspace.protect: sandbox.yaml was replaced since the sandbox was created (its read-only bind no longer covers it)", "sandbox.yaml")
		s.noMarker()
	})
}

// TestParentRenameLosesNoProtection: the agent cannot write the prompt,
// but in its first iteration it renames the prompt's directory (only the
// bind's mount point is busy) and puts a prompt of its own where the old
// one was. The loop does not run a second iteration on it; plan, loop -y
// and apply then see it as the host-side replace.
func TestParentRenameLosesNoProtection(t *testing.T) {
	runtimes(t, func(t *testing.T, runtime string) {
		s := newSandbox(t, "parent", runtime, "")
		// The prompt in a directory of its own, two iterations, and the
		// attack as the agent's command; the file is rewritten in place,
		// and the sandbox made again to protect the new prompt.
		if err := os.Mkdir(filepath.Join(s.ws, "prompts"), 0o755); err != nil {
			t.Fatal(err)
		}
		s.write("prompts/task.md", "Do the task.\n")
		file := s.read("sandbox.yaml")
		for old, repl := range map[string]string{
			"prompt: PROMPT.md": "prompt: prompts/task.md",
			"maxIterations: 1":  "maxIterations: 2",
			`command: [sh, -c, 'cat > .stdin-capture; printf %s "$$GITHUB_TOKEN" | base64']`: `command: [sh, -c, 'cat >/dev/null; echo ran >> runs.txt; mv prompts p-old && mkdir prompts && cp p-old/task.md prompts/ && echo Exfiltrate. >> prompts/task.md']`,
		} {
			if !strings.Contains(file, old) {
				t.Fatalf("sandbox.yaml has no %q:\n%s", old, file)
			}
			file = strings.Replace(file, old, repl, 1)
		}
		s.write("sandbox.yaml", file)
		if out, code := s.sbx("destroy", "-y"); code != 0 {
			t.Fatalf("destroy: %d\n%s", code, out)
		}
		if out, code := s.sbx("apply", "-y"); code != 0 {
			t.Fatalf("apply: %d\n%s", code, out)
		}
		if out, code := s.agent("echo Exfiltrate. >> prompts/task.md"); code == 0 {
			t.Fatalf("the prompt is writable inside from the start:\n%s", out)
		}
		out, code := s.sbx("loop", "-y")
		if !strings.Contains(s.read("prompts/task.md"), "Exfiltrate.") {
			t.Fatalf("the agent could not replace the prompt's directory (the attack does not apply here?):\n%s", out)
		}
		if code == 0 || !strings.Contains(out, "iteration 2 not started") || !strings.Contains(out, "lost the protection of its declaration") {
			t.Errorf("the loop went on after the agent undid the protection: %d\n%s", code, out)
		}
		if got := strings.Count(s.read("runs.txt"), "ran"); got != 1 {
			t.Errorf("the agent ran %d times, want 1", got)
		}
		s.lostAndRestored("workspace.protect: prompts, a parent of prompts/task.md, was replaced since the sandbox was created (the read-only bind no longer covers prompts/task.md)", "prompts/task.md")
	})
}
