package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/pflag"

	"github.com/sbxhq/sbx/internal/atomicfile"
	"github.com/sbxhq/sbx/schema"
	"github.com/sbxhq/sbx/session"
	"github.com/sbxhq/sbx/spec"
)

// schemaURL is where editors fetch the schema named in the modeline sbx init
// writes; `sbx schema > sandbox.schema.json` gives an offline copy.
const schemaURL = "https://raw.githubusercontent.com/sbxhq/sbx/main/schema/sandbox.schema.json"

func initVerb() *verb {
	return &verb{
		name:    "init",
		summary: "write a commented sandbox.yaml for an agent",
		usage:   "[--agent NAME] [--force] [-f FILE]",
		help: `Writes a sandbox.yaml with deny-by-default egress (the agent's own hosts
allowed), the agent's credentials as secrets read from your environment, and
a loop section, plus a starter PROMPT.md when there is none. It refuses to
overwrite an existing file without --force.`,
		setup: func(fs *pflag.FlagSet) runFunc {
			agent := fs.String("agent", "claude", "agent to run: "+strings.Join(spec.Agents, ", "))
			force := fs.Bool("force", false, "overwrite an existing file")
			file := fs.StringP("file", "f", session.DefaultFile, "file to write")
			return func(ctx context.Context, a *app, args []string) int {
				if len(args) > 0 {
					return a.errorf("init takes no arguments (got %q); name the file with -f", args[0])
				}
				return a.init(*agent, *file, *force)
			}
		},
	}
}

func (a *app) init(agent, file string, force bool) int {
	if !validAgent(agent) {
		msg := fmt.Sprintf("unknown agent %q", agent)
		if s := schema.Suggest(agent, spec.Agents); s != "" {
			msg += fmt.Sprintf(" (did you mean %q?)", s)
		}
		return a.errorf("%s; agents: %s", msg, strings.Join(spec.Agents, ", "))
	}
	if err := writeInit(file, []byte(initFile(agent)), force); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return a.errorf("%s already exists; use --force to overwrite it", file)
		}
		return a.errorf("%v", err)
	}
	fmt.Fprintf(a.stdout, "wrote %s (agent %s)\n", file, agent)
	prompt := filepath.Join(filepath.Dir(file), "PROMPT.md")
	if p, err := os.OpenFile(prompt, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644); err == nil {
		_, err = p.WriteString(starterPrompt)
		if cerr := p.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return a.errorf("%v", err)
		}
		fmt.Fprintf(a.stdout, "wrote %s (the loop's prompt; edit it before 'sbx loop')\n", prompt)
	} else if !errors.Is(err, fs.ErrExist) {
		return a.errorf("%v", err)
	}
	if ag := spec.AgentOf(agent); ag.Key != "" {
		fmt.Fprintf(a.stdout, "hint: the agent signs in inside the sandbox ('sbx shell', then %s); to pass an API key instead, uncomment 'secrets:' in %s and export %s\n",
			ag.Program(agent), file, ag.HostKey)
	}
	fmt.Fprintln(a.stdout, "hint: add sandbox.local.yaml to .gitignore; it holds personal overrides merged over sandbox.yaml")
	return exitOK
}

