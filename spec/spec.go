// Package spec reads sandbox.yaml files: it parses them strictly, merges
// layers, interpolates variables, applies defaults and checks every rule the
// JSON Schema cannot express, reporting all problems at once with their
// positions. The result is a resolved Spec the planner can trust.
package spec

import (
	"net/netip"
	"time"
)

// Version is the only sandbox.yaml format version this sbx reads.
const Version = 1

// Agents lists the agents a sandbox can run, in the order docs show them.
var Agents = []string{"claude", "codex", "copilot", "cursor", "devin", "gemini", "kiro", "opencode", "droid", "docker-agent", "shell"}

// Drivers lists the accepted values of the driver field.
var Drivers = []string{"auto", "sbx", "docker-sandbox", "docker"}

// Spec is one resolved sandbox: every default applied, every path absolute.
type Spec struct {
	// Files are the layers the spec was read from, base first.
	Files []string `json:"files"`
	// Dir is the absolute directory of the base file.
	Dir string `json:"dir"`

	Name        string            `json:"name"`
	NameDerived bool              `json:"nameDerived,omitempty"`
	Agent       string            `json:"agent"`
	Driver      string            `json:"driver"`
	Template    Template          `json:"template"`
	Workspace   Workspace         `json:"workspace"`
	Mounts      []Mount           `json:"mounts,omitempty"`
	Env         map[string]string `json:"env,omitempty"`
	Secrets     map[string]Secret `json:"secrets,omitempty"`
	Resources   Resources         `json:"resources"`
	Ports       []Port            `json:"ports,omitempty"`
	Network     Network           `json:"network"`
	Docker      Docker            `json:"docker"`
	Loop        *Loop             `json:"loop,omitempty"`

	// Sensitive holds the field paths (such as "env.DATABASE_URL") whose
	// value came from the host environment. Output shows them as
	// "(sensitive)".
	Sensitive map[string]bool `json:"-"`
}

// Template is the image the sandbox starts from, or how to build it.
type Template struct {
	Image string `json:"image,omitempty"`
	Build *Build `json:"build,omitempty"`
}

// Build describes a template image built from a Dockerfile.
type Build struct {
	Context    string            `json:"context"`    // absolute
	Dockerfile string            `json:"dockerfile"` // relative to Context
	Args       map[string]string `json:"args,omitempty"`
	Target     string            `json:"target,omitempty"`
}

// Workspace is the host directory the agent works in.
type Workspace struct {
	Path     string `json:"path"` // absolute
	ReadOnly bool   `json:"readOnly,omitempty"`
}

// Mount is an extra host path visible in the sandbox.
type Mount struct {
	Source   string `json:"source"` // absolute host path
	Target   string `json:"target"`
	ReadOnly bool   `json:"readOnly,omitempty"`
}

// Secret says where a secret's value comes from on the host. The value is
// read only when needed and never stored.
type Secret struct {
	Env     string   `json:"env,omitempty"`
	Command []string `json:"command,omitempty"`
}

// Resources are the sandbox's limits; zero means the backend's default.
type Resources struct {
	CPUs   float64 `json:"cpus,omitempty"`
	Memory int64   `json:"memory,omitempty"` // bytes
}

// Port publishes a sandbox port on the host, as docker run -p does.
type Port struct {
	HostIP        string `json:"hostIP,omitempty"`
	HostPort      int    `json:"hostPort,omitempty"` // 0: any free port
	ContainerPort int    `json:"containerPort"`
	Protocol      string `json:"protocol"` // tcp or udp
}

// Network is the sandbox's egress policy.
type Network struct {
	Policy     string         `json:"policy"` // deny or allow
	Allow      []string       `json:"allow,omitempty"`
	Deny       []string       `json:"deny,omitempty"`
	Presets    []string       `json:"presets,omitempty"`
	AgentHosts bool           `json:"agentHosts"`
	BlockCIDRs []netip.Prefix `json:"blockCIDRs"`
}

// Docker holds options only the docker driver reads.
type Docker struct {
	Runtime string `json:"runtime,omitempty"`
}

// Loop configures `sbx loop`.
type Loop struct {
	Prompt           string        `json:"prompt"` // absolute
	MaxIterations    int           `json:"maxIterations"`
	Completion       Completion    `json:"completion"`
	IterationTimeout time.Duration `json:"iterationTimeout"`
	MaxDuration      time.Duration `json:"maxDuration,omitempty"`
	Breaker          Breaker       `json:"breaker"`
	Command          []string      `json:"command,omitempty"`
	Ephemeral        bool          `json:"ephemeral,omitempty"`
}

// Completion says when the loop is done: the promise printed and/or every
// verify command passing.
type Completion struct {
	Promise string   `json:"promise,omitempty"`
	Verify  []string `json:"verify,omitempty"`
}

// Breaker stops a loop that is going nowhere. Zero turns a check off.
type Breaker struct {
	NoProgress int `json:"noProgress"`
	SameError  int `json:"sameError"`
}

// Defaults applied when the file does not say.
const (
	DefaultIterationTimeout = 30 * time.Minute
	DefaultNoProgress       = 3
	DefaultSameError        = 5
)

// DefaultBlockCIDRs are the ranges the egress proxy never dials: loopback,
// private, link-local and unique-local addresses, so a sandbox cannot reach
// the host's or the LAN's services by address.
var DefaultBlockCIDRs = []string{
	"10.0.0.0/8", "127.0.0.0/8", "169.254.0.0/16", "172.16.0.0/12", "192.168.0.0/16",
	"::1/128", "fc00::/7", "fe80::/10",
}

// DefaultTemplate returns the Docker Sandboxes template image of an agent
// (docker-sandboxes-cli.md §5.2).
func DefaultTemplate(agent string) string {
	variant := map[string]string{"claude": "claude-code", "cursor": "cursor-agent"}[agent]
	if variant == "" {
		variant = agent
	}
	return "docker/sandbox-templates:" + variant
}

// AllowRules returns the hosts the sandbox may reach, each with where the
// rule came from ("network.allow", "preset npm", "agent claude"), sorted by
// host and de-duplicated (the first source wins).
func (n Network) AllowRules(agent string) []Rule {
	var rules []Rule
	seen := map[string]bool{}
	add := func(host, source string) {
		if !seen[host] {
			seen[host] = true
			rules = append(rules, Rule{Host: host, Source: source})
		}
	}
	for _, h := range n.Allow {
		add(h, "network.allow")
	}
	if n.AgentHosts {
		if p := AgentPreset(agent); p != "" {
			for _, h := range presets[p] {
				add(h, "agent "+agent)
			}
		}
	}
	for _, p := range n.Presets {
		for _, h := range presets[p] {
			add(h, "preset "+p)
		}
	}
	sortRules(rules)
	return rules
}

// Rule is one host of an allow-list and where it came from.
type Rule struct {
	Host   string `json:"host"`
	Source string `json:"source"`
}
