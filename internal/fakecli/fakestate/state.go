// Package fakestate is the persisted world of the fake Docker Sandboxes CLIs
// (fakesbx and fakedocker): the sandboxes they know, their network rules,
// secret fingerprints, the network log and the per-verb call counters used
// for failure injection. It lives in one JSON file guarded by a file lock so
// that concurrent invocations of the fakes are safe.
package fakestate

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sort"
	"time"
)

// SchemaVersion is the value of State.Schema written by this package.
const SchemaVersion = 1

// State is the whole JSON document at $FAKE_SBX_STATE / $FAKE_DOCKER_STATE.
type State struct {
	Schema    int        `json:"schema"`
	Sandboxes []*Sandbox `json:"sandboxes"`
	// Policy is the global network policy (G3 `sbx policy ...`). G2 keeps its
	// policy per sandbox in Sandbox.Network.
	Policy  Policy     `json:"policy"`
	Secrets []Secret   `json:"secrets"`
	Log     []LogEntry `json:"log"`
	// Saves records `docker sandbox save` calls (G2).
	Saves []Save `json:"saves,omitempty"`
	// Calls counts invocations per command path prefix ("policy",
	// "policy allow", "policy allow network"), for $..._FAIL=VERB:N.
	Calls map[string]int `json:"calls"`
	// Seq numbers sandboxes and ephemeral ports so IDs stay deterministic
	// and differ between a sandbox and its re-creation.
	Seq      int `json:"seq"`
	NextPort int `json:"next_port"`
}

// Sandbox is one sandbox (G3) or VM (G2; the fake models one sandbox per VM).
type Sandbox struct {
	Name       string      `json:"name"`
	ID         string      `json:"id"`
	Agent      string      `json:"agent"`
	Template   string      `json:"template"`
	Workspaces []Workspace `json:"workspaces"`
	// Status is "running" or "stopped".
	Status string `json:"status"`
	Ports  []Port `json:"ports"`
	// Network holds the sandbox-scoped rules (G3 `--sandbox`, origin
	// "sandbox:NAME") or the whole G2 proxy configuration.
	Network Network `json:"network"`
	// Env is what `sbx create/run -e/--env-file` baked into the sandbox.
	Env        map[string]string `json:"env"`
	CPUs       int               `json:"cpus,omitempty"`
	Memory     string            `json:"memory,omitempty"`
	Kits       []string          `json:"kits,omitempty"`
	Clone      bool              `json:"clone,omitempty"`
	Pull       string            `json:"pull,omitempty"`
	CreatedAt  time.Time         `json:"created_at"`
	StartedAt  time.Time         `json:"started_at"`
	LastUsedAt time.Time         `json:"last_used_at"`
	// Hidden sandboxes are not listed by ls but still hold their name, as
	// in docker/sbx-releases#109 ("sandbox already exists with this name"
	// while ls is empty). Set with the hidden fake-hide verb.
	Hidden bool `json:"hidden,omitempty"`
}

// Workspace is a host path mounted at the same path inside the sandbox.
type Workspace struct {
	Path     string `json:"path"`
	ReadOnly bool   `json:"read_only"`
}

// String gives the form `ls --json` uses: the path with a ":ro" suffix when
// read-only.
func (w Workspace) String() string {
	if w.ReadOnly {
		return w.Path + ":ro"
	}
	return w.Path
}

// Port is one published port.
type Port struct {
	HostIP      string `json:"host_ip"`
	HostPort    int    `json:"host_port"`
	SandboxPort int    `json:"sandbox_port"`
	Protocol    string `json:"protocol"`
}

// Network is a set of rules plus, for G2, the proxy's default policy and CIDR
// lists.
type Network struct {
	// Default is "allow" or "deny" (G2 `--policy`). Empty for G3 sandboxes,
	// whose default comes from the global Policy.
	Default     string   `json:"default,omitempty"`
	Rules       []Rule   `json:"rules"`
	BlockCIDRs  []string `json:"block_cidrs,omitempty"`
	BypassHosts []string `json:"bypass_hosts,omitempty"`
	BypassCIDRs []string `json:"bypass_cidrs,omitempty"`
}

// Rule is one allow or deny rule for a host pattern.
type Rule struct {
	ID string `json:"id"`
	// Policy is the name of the policy holding the rule ("local" for rules
	// added with `sbx policy allow|deny`, "balanced-dev" for the preset).
	Policy   string `json:"policy"`
	Decision string `json:"decision"` // "allow" or "deny"
	Resource string `json:"resource"`
	Protocol string `json:"protocol,omitempty"`
	Method   string `json:"method,omitempty"`
	Path     string `json:"path,omitempty"`
}

// Policy is the global (origin "local") network policy of G3.
type Policy struct {
	// Initialized is set by `sbx policy init PRESET`; creating a sandbox
	// needs it.
	Initialized bool   `json:"initialized"`
	Preset      string `json:"preset,omitempty"` // allow-all | balanced | deny-all
	Default     string `json:"default,omitempty"`
	Rules       []Rule `json:"rules"`
}