// writeInit creates file, or with force replaces whatever is there (a
// link too, never what it points at).
func writeInit(file string, data []byte, force bool) error {
	if force {
		return atomicfile.ReplaceBytes(file, data, 0o644)
	}
	f, err := os.OpenFile(file, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// keyHosts is the hosts field of the agent's key secret, where sbx knows
// the hosts the agent sends its key to (spec.Agent.KeyHosts).
func keyHosts(ag spec.Agent) string {
	if len(ag.KeyHosts) == 0 {
		return ""
	}
	return ", hosts: [" + strings.Join(ag.KeyHosts, ", ") + "]"
}

func validAgent(agent string) bool {
	for _, x := range spec.Agents {
		if x == agent {
			return true
		}
	}
	return false
}

func initFile(agent string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# yaml-language-server: $schema=%s\n", schemaURL)
	fmt.Fprintf(&b, `# sandbox.yaml: the sandbox your coding agent runs in, declared once for everyone.
#   sbx validate   check this file (also a pre-commit hook)
#   sbx plan       show what would change in the live sandbox
#   sbx apply      make the live sandbox match this file
#   sbx loop       run the agent loop below inside the sandbox
# Personal overrides go in sandbox.local.yaml (git-ignored), merged over this file.
version: 1

# The agent to run: %s.
agent: %s

# The sandbox's name defaults to <agent>-<workspace directory name>.
# name: my-sandbox

# The image the sandbox starts from; defaults to the agent's Docker template.
# template: %s

# The host directory the agent works in, relative to this file.
workspace: .

# Environment baked into the sandbox (changing it recreates the sandbox).
# Compose-style variables work: ${VAR}, ${VAR:-default}, ${VAR:?message}.
env:
  TZ: ${TZ:-UTC}
`, strings.Join(spec.Agents, ", "), agent, spec.DefaultTemplate(agent))
	if ag := spec.AgentOf(agent); ag.Key != "" {
		fmt.Fprintf(&b, `
# Secrets are read from your environment when sbx runs something in the
# sandbox (shell, loop); they are never written into the sandbox's
# configuration, plans, logs or sbx's state. Plan and apply need no values.
# A secret that names its hosts never enters the sandbox: the agent gets a
# placeholder, and sbx's egress proxy puts the value in requests to those
# hosts only. Without hosts, the agent can read the value.
# Sign in inside the sandbox (sbx shell, then %s), or to pass an API key
# instead, uncomment these lines and export %s in your shell
# (%s reads its key from %s):
# secrets:
#   %s: {env: %s%s}
`, ag.Program(agent), ag.HostKey, agent, ag.Key, ag.Key, ag.HostKey, keyHosts(ag))
	}
	b.WriteString(`
# Egress is denied by default. The agent's own API and sign-in hosts are
# allowed implicitly (network.agentHosts); add what your project needs.
network:
  policy: deny
  presets: [github]
  allow: []
  #  - registry.npmjs.org
  #  - "*.example.com"
  # A port on your machine's loopback (a model gateway, an MCP server) the
  # agent reaches as host.docker.internal:PORT, and no other (docker driver):
  # hostPorts: [11434]

# A dev server's port, opened from your browser on the host's loopback:
# ports: ["3000"]

# Containers beside the sandbox that the agent's tests reach by name
# (docker driver: no network of their own, no way out unless egress: true;
# kubernetes: containers of the sandbox's pod, which need egress: true).
# services:
#   db:
#     image: postgres:16
#     env: {POSTGRES_PASSWORD: test}
#     ports: [5432]
#     ready: {command: [pg_isready, -U, postgres]}
#   # A Docker daemon of the agent's own (DOCKER_HOST=tcp://docker:2375),
#   # only under gVisor (docker: {runtime: runsc}); pulls need egress.
#   docker: {image: "docker:28-dind", dockerd: true, ports: [2375], egress: true}
`)
	loopCmd := ""
	if agent == "shell" {
		loopCmd = "  command: [sh, -c, \"echo 'replace with your agent command'; exit 1\"]\n"
	}
	fmt.Fprintf(&b, `
# The unattended agent loop run by 'sbx loop': the prompt is fed to the agent
# on every iteration until it prints <promise>COMPLETE</promise> and every
# verify command passes, or a bound stops it.
loop:
  prompt: PROMPT.md
  maxIterations: 20
  completion:
    promise: COMPLETE
    # verify: ["go test ./..."]
  iterationTimeout: 30m
  maxDuration: 4h
  breaker:
    noProgress: 3   # iterations that change neither files nor HEAD
    sameError: 5    # identical failures in a row
%s`, loopCmd)
	return b.String()
}

const starterPrompt = `# Task

Describe the task for the agent here: what to build or fix, where, and how
to tell it is done.

Work in small steps. Commit after each step that passes the tests.

When everything is done and the tests pass, print exactly:

<promise>COMPLETE</promise>
`
