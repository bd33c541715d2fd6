package spec

// Agent is what sbx knows of one agent, in one place: where each fact
// comes from is said beside it.
type Agent struct {
	// Template is Docker's sandbox template of the agent
	// (docker-sandboxes-cli.md §5.2), the default of template.
	Template string
	// Preset names the host preset of the agent's own API and sign-in
	// hosts, allowed implicitly unless network.agentHosts is false; ""
	// for agents that need none.
	Preset string
	// Command is the agent's non-interactive command, which reads the
	// prompt on standard input and prints its answer on standard output;
	// nil for agents whose loop needs loop.command.
	Command []string
	// Key is the environment variable the agent reads its API key from,
	// and HostKey the one sbx init reads it from on the host (the name
	// users already export); "" for agents that sign in another way.
	Key, HostKey string
	// KeyHosts are the hosts the agent sends its key to by default, and
	// KeyPrefix how its keys begin: sbx init writes the key's secret with
	// these hosts, and the sandbox then holds a placeholder shaped like a
	// key (reconcile.Key.Placeholder) instead of the key.
	KeyHosts  []string
	KeyPrefix string
	// Env is set in every command the agent's sandbox runs (the loop's,
	// sbx shell's), unless the file's env or secrets set the same name:
	// what the agent documents for running inside a sandbox.
	Env map[string]string
}

// agentTable holds the facts, in the order docs show the agents, from each agent's documentation and, for claude
// and codex, from running the pinned releases the end-to-end tests run
// (Claude Code 2.1.332, Codex CLI 0.171.0):
//   - claude: `claude -p` (print mode) reads the prompt from stdin and
//     prints the answer on stdout. As root it refuses
//     --dangerously-skip-permissions unless IS_SANDBOX=1 says it runs in a
//     sandbox. CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 turns off its
//     telemetry, error reporting and update checks, hosts the sandbox's
//     egress would deny on every iteration. It reads ANTHROPIC_API_KEY
//     (and ANTHROPIC_BASE_URL for a gateway).
//   - codex: `codex exec -` reads the prompt from stdin, echoes it and its
//     progress on stderr and prints only its final message on stdout. It
//     reads its key from CODEX_API_KEY (not OPENAI_API_KEY) and its base
//     URL from config.toml's openai_base_url (not OPENAI_BASE_URL).
//   - Their keys' default hosts and prefixes: Claude Code sends
//     ANTHROPIC_API_KEY to api.anthropic.com (its default base URL), Codex
//     CODEX_API_KEY to api.openai.com; Anthropic's keys begin sk-ant-api03-,
//     OpenAI's project keys sk-proj-. Not yet checked against the pinned
//     releases (issue 22's end-to-end tests are to).
//   - gemini: non-interactive when stdin is not a terminal; opencode:
//     `opencode run` reads piped input.
var agentTable = []struct {
	Name string
	Agent
}{
	{"claude", Agent{
		Template: "docker/sandbox-templates:claude-code", Preset: "anthropic",
		Command: []string{"claude", "-p", "--dangerously-skip-permissions"},
		Key:     "ANTHROPIC_API_KEY", HostKey: "ANTHROPIC_API_KEY",
		KeyHosts: []string{"api.anthropic.com"}, KeyPrefix: "sk-ant-api03-",
		Env: map[string]string{"IS_SANDBOX": "1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1"},
	}},
	{"codex", Agent{
		Template: "docker/sandbox-templates:codex", Preset: "openai",
		Command: []string{"codex", "exec", "--dangerously-bypass-approvals-and-sandbox", "-"},
		Key:     "CODEX_API_KEY", HostKey: "OPENAI_API_KEY",
		KeyHosts: []string{"api.openai.com"}, KeyPrefix: "sk-proj-",
	}},
	{"copilot", Agent{Template: "docker/sandbox-templates:copilot", Preset: "github-copilot", Key: "GITHUB_TOKEN", HostKey: "GITHUB_TOKEN"}},
	{"cursor", Agent{Template: "docker/sandbox-templates:cursor-agent", Preset: "cursor", Key: "CURSOR_API_KEY", HostKey: "CURSOR_API_KEY"}},
	{"devin", Agent{Template: "docker/sandbox-templates:devin"}},
	{"gemini", Agent{Template: "docker/sandbox-templates:gemini", Preset: "google-gemini", Command: []string{"gemini", "--yolo"}, Key: "GEMINI_API_KEY", HostKey: "GEMINI_API_KEY"}},
	{"kiro", Agent{Template: "docker/sandbox-templates:kiro", Preset: "kiro"}},
	{"opencode", Agent{Template: "docker/sandbox-templates:opencode", Preset: "opencode", Command: []string{"opencode", "run"}}},
	{"droid", Agent{Template: "docker/sandbox-templates:droid", Preset: "droid", Key: "FACTORY_API_KEY", HostKey: "FACTORY_API_KEY"}},
	{"docker-agent", Agent{Template: "docker/sandbox-templates:docker-agent"}},
	{"shell", Agent{Template: "docker/sandbox-templates:shell"}},
}

// Agents lists the agents a sandbox can run, in the order docs show them:
// agentTable's. The schema's enum of agent is tested against it.
var Agents = func() []string {
	names := make([]string, len(agentTable))
	for i, a := range agentTable {
		names[i] = a.Name
	}
	return names
}()

// agents indexes agentTable by name.
var agents = func() map[string]Agent {
	m := make(map[string]Agent, len(agentTable))
	for _, a := range agentTable {
		m[a.Name] = a.Agent
	}
	return m
}()

// AgentOf returns what sbx knows of an agent (the zero Agent for a name
// it does not know).
func AgentOf(name string) Agent {
	a := agents[name]
	a.Command = append([]string(nil), a.Command...)
	return a
}

// Program is the program that starts the agent in its template: its
// command's first word, or its name.
func (a Agent) Program(name string) string {
	if len(a.Command) > 0 {
		return a.Command[0]
	}
	return name
}

// AgentPreset names the preset holding an agent's own API and sign-in hosts.
func AgentPreset(agent string) string { return agents[agent].Preset }

// DefaultTemplate returns the Docker Sandboxes template image of an agent.
func DefaultTemplate(agent string) string { return agents[agent].Template }