// Secret is a stored secret: only a SHA-256 of its value is kept.
type Secret struct {
	// Scope is "" for global or the sandbox name.
	Scope string `json:"scope"`
	// Type is "service", "custom" or "registry".
	Type string `json:"type"`
	// Name is the service ("anthropic"), the custom secret's env var, or the
	// registry host.
	Name   string `json:"name"`
	Host   string `json:"host,omitempty"`
	SHA256 string `json:"sha256"`
}

// LogEntry is one network-log record (G3 `sbx policy log`, G2 `docker
// sandbox network log`).
type LogEntry struct {
	Time    time.Time `json:"time"`
	Sandbox string    `json:"sandbox"`
	Type    string    `json:"type"`   // G3 "network"; G2 "request"
	Action  string    `json:"action"` // G3 allowed|blocked; G2 allowed|denied
	Host    string    `json:"host,omitempty"`
	Method  string    `json:"method,omitempty"`
	URL     string    `json:"url,omitempty"`
	Proxy   string    `json:"proxy,omitempty"`
	Rule    string    `json:"rule,omitempty"`
	Reason  string    `json:"reason,omitempty"`
	Count   int       `json:"count,omitempty"`
}

// Save records one `docker sandbox save SANDBOX TAG [-o FILE]`.
type Save struct {
	Sandbox string `json:"sandbox"`
	Tag     string `json:"tag"`
	Output  string `json:"output,omitempty"`
}

// New returns an empty state.
func New() *State {
	return &State{Schema: SchemaVersion, Sandboxes: []*Sandbox{}, Secrets: []Secret{}, Log: []LogEntry{},
		Policy: Policy{Rules: []Rule{}}, Calls: map[string]int{}, NextPort: 49152}
}

// normalize fills nil slices and maps so that the JSON always has the same
// shape, and sorts sandboxes by name.
func (s *State) normalize() {
	if s.Sandboxes == nil {
		s.Sandboxes = []*Sandbox{}
	}
	if s.Secrets == nil {
		s.Secrets = []Secret{}
	}
	if s.Log == nil {
		s.Log = []LogEntry{}
	}
	if s.Policy.Rules == nil {
		s.Policy.Rules = []Rule{}
	}
	if s.Calls == nil {
		s.Calls = map[string]int{}
	}
	if s.NextPort == 0 {
		s.NextPort = 49152
	}
	for _, sb := range s.Sandboxes {
		if sb.Workspaces == nil {
			sb.Workspaces = []Workspace{}
		}
		if sb.Ports == nil {
			sb.Ports = []Port{}
		}
		if sb.Network.Rules == nil {
			sb.Network.Rules = []Rule{}
		}
		if sb.Env == nil {
			sb.Env = map[string]string{}
		}
	}
	sort.Slice(s.Sandboxes, func(i, j int) bool { return s.Sandboxes[i].Name < s.Sandboxes[j].Name })
}

// Find returns the sandbox called name, hidden or not, or nil.
func (s *State) Find(name string) *Sandbox {
	for _, sb := range s.Sandboxes {
		if sb.Name == name {
			return sb
		}
	}
	return nil
}

// Add appends sb after giving it the next sequence number; it returns that
// number, which callers feed to UUID or HexID.
func (s *State) Add(sb *Sandbox) int {
	s.Seq++
	s.Sandboxes = append(s.Sandboxes, sb)
	s.normalize()
	return s.Seq
}

// Remove deletes the sandbox called name and the secrets scoped to it
// (sbx 0.42.0: "deletes secrets scoped to each removed sandbox").
func (s *State) Remove(name string) {
	out := s.Sandboxes[:0]
	for _, sb := range s.Sandboxes {
		if sb.Name != name {
			out = append(out, sb)
		}
	}
	s.Sandboxes = out
	secrets := s.Secrets[:0]
	for _, sec := range s.Secrets {
		if sec.Scope != name {
			secrets = append(secrets, sec)
		}
	}
	s.Secrets = secrets
}

// AllocPort returns the next ephemeral host port.
func (s *State) AllocPort() int {
	p := s.NextPort
	s.NextPort++
	return p
}

// UUID derives a UUID-shaped, deterministic identifier from name and seq.
func UUID(name string, seq int) string {
	h := sha256.Sum256([]byte(fmt.Sprintf("sandbox\x00%s\x00%d", name, seq)))
	h[6] = h[6]&0x0f | 0x40
	h[8] = h[8]&0x3f | 0x80
	x := hex.EncodeToString(h[:16])
	return x[0:8] + "-" + x[8:12] + "-" + x[12:16] + "-" + x[16:20] + "-" + x[20:32]
}

// HexID derives a 64-hex-digit deterministic identifier (Docker-style IDs).
func HexID(name string, seq int) string {
	h := sha256.Sum256([]byte(fmt.Sprintf("vm\x00%s\x00%d", name, seq)))
	return hex.EncodeToString(h[:])
}

// RuleID derives a stable rule ID from what makes the rule unique.
func RuleID(origin string, r Rule) string {
	h := sha256.Sum256([]byte(origin + "\x00" + r.Decision + "\x00" + r.Resource + "\x00" + r.Protocol + "\x00" + r.Method + "\x00" + r.Path))
	return "rule-" + hex.EncodeToString(h[:6])
}

// Fingerprint is the SHA-256 (hex) that stands in for a secret value.
func Fingerprint(value string) string {
	h := sha256.Sum256([]byte(value))
	return hex.EncodeToString(h[:])
}
