// Package spec reads sandbox.yaml files: it parses them strictly, merges
// layers, interpolates variables, applies defaults and checks every rule the
// JSON Schema cannot express, reporting all problems at once with their
// positions. The result is a resolved Spec the planner can trust.
//
// It parses YAML with go-yaml (go.yaml.in/yaml/v3) alone, into its node
// tree, so that every message can name a line and column; the file's size
// is bounded before go-yaml sees it, since sandbox.local.yaml is written
// by the agent. Patterns are matched with the regexp package.
package spec

import (
	"fmt"
	"maps"
	"net/netip"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Version is the only sandbox.yaml format version this sbx reads.
const Version = 1

// Spec is one resolved sandbox: every default applied, every path absolute.
type Spec struct {
	// Files are the layers the spec was read from, base first.
	Files []string `json:"files"`
	// Dir is the absolute directory of the base file.
	Dir string `json:"dir"`

	Name        string    `json:"name"`
	NameDerived bool      `json:"nameDerived,omitempty"`
	Agent       string    `json:"agent"`
	Driver      string    `json:"driver"`
	Template    Template  `json:"template"`
	Workspace   Workspace `json:"workspace"`
	// User is who the sandbox's processes run as ("" the template's own
	// USER); "host" in the file is resolved to the uid:gid running sbx.
	User      string            `json:"user,omitempty"`
	Mounts    []Mount           `json:"mounts,omitempty"`
	Env       map[string]string `json:"env,omitempty"`
	Secrets   map[string]Secret `json:"secrets,omitempty"`
	Resources Resources         `json:"resources"`
	Ports     []Port            `json:"ports,omitempty"`
	// Services are containers beside the sandbox (a database, say), by
	// name.
	Services map[string]Service `json:"services,omitempty"`
	Network  Network            `json:"network"`
	Docker   Docker             `json:"docker"`
	// Kubernetes holds the kubernetes driver's options; nil when the file
	// has no kubernetes block (K8s gives them with defaults).
	Kubernetes *Kubernetes `json:"kubernetes,omitempty"`
	Loop       *Loop       `json:"loop,omitempty"`
	// Protect makes the sandbox's own declaration (every layer,
	// sandbox.local.yaml, the prompt, the build context) and .git/config
	// and .git/hooks read-only inside the sandbox, where the driver can
	// (workspace.protect, default true).
	Protect bool `json:"protect"`
	// HostVars maps a field path to the host environment variables its
	// value was interpolated from (whether or not they were set): what the
	// field can carry from the host into the sandbox.
	HostVars map[string][]string `json:"hostVars,omitempty"`
	// Declarations are the files the spec was read from, with the SHA-256
	// of their content, base first.
	Declarations []Declaration `json:"declarations,omitempty"`

	// Sensitive holds the field paths (such as "env.DATABASE_URL") whose
	// value came from the host environment. Output shows them as
	// "(sensitive)".
	Sensitive map[string]bool `json:"-"`
	// HostValues are the values the files took from the host environment
	// (see Redact): output that may quote a field shows "(from $VAR)"
	// instead. Never recorded.
	HostValues []HostValue `json:"-"`
	// Origins says, for every field path of the merged files, which file
	// and position wrote it (see OriginOf).
	Origins map[string]Origin `json:"-"`
}

// Declaration is one file a spec was read from.
type Declaration struct {
	Path   string `json:"path"` // absolute
	SHA256 string `json:"sha256"`
}

// Origin is where a value was written: a file and a position in it.
type Origin struct {
	File string `json:"file"` // as the user named it
	Path string `json:"path"` // absolute
	Line int    `json:"line,omitempty"`
	Col  int    `json:"col,omitempty"`
	// Value is the scalar as written (after interpolation), "" for a
	// mapping or a list.
	Value string `json:"-"`
}

// String is FILE:LINE:COL, as validation messages name positions.
func (o Origin) String() string {
	switch {
	case o.File == "":
		return ""
	case o.Line == 0:
		return o.File
	case o.Col == 0:
		return fmt.Sprintf("%s:%d", o.File, o.Line)
	}
	return fmt.Sprintf("%s:%d:%d", o.File, o.Line, o.Col)
}

// OriginOf returns where the value at a field path ("mounts[1]",
// "network.allow", "env.TOKEN") was written: the position of the value
// itself, or of the nearest enclosing value that a file wrote (a removed
// key names the file that replaced its parent). ok is false when no file
// wrote any part of it (a default).
func (s *Spec) OriginOf(path string) (Origin, bool) {
	for p := path; ; {
		if o, ok := s.Origins[p]; ok {
			return o, true
		}
		i := strings.LastIndexAny(p, ".[")
		if i <= 0 {
			return Origin{}, false
		}
		p = p[:i]
	}
}

// OriginOfItem returns where the element of the list at path whose value
// satisfies match was written, else where the list was.
func (s *Spec) OriginOfItem(path string, match func(string) bool) (Origin, bool) {
	var items []string
	for p := range s.Origins {
		if rest, ok := strings.CutPrefix(p, path+"["); ok && strings.HasSuffix(rest, "]") && !strings.ContainsAny(rest, ".[") {
			items = append(items, p)
		}
	}
	sort.Strings(items)
	for _, p := range items {
		if o := s.Origins[p]; match(o.Value) {
			return o, true
		}
	}
	return s.OriginOf(path)
}

// Within reports whether path is dir or inside it.
func Within(path, dir string) bool {
	if dir == "" {
		return false
	}
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) && !filepath.IsAbs(rel)
}

