package agenttest

import "fmt"

// ClaudeVersion and CodexVersion are the pinned agents' versions, as
// their --version prints them. With SBX_AGENT_RELEASES=latest a cache
// holds other versions: its Pins' Release fields say which.
const (
	ClaudeVersion = "2.1.332"
	CodexVersion  = "0.171.0"
)

// Pin is one npm tarball. Integrity is the registry's dist.integrity for
// it, read once from https://registry.npmjs.org/NAME/VERSION (the same
// value npm writes into package-lock.json): "sha512-" and the base64 of
// the tarball's SHA-512.
type Pin struct {
	Name string
	// Version is the platform package's version; Release is the agent's,
	// as its --version prints it (for Codex the platform package is a
	// version of @openai/codex itself: Release plus "-linux-x64").
	Version   string
	Release   string
	Tarball   string
	Integrity string
	// Dir names the package's directory under the cache key.
	Dir string
	// Want is a path inside the unpacked package that must exist; a
	// tarball without it is not the package.
	Want string
}

// Pins are the two packages a cache holds.
type Pins struct {
	Claude Pin
	Codex  Pin
}

func (p Pins) all() []Pin { return []Pin{p.Claude, p.Codex} }

// String names the agents' releases, for a log line.
func (p Pins) String() string {
	return fmt.Sprintf("claude-code %s, codex %s", p.Claude.Release, p.Codex.Release)
}

// The agents' npm packages: each wrapper, and the name under which its
// optionalDependencies list the linux-x64 build.
const (
	claudePackage  = "@anthropic-ai/claude-code"
	claudePlatform = "@anthropic-ai/claude-code-linux-x64"
	codexPackage   = "@openai/codex"
	codexPlatform  = "@openai/codex-linux-x64"
	// platformSuffix ends the version of @openai/codex that holds the
	// linux-x64 build.
	platformSuffix = "-linux-x64"
)

// codexTriple is the Codex build for Linux on x86-64, the directory under
// vendor/ that @openai/codex's bin/codex.js runs from on that platform.
const codexTriple = "x86_64-unknown-linux-musl"

// defaultPins are the agents' native builds for Linux on x86-64.
//
// Claude Code's wrapper package @anthropic-ai/claude-code@2.1.332 lists
// this platform package in its optionalDependencies; its postinstall
// (install.cjs) places the package's claude binary at bin/claude.exe.
// Codex's wrapper @openai/codex@0.171.0 lists "@openai/codex-linux-x64":
// "npm:@openai/codex@0.171.0-linux-x64", a version of the same package
// name that holds only vendor/.
func defaultPins() Pins {
	return Pins{
		Claude: Pin{
			Name:      claudePlatform,
			Version:   ClaudeVersion,
			Release:   ClaudeVersion,
			Tarball:   "https://registry.npmjs.org/@anthropic-ai/claude-code-linux-x64/-/claude-code-linux-x64-2.1.332.tgz",
			Integrity: "sha512-f4JWhzwYutJIHScC7/dYOPX6s28tt7ZADhsOi8zwOHq5fFPEuUeChh2NMfinSg0GrUckYxaeebC4h0DqiKzLcw==",
			Dir:       "claude",
			Want:      "claude",
		},
		Codex: Pin{
			Name:      codexPackage,
			Version:   CodexVersion + platformSuffix,
			Release:   CodexVersion,
			Tarball:   "https://registry.npmjs.org/@openai/codex/-/codex-0.171.0-linux-x64.tgz",
			Integrity: "sha512-l66NZkQgdk2C3pbcfULDz42yEUB581MVA6I+Y43Wp4OIqEy73HCdmZ0GTjeAHY2ycuH4N00d9VsLrwT1jxshTw==",
			Dir:       "codex",
			Want:      "vendor/" + codexTriple + "/bin/codex",
		},
	}
}
