package loop

// DefaultCommand is an agent's non-interactive command, which reads the
// prompt on standard input, from each agent's documentation: Claude Code's
// print mode (`claude -p`), Codex's `codex exec -` (the prompt from stdin),
// Gemini CLI's non-interactive mode (stdin is not a terminal), and
// `opencode run`, which reads piped input. Inside the sandbox the agents run
// with their permission prompts off: the sandbox is the boundary. Other
// agents need loop.command.
func DefaultCommand(agent string) []string {
	switch agent {
	case "claude":
		return []string{"claude", "-p", "--dangerously-skip-permissions"}
	case "codex":
		return []string{"codex", "exec", "--dangerously-bypass-approvals-and-sandbox", "-"}
	case "gemini":
		return []string{"gemini", "--yolo"}
	case "opencode":
		return []string{"opencode", "run"}
	}
	return nil
}