// Writable reports whether the sandbox can write the host file at path:
// it lies in a read-write workspace or under a read-write mount's source.
func (s *Spec) Writable(path string) bool {
	if !s.Workspace.ReadOnly && Within(path, s.Workspace.Path) {
		return true
	}
	for _, m := range s.Mounts {
		if !m.ReadOnly && Within(path, m.Source) {
			return true
		}
	}
	return false
}

// Template is the image the sandbox starts from, how to build it, or the
// checkpoint to restore.
type Template struct {
	Image string `json:"image,omitempty"`
	Build *Build `json:"build,omitempty"`
	// Checkpoint names a checkpoint (sbx checkpoint) the sandbox is made
	// from; Image and Build are empty then.
	Checkpoint string `json:"checkpoint,omitempty"`
}

// Build describes a template image built from a Dockerfile.
type Build struct {
	Context    string            `json:"context"`    // absolute
	Dockerfile string            `json:"dockerfile"` // relative to Context
	Args       map[string]string `json:"args,omitempty"`
	Target     string            `json:"target,omitempty"`
	// Network gives the build the daemon's network; by default a build has
	// none (it gets no more than the sandbox would).
	Network bool `json:"network,omitempty"`
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
	// File is a host file of credentials (JSON, such as Codex's
	// ~/.codex/auth.json), resolved; Path is where the sandbox gets it,
	// each credential in it a placeholder. It always has Hosts.
	File string `json:"file,omitempty"`
	Path string `json:"path,omitempty"`
	// Hosts, when set, are the only hosts the value goes to: the sandbox
	// holds a placeholder, and the egress proxy puts the value in place
	// of it in requests to these hosts.
	Hosts []string `json:"hosts,omitempty"`
}

// Resources are the sandbox's limits; zero means the backend's default.
type Resources struct {
	CPUs   float64 `json:"cpus,omitempty"`
	Memory int64   `json:"memory,omitempty"` // bytes
	Pids   int     `json:"pids,omitempty"`   // processes and threads
}

// Service is a container beside the sandbox, on no network of its own,
// that the agent reaches as NAME:PORT for each of its ports, through the
// egress proxy (and nothing else does).
type Service struct {
	Image string            `json:"image"`
	Env   map[string]string `json:"env,omitempty"`
	// Command replaces the image's CMD (its ENTRYPOINT stays).
	Command []string `json:"command,omitempty"`
	Ports   []int    `json:"ports"`
	Ready   *Ready   `json:"ready,omitempty"`
	// Egress gives the service the sandbox's way out: its proxy, on the
	// service's own loopback, under the sandbox's policy.
	Egress bool `json:"egress,omitempty"`
	// Dockerd makes the service a Docker daemon of the agent's own: sbx
	// runs the image's dockerd, serving its API on DockerdPort of the
	// service's loopback, and points the sandbox's DOCKER_HOST at it.
	Dockerd bool `json:"dockerd,omitempty"`
}

// DockerdPort is the port a dockerd service serves Docker's API on, as
// NAME:2375 in the sandbox (Docker's port for the unencrypted API).
const DockerdPort = 2375

// DockerdArgs are what a dockerd service runs: the API on its loopback
// alone, unencrypted (nothing but the sandbox's proxy reaches that
// loopback), and no iptables or bridge, which a daemon under gVisor
// cannot set up (gVisor's "Docker in gVisor" guide); its containers run
// with --network host, in the service's own network namespace.
var DockerdArgs = []string{"dockerd", dockerdHost, "--tls=false", "--iptables=false", "--ip6tables=false", "--bridge=none"}

// DockerdReady is a dockerd service's readiness check unless the file
// gives one: the daemon answers its API.
var DockerdReady = []string{"docker", dockerdHost, "version"}

var dockerdHost = "--host=tcp://127.0.0.1:" + strconv.Itoa(DockerdPort)

// Dockerd is the name of the sandbox's dockerd service, "" for none.
func (s *Spec) Dockerd() string {
	for _, name := range slices.Sorted(maps.Keys(s.Services)) {
		if s.Services[name].Dockerd {
			return name
		}
	}
	return ""
}

