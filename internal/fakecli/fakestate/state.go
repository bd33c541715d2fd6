// Package fakestate is the persisted world of the fake Docker Sandboxes CLIs
// (fakesbx and fakedocker): the sandboxes they know, their network rules,
// secret fingerprints, template images, the network log and the per-verb
// call counters used for failure injection. It lives in one JSON file
// guarded by a file lock so that concurrent invocations of the fakes are
// safe.
package fakestate

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sort"
	"time"
)

// SchemaVersion is the value of State.Schema written by this package.
const SchemaVersion = 2

// State is the whole JSON document at $FAKE_SBX_STATE / $FAKE_DOCKER_STATE.
type State struct {
	Schema    int        `json:"schema"`
	Sandboxes []*Sandbox `json:"sandboxes"`
	// Policy is the global network policy (sbx `policy ...`). The docker
	// sandbox plugin keeps its policy per sandbox in Sandbox.Network.
	Policy  Policy     `json:"policy"`
	Secrets []Secret   `json:"secrets"`
	Log     []LogEntry `json:"log"`
	// Templates is sbx's own image store (`sbx template ...`).
	Templates []Template `json:"templates,omitempty"`
	// Calls counts invocations per command path prefix ("policy",
	// "policy allow", "policy allow network"), for $..._FAIL=VERB:N.
	Calls map[string]int `json:"calls"`
	// Seq numbers sandboxes, rules and ephemeral ports so IDs stay
	// deterministic and differ between a sandbox and its re-creation.
	Seq      int `json:"seq"`
	NextPort int `json:"next_port"`
}

// Sandbox is one sandbox (sbx) or VM (the plugin; the fake models one
// sandbox per VM).
type Sandbox struct {
	Name       string      `json:"name"`
	ID         string      `json:"id"`
	Agent      string      `json:"agent"`
	Template   string      `json:"template"`
	Workspaces []Workspace `json:"workspaces"`
	// Status is "running" or "stopped".
	Status string `json:"status"`
	// Detached sandboxes (`sbx run -d`) keep running without a session;
	// the others stop after their last session when auto-stop is on.
	Detached bool   `json:"detached,omitempty"`
	Ports    []Port `json:"ports"`
	// Network holds the sandbox-scoped rules (sbx `--sandbox`) or the whole
	// plugin proxy configuration.
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

// Port is one published host binding.
type Port struct {
	HostIP      string `json:"host_ip"`
	HostPort    int    `json:"host_port"`
	SandboxPort int    `json:"sandbox_port"`
	Protocol    string `json:"protocol"`
}

// Network is a set of rules plus, for the plugin, the proxy's default
// policy and CIDR lists.
type Network struct {
	// Default is "allow" or "deny" (the plugin's `--policy`). Empty for sbx
	// sandboxes, whose default comes from the global Policy.
	Default     string   `json:"default,omitempty"`
	Rules       []Rule   `json:"rules"`
	BlockCIDRs  []string `json:"block_cidrs,omitempty"`
	BypassHosts []string `json:"bypass_hosts,omitempty"`
	BypassCIDRs []string `json:"bypass_cidrs,omitempty"`
}

// Rule is one allow or deny rule. An sbx rule may hold several resources
// (one `policy allow network a,b` call makes one rule).
type Rule struct {
	ID string `json:"id"`
	// Name is "kit:SANDBOX" for a kit's rule, the group name of a preset
	// rule, else the ID.
	Name      string   `json:"name,omitempty"`
	Decision  string   `json:"decision"` // "allow" or "deny"
	Resources []string `json:"resources"`
	// Type is the resource type: "network" (also when empty),
	// "filesystem:read", "filesystem:write".
	Type string `json:"type,omitempty"`
	// Via is how the rule was made (sbx provenance.created_via): "added",
	// "default" (a preset) or "provisioned" (a kit).
	Via string `json:"via,omitempty"`
	// Fixed rules can be neither edited nor removed (a kit's).
	Fixed    bool   `json:"fixed,omitempty"`
	Protocol string `json:"protocol,omitempty"`
	// Fallback marks the preset's "no rule matched" answer
	// (default-deny-all), which no rule lookup matches.
	Fallback bool `json:"fallback,omitempty"`
}

// ResourceType is Type with the default filled in.
func (r Rule) ResourceType() string {
	if r.Type == "" {
		return "network"
	}
	return r.Type
}

// Policy is sbx's global network policy.
type Policy struct {
	// Initialized is set by `sbx policy init PRESET`; creating a sandbox
	// needs it.
	Initialized bool   `json:"initialized"`
	Preset      string `json:"preset,omitempty"` // allow-all | balanced | deny-all
	Rules       []Rule `json:"rules"`
}

// Secret is a stored secret: only a SHA-256 of its value is kept.
type Secret struct {
	// Scope is "" for global, "*" for every sandbox (registry), or the
	// sandbox name.
	Scope string `json:"scope"`
	// Type is "service", "custom" or "registry".
	Type string `json:"type"`
	// Name is the service ("anthropic"), the custom secret's env var, or the
	// registry host.
	Name string `json:"name"`
	// Host is a registry secret's user name.
	Host string `json:"host,omitempty"`
	// Hosts and Placeholder are a custom secret's targets and the
	// placeholder the sandbox sees.
	Hosts       []string `json:"hosts,omitempty"`
	Placeholder string   `json:"placeholder,omitempty"`
	// SHA256 fingerprints the value (or, for a dynamic secret, what its
	// command printed when it was registered).
	SHA256 string `json:"sha256"`
}

// LogEntry is one network-log record (sbx `policy log`, plugin `network
// log`).
type LogEntry struct {
	Time    time.Time `json:"time"`
	Sandbox string    `json:"sandbox"`
	Type    string    `json:"type"`   // sbx "network"; plugin "request"
	Action  string    `json:"action"` // sbx allowed|blocked; plugin allowed|denied
	Host    string    `json:"host,omitempty"`
	Method  string    `json:"method,omitempty"`
	URL     string    `json:"url,omitempty"`
	Proxy   string    `json:"proxy,omitempty"`
	Rule    string    `json:"rule,omitempty"`
	Reason  string    `json:"reason,omitempty"`
	Count   int       `json:"count,omitempty"`
}

// Template is one image in sbx's own store.
type Template struct {
	Repository string    `json:"repository"`
	Tag        string    `json:"tag"`
	ID         string    `json:"id"`
	Flavor     string    `json:"flavor,omitempty"`
	CreatedAt  time.Time `json:"created_at"`
	Size       int64     `json:"size"`
}

// New returns an empty state.
func New() *State {
	s := &State{Schema: SchemaVersion}
	s.normalize()
	return s
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

// NewID returns a fresh deterministic UUID for an object of the given kind
// ("rule", "policy").
func (s *State) NewID(kind string) string {
	s.Seq++
	return UUID(kind, s.Seq)
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

// Fingerprint is the SHA-256 (hex) that stands in for a secret value.
func Fingerprint(value string) string {
	h := sha256.Sum256([]byte(value))
	return hex.EncodeToString(h[:])
}