// Ready is a service's readiness check: Command, run in the service's
// container until it exits 0, within Timeout of the service's start.
type Ready struct {
	Command []string      `json:"command"`
	Timeout time.Duration `json:"timeout"`
}

// DefaultReadyTimeout bounds a readiness check the file gives no timeout.
const DefaultReadyTimeout = 60 * time.Second

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
	// HostPorts are ports on the host's loopback the agent may reach, as
	// host.docker.internal:PORT through the proxy (Docker's sbx spells
	// the same rule localhost:PORT): each one named, never the host in
	// general.
	HostPorts []int `json:"hostPorts,omitempty"`
}

// Docker holds options only the docker driver reads.
type Docker struct {
	Runtime string `json:"runtime,omitempty"`
	// NoNewPrivileges runs the sandbox with no-new-privileges (default
	// true): setuid programs such as sudo cannot raise privileges.
	NoNewPrivileges bool `json:"noNewPrivileges"`
	// Networks are existing user-defined Docker networks the sandbox's
	// egress proxy joins (never the sandbox itself, which has no network),
	// so that it can reach a gateway there by container name or alias,
	// where network.allow allows it.
	Networks []string `json:"networks,omitempty"`
}

// ReservedDockerNetworks are Docker's own networks, which
// docker.networks cannot name: the proxy is on the default bridge
// unless it names others, and never shares the host's network.
var ReservedDockerNetworks = []string{"bridge", "default", "host", "none"}

// Kubernetes holds options only the kubernetes driver reads.
type Kubernetes struct {
	// Context is the kubeconfig context ("": the current one).
	Context string `json:"context,omitempty"`
	// Namespace holds the sandbox's objects ("": the context's namespace).
	Namespace string `json:"namespace,omitempty"`
	// Registry is where sbx pushes the images the cluster pulls: a
	// built template and sbx's own helper image.
	Registry string `json:"registry,omitempty"`
	// RuntimeClassName is the sandbox pod's RuntimeClass (gvisor, kata):
	// what docker.runtime is to the docker driver.
	RuntimeClassName string `json:"runtimeClassName,omitempty"`
	// Egress is "enforced" (the default: apply fails unless a probe
	// inside the sandbox shows the cluster enforces the NetworkPolicy that
	// pins the sandbox to its egress proxy) or "advisory" (the sandbox
	// may bypass the proxy; the plan says so).
	Egress string `json:"egress,omitempty"`
	// WarmPool is how many sandboxes the driver keeps started for
	// `sbx loop --ephemeral` to claim (0: none).
	WarmPool int `json:"warmPool,omitempty"`
	// WorkspaceSize and StorageClass describe the workspace volume.
	WorkspaceSize string `json:"workspaceSize,omitempty"`
	StorageClass  string `json:"storageClass,omitempty"`
}

// The kubernetes driver's defaults.
const (
	EgressEnforced       = "enforced"
	EgressAdvisory       = "advisory"
	DefaultWorkspaceSize = "10Gi"
)

// K8s returns the kubernetes options with their defaults filled in.
func (s *Spec) K8s() Kubernetes {
	var k Kubernetes
	if s.Kubernetes != nil {
		k = *s.Kubernetes
	}
	if k.Egress == "" {
		k.Egress = EgressEnforced
	}
	if k.WorkspaceSize == "" {
		k.WorkspaceSize = DefaultWorkspaceSize
	}
	return k
}

// Loop configures `sbx loop`.
type Loop struct {
	Prompt           string        `json:"prompt"` // absolute
	MaxIterations    int           `json:"maxIterations"`
	Completion       Completion    `json:"completion"`
	IterationTimeout time.Duration `json:"iterationTimeout"`
	MaxDuration      time.Duration `json:"maxDuration,omitempty"`
	Breaker          Breaker       `json:"breaker"`
	Backoff          Backoff       `json:"backoff"`
	Command          []string      `json:"command,omitempty"`
	Ephemeral        bool          `json:"ephemeral,omitempty"`
	// Checkpoint says when a run checkpoints the sandbox.
	Checkpoint LoopCheckpoint `json:"checkpoint"`
	// PromptRoot is the directory the prompt is read within, so that a
	// symlink put in its place cannot lead outside it: the workspace when
	// it holds the prompt, else the sandbox file's directory.
	PromptRoot string `json:"-"`
}

// LoopCheckpoint says when a run checkpoints its sandbox (When: one of
// the CheckpointNever… constants) and how many of the sandbox's loop
// checkpoints are kept.
type LoopCheckpoint struct {
	When string `json:"when"`
	Keep int    `json:"keep"`
}

// When a loop checkpoints its sandbox (loop.checkpoint).
const (
	CheckpointNever          = "never"
	CheckpointOnComplete     = "onComplete"
	CheckpointEveryIteration = "everyIteration"
)

// DefaultCheckpointKeep is how many loop checkpoints of a sandbox are kept
// when loop.checkpoint does not say.
const DefaultCheckpointKeep = 3

// CheckpointNamePattern is the rule for checkpoint names: an image tag's,
// which is what every backend stores a checkpoint under, 1–128
// characters.
const CheckpointNamePattern = `^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$`

// ValidCheckpointName reports whether name follows CheckpointNamePattern.
func ValidCheckpointName(name string) bool { return checkpointNameRE().MatchString(name) }

// checkpointNameRE is compiled on first use: its counted repetition takes
// milliseconds to compile, which every sbx process would otherwise pay.
var checkpointNameRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(CheckpointNamePattern) })

// Completion says when the loop is done: an iteration that exits 0, whose
// answer holds the promise (when one is named), after which every verify
// command (when any is) passes. A loop section without completion has
// the promise DefaultPromise: the one rule the README, the schema and
// the loop share.
type Completion struct {
	Promise string   `json:"promise,omitempty"`
	Verify  []string `json:"verify,omitempty"`
}

// DefaultPromise is the promise of a loop section without completion: what
// sbx init's prompt tells the agent to print.
const DefaultPromise = "COMPLETE"

// Backoff is the pause after a failing iteration: Initial after the first
// failure in a row, doubling with each more, up to Max. Initial 0 turns it
// off.
type Backoff struct {
	Initial time.Duration `json:"initial"`
	Max     time.Duration `json:"max"`
}

// Pause is the pause after the n-th failing iteration in a row (0 for
// n < 1).
func (b Backoff) Pause(n int) time.Duration {
	if n < 1 || b.Initial <= 0 {
		return 0
	}
	d := b.Initial
	for i := 1; i < n && d < b.Max; i++ {
		d *= 2
	}
	return min(d, max(b.Max, b.Initial))
}

// Breaker stops a loop that is going nowhere. Zero turns a check off.
type Breaker struct {
	NoProgress int `json:"noProgress"`
	SameError  int `json:"sameError"`
}

// MinPidsGVisor is the lowest resources.pids a sandbox under gVisor
// starts with: runsc's own threads count against the limit (at 64 it
// fails to start).
const MinPidsGVisor = 128

// Defaults applied when the file does not say.
const (
	DefaultIterationTimeout = 30 * time.Minute
	DefaultNoProgress       = 3
	DefaultSameError        = 5
	DefaultBackoffInitial   = 10 * time.Second
	DefaultBackoffMax       = 5 * time.Minute
)

// DefaultBlockCIDRs are the ranges the egress proxy never dials: every
// block of IANA's IPv4 and IPv6 Special-Purpose Address Registries (RFC
// 6890; iana.org/assignments/iana-ipv4-special-registry and
// iana-ipv6-special-registry, as of the 2025-04 addition of
// 100:0:0:1::/64): "this network", private-use, shared (CGNAT),
// loopback, link-local, IETF protocol assignments, documentation,
// benchmarking, AS112, AMT, 6to4 and its relay, NAT64, Teredo,
// discard-only, dummy, SRv6 SIDs, unique-local; then multicast (RFC 5771,
// RFC 4291 §2.7), the reserved 240.0.0.0/4 and the deprecated site-local
// fec0::/10 (RFC 3879). A few of these are globally reachable (AS112,
// AMT, 64:ff9b::/96); none is a place a sandbox has business reaching,
// and NAT64, 6to4 and Teredo addresses carry an IPv4 address that would
// otherwise slip past the IPv4 ranges. The docker driver's proxy checks
// an IPv4-mapped address (::ffff:0:0/96) as the IPv4 address it carries,
// and refuses unspecified and loopback addresses, its own and the Docker
// host's whatever this list says.
var DefaultBlockCIDRs = []string{
	"0.0.0.0/8", "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16",
	"172.16.0.0/12", "192.0.0.0/24", "192.0.2.0/24", "192.31.196.0/24",
	"192.52.193.0/24", "192.88.99.0/24", "192.168.0.0/16", "192.175.48.0/24",
	"198.18.0.0/15", "198.51.100.0/24", "203.0.113.0/24", "224.0.0.0/4",
	"240.0.0.0/4", "255.255.255.255/32",
	"::/128", "::1/128", "::ffff:0:0/96", "64:ff9b::/96", "64:ff9b:1::/48",
	"100::/64", "100:0:0:1::/64", "2001::/23", "2001:db8::/32", "2002::/16",
	"2620:4f:8000::/48", "3fff::/20", "5f00::/16", "fc00::/7", "fe80::/10",
	"fec0::/10", "ff00::/8",
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
