package spec

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// decode builds the Spec from the merged tree, applying defaults and the
// semantic checks the schema cannot express. It tolerates values of the
// wrong type (the schema has reported those) so that every other problem is
// still found.
func (st *state) decode(root *yaml.Node) *Spec {
	s := &Spec{
		Dir:       st.base.dir,
		Driver:    "auto",
		Sensitive: map[string]bool{},
		Network:   Network{Policy: "deny", AgentHosts: true},
		Docker:    Docker{NoNewPrivileges: true},
		Protect:   true,
	}
	s.Agent, _ = st.str(root, "agent", s)
	if v, ok := st.str(root, "driver", s); ok {
		s.Driver = v
	}
	st.template(root, s)
	st.workspace(root, s)
	if k, v := lookupKey(root, "name"); k != nil && v.Kind == yaml.ScalarNode {
		s.Name = v.Value
		if err := CheckName(s.Name); err != nil && !st.unresolved[v] {
			st.errorf(v, "name", "%v", err)
		}
	} else if s.Agent != "" {
		s.Name, s.NameDerived = DeriveName(s.Agent, s.Workspace.Path), true
	}
	st.user(root, s)
	st.mounts(root, s)
	s.Env = st.stringMap(root, "env", s)
	st.secrets(root, s)
	st.resources(root, s)
	st.ports(root, s)
	st.services(root, s)
	st.network(root, s)
	st.checkSecretHosts(s)
	if _, d := lookupKey(root, "docker"); d != nil {
		s.Docker.Runtime, _ = st.str(d, "runtime", s, "docker")
		s.Docker.NoNewPrivileges = st.boolean(d, "noNewPrivileges", true)
		st.dockerNetworks(d, s)
	}
	st.dockerdRuntime(root, s)
	st.kubernetes(root, s)
	st.loop(root, s)
	if s.Docker.Runtime == "runsc" && s.Resources.Pids > 0 && s.Resources.Pids < MinPidsGVisor {
		_, r := lookupKey(root, "resources")
		k, _ := lookupKey(r, "pids")
		st.errorf(k, "resources.pids", "%d is too few under gVisor (docker.runtime runsc), whose own threads count against the limit: use at least %d", s.Resources.Pids, MinPidsGVisor)
	}
	return s
}

// user reads user:, resolving host to the uid:gid running sbx.
func (st *state) user(root *yaml.Node, s *Spec) {
	u, ok := st.str(root, "user", s)
	if !ok || u != "host" {
		s.User = u
		return
	}
	hostUser := st.opts.HostUser
	if hostUser == nil {
		hostUser = HostUser
	}
	id, err := hostUser()
	if err != nil {
		_, v := lookupKey(root, "user")
		st.errorf(v, "user", "host: %v; name the user or uid:gid instead", err)
		return
	}
	s.User = id
}

// HostUser is the uid:gid of this process, for user: host.
func HostUser() (string, error) {
	uid, gid := os.Getuid(), os.Getgid()
	if uid < 0 || gid < 0 {
		return "", fmt.Errorf("this system has no uid and gid")
	}
	return fmt.Sprintf("%d:%d", uid, gid), nil
}

// scalar returns a scalar child of m and records its sensitivity.
func (st *state) scalar(m *yaml.Node, key string, s *Spec, prefix ...string) (*yaml.Node, string, bool) {
	_, v := lookupKey(m, key)
	if v == nil || v.Kind != yaml.ScalarNode || v.ShortTag() == "!!null" {
		return nil, "", false
	}
	path := joinKey(strings.Join(prefix, "."), key)
	if st.sensitive[v] {
		s.Sensitive[path] = true
	}
	return v, path, true
}

func (st *state) str(m *yaml.Node, key string, s *Spec, prefix ...string) (string, bool) {
	v, _, ok := st.scalar(m, key, s, prefix...)
	if !ok {
		return "", false
	}
	return v.Value, true
}

func (st *state) boolean(m *yaml.Node, key string, def bool) bool {
	_, v := lookupKey(m, key)
	if v == nil || v.Kind != yaml.ScalarNode || v.ShortTag() != "!!bool" {
		return def
	}
	b, err := strconv.ParseBool(strings.ToLower(v.Value))
	if err != nil {
		return def
	}
	return b
}

func (st *state) integer(m *yaml.Node, key string, def int) int {
	_, v := lookupKey(m, key)
	if v == nil {
		return def
	}
	if i, ok := scalarValue(v).(int); ok {
		return i
	}
	return def
}

// strings returns a list of scalars.
func (st *state) strings(m *yaml.Node, key string) ([]string, []*yaml.Node) {
	_, v := lookupKey(m, key)
	if v == nil || v.Kind != yaml.SequenceNode {
		return nil, nil
	}
	var out []string
	var nodes []*yaml.Node
	for _, e := range v.Content {
		e = deref(e)
		if e.Kind == yaml.ScalarNode {
			out = append(out, e.Value)
			nodes = append(nodes, e)
		}
	}
	return out, nodes
}

func (st *state) stringMap(m *yaml.Node, key string, s *Spec, prefix ...string) map[string]string {
	_, v := lookupKey(m, key)
	if v == nil || v.Kind != yaml.MappingNode {
		return nil
	}
	out := map[string]string{}
	base := joinKey(strings.Join(prefix, "."), key)
	for i := 0; i+1 < len(v.Content); i += 2 {
		k, val := v.Content[i], deref(v.Content[i+1])
		if val.Kind != yaml.ScalarNode {
			continue
		}
		if st.sensitive[val] {
			s.Sensitive[base+"."+k.Value] = true
		}
		// The text as written: 0755 stays "0755", 1.10 stays "1.10".
		out[k.Value] = val.Value
	}
	return out
}

// path resolves a host path: ~ is the home directory, and a relative path is
// relative to the directory of the file that wrote it.
func (st *state) path(n *yaml.Node, p string) string {
	if p == "~" || strings.HasPrefix(p, "~/") {
		home, _ := st.opts.LookupEnv("HOME")
		if home == "" {
			home, _ = os.UserHomeDir()
		}
		p = filepath.Join(home, strings.TrimPrefix(p, "~"))
	}
	if !filepath.IsAbs(p) {
		p = filepath.Join(st.fileOf(n).dir, p)
	}
	return filepath.Clean(p)
}

type fileKind int

const (
	isAny fileKind = iota
	isDir
	isFile
)

// mustExist reports a missing file or directory at n.
func (st *state) mustExist(n *yaml.Node, path, p string, want fileKind, what string) {
	if st.unresolved[n] || st.opts.NoHostFiles {
		return
	}
	fi, err := os.Stat(p)
	switch {
	case err != nil:
		st.errorf(n, path, "%s %s does not exist", what, p)
	case want == isDir && !fi.IsDir():
		st.errorf(n, path, "%s %s is not a directory", what, p)
	case want == isFile && fi.IsDir():
		st.errorf(n, path, "%s %s is a directory, not a file", what, p)
	}
}

// promptRoot returns the directory the prompt is read within: the
// workspace when it holds the prompt (the narrowest root the agent can
// write in), else the sandbox file's directory when that holds it, else
// "".
func promptRoot(prompt, workspace, dir string) string {
	for _, d := range []string{workspace, dir} {
		if rel, err := filepath.Rel(d, prompt); d != "" && err == nil && filepath.IsLocal(rel) {
			return d
		}
	}
	return ""
}

// workspaceUnresolved reports a workspace path that names a variable not
// set (offline validation), so its value is not the real one.
func (st *state) workspaceUnresolved(root *yaml.Node) bool {
	_, w := lookupKey(root, "workspace")
	if w != nil && w.Kind == yaml.MappingNode {
		_, w = lookupKey(w, "path")
	}
	return w != nil && st.unresolved[w]
}

func (st *state) template(root *yaml.Node, s *Spec) {
	_, t := lookupKey(root, "template")
	switch {
	case t == nil:
		if s.Agent != "" {
			s.Template.Image = DefaultTemplate(s.Agent)
		}
	case t.Kind == yaml.ScalarNode:
		s.Template.Image = t.Value
	case t.Kind == yaml.MappingNode:
		s.Template.Image, _ = st.str(t, "image", s, "template")
		if v, path, ok := st.scalar(t, "checkpoint", s, "template"); ok {
			s.Template.Checkpoint = v.Value
			if k, _ := lookupKey(t, "image"); k != nil {
				st.errorf(k, "template.image", "cannot be combined with template.checkpoint: a checkpoint is the whole filesystem the sandbox starts from")
			}
			if k, _ := lookupKey(t, "build"); k != nil {
				st.errorf(k, "template.build", "cannot be combined with template.checkpoint: a checkpoint is the whole filesystem the sandbox starts from")
			}
			if !st.unresolved[v] && !ValidCheckpointName(v.Value) {
				st.errorf(v, path, "invalid checkpoint name %q: 1 to 128 letters, digits, underscores, periods and hyphens, starting with a letter or digit", v.Value)
			}
		}
		_, b := lookupKey(t, "build")
		if b == nil || b.Kind != yaml.MappingNode {
			return
		}
		build := &Build{Dockerfile: "Dockerfile"}
		if v, path, ok := st.scalar(b, "context", s, "template.build"); ok {
			build.Context = st.path(v, v.Value)
			st.mustExist(v, path, build.Context, isDir, "build context")
			if v2, path2, ok := st.scalar(b, "dockerfile", s, "template.build"); ok {
				build.Dockerfile = v2.Value
				st.mustExist(v2, path2, filepath.Join(build.Context, v2.Value), isFile, "Dockerfile")
			} else if _, err := os.Stat(build.Context); err == nil {
				st.mustExist(v, path, filepath.Join(build.Context, "Dockerfile"), isFile, "Dockerfile")
			}
		}
		build.Args = st.stringMap(b, "args", s, "template.build")
		build.Target, _ = st.str(b, "target", s, "template.build")
		build.Network = st.boolean(b, "network", false)
		s.Template.Build = build
	}
}

func (st *state) workspace(root *yaml.Node, s *Spec) {
	_, w := lookupKey(root, "workspace")
	var v *yaml.Node
	path := "workspace"
	switch {
	case w == nil:
		s.Workspace.Path = st.base.dir
		return
	case w.Kind == yaml.ScalarNode:
		v = w
	case w.Kind == yaml.MappingNode:
		v, path, _ = st.scalar(w, "path", s, "workspace")
		s.Workspace.ReadOnly = st.boolean(w, "readOnly", false)
		s.Protect = st.boolean(w, "protect", true)
	}
	if v == nil {
		s.Workspace.Path = st.base.dir
		return
	}
	s.Workspace.Path = st.path(v, v.Value)
	st.mustExist(v, path, s.Workspace.Path, isDir, "workspace")
}

func (st *state) mounts(root *yaml.Node, s *Spec) {
	_, ms := lookupKey(root, "mounts")
	if ms == nil || ms.Kind != yaml.SequenceNode {
		return
	}
	targets := map[string]int{}
	for i, e := range ms.Content {
		e = deref(e)
		path := fmt.Sprintf("mounts[%d]", i)
		var m Mount
		var srcNode, dstNode *yaml.Node
		switch e.Kind {
		case yaml.ScalarNode:
			parts := strings.Split(e.Value, ":")
			if len(parts) < 2 || len(parts) > 3 || parts[0] == "" || parts[1] == "" {
				if !st.unresolved[e] {
					st.errorf(e, path, "invalid mount %q: use SOURCE:TARGET or SOURCE:TARGET:ro", e.Value)
				}
				continue
			}
			if len(parts) == 3 {
				switch parts[2] {
				case "ro":
					m.ReadOnly = true
				case "rw":
				default:
					st.errorf(e, path, "invalid mount %q: the mode must be ro or rw, got %q", e.Value, parts[2])
					continue
				}
			}
			m.Source, m.Target = parts[0], parts[1]
			srcNode, dstNode = e, e
			if st.sensitive[e] {
				s.Sensitive[path] = true
			}
		case yaml.MappingNode:
			var ok bool
			if srcNode, _, ok = st.scalar(e, "source", s, path); ok {
				m.Source = srcNode.Value
			}
			if dstNode, _, ok = st.scalar(e, "target", s, path); ok {
				m.Target = dstNode.Value
			}
			m.ReadOnly = st.boolean(e, "readOnly", false)
			if srcNode == nil || dstNode == nil {
				continue
			}
		default:
			continue
		}
		m.Source = st.path(srcNode, m.Source)
		st.mustExist(srcNode, path, m.Source, isAny, "mount source")
		if !strings.HasPrefix(m.Target, "/") {
			st.errorf(dstNode, path, "mount target %q must be an absolute path", m.Target)
			continue
		}
		m.Target = filepath.Clean(m.Target)
		if j, dup := targets[m.Target]; dup {
			st.errorf(dstNode, path, "mount target %s is already used by mounts[%d]", m.Target, j)
			continue
		}
		if m.Target == s.Workspace.Path {
			st.errorf(dstNode, path, "mount target %s is where the workspace is mounted", m.Target)
			continue
		}
		targets[m.Target] = i
		s.Mounts = append(s.Mounts, m)
	}
}

func (st *state) secrets(root *yaml.Node, s *Spec) {
	_, sec := lookupKey(root, "secrets")
	if sec == nil || sec.Kind != yaml.MappingNode {
		return
	}
	s.Secrets = map[string]Secret{}
	var secretHosts []pathNode
	defer func() { st.secretHosts = secretHosts }()
	for i := 0; i+1 < len(sec.Content); i += 2 {
		k, v := sec.Content[i], deref(sec.Content[i+1])
		var x Secret
		x.Env, _ = st.str(v, "env", s, "secrets."+k.Value)
		var cmd []*yaml.Node
		x.Command, cmd = st.strings(v, "command")
		for i, n := range cmd {
			if st.sensitive[n] {
				s.Sensitive[fmt.Sprintf("secrets.%s.command[%d]", k.Value, i)] = true
			}
		}
		if fn, _, ok := st.scalar(v, "file", s, "secrets."+k.Value); ok {
			x.File = st.path(fn, fn.Value)
		}
		x.Path, _ = st.str(v, "path", s, "secrets."+k.Value)
		var hosts []*yaml.Node
		x.Hosts, hosts = st.strings(v, "hosts")
		for i, n := range hosts {
			secretHosts = append(secretHosts, pathNode{n, fmt.Sprintf("secrets.%s.hosts[%d]", k.Value, i)})
		}
		switch {
		case x.File != "" && (x.Path == "" || len(x.Hosts) == 0):
			st.errorf(k, "secrets."+k.Value, "a file secret needs path (where the sandbox gets the file) and hosts (where its credentials may go)")
		case x.File == "" && x.Path != "":
			st.errorf(k, "secrets."+k.Value, "path is where the sandbox gets a file secret; it goes with file")
		}
		s.Secrets[k.Value] = x
		if _, clash := s.Env[k.Value]; clash {
			st.errorf(k, "secrets."+k.Value, "%q is also set in env; a variable is either env (stored in the sandbox) or a secret (never stored), not both", k.Value)
		}
	}
}

func (st *state) resources(root *yaml.Node, s *Spec) {
	_, r := lookupKey(root, "resources")
	if r == nil || r.Kind != yaml.MappingNode {
		return
	}
	if _, c := lookupKey(r, "cpus"); c != nil {
		switch x := scalarValue(c).(type) {
		case int:
			s.Resources.CPUs = float64(x)
		case float64:
			s.Resources.CPUs = x
		}
	}
	if v, path, ok := st.scalar(r, "memory", s, "resources"); ok && !st.unresolved[v] {
		var n int64
		var err error
		switch x := scalarValue(v).(type) {
		case int:
			n = int64(x)
		case string:
			n, err = ParseSize(x)
		default:
			err = fmt.Errorf("invalid size %q", v.Value)
		}
		switch {
		case err != nil:
			st.errorf(v, path, "%v", err)
		case n < MinMemory:
			st.errorf(v, path, "memory %s is below the minimum of 6m", v.Value)
		default:
			s.Resources.Memory = n
		}
	}
	s.Resources.Pids = st.integer(r, "pids", 0)

}

func (st *state) ports(root *yaml.Node, s *Spec) {
	_, ps := lookupKey(root, "ports")
	if ps == nil || ps.Kind != yaml.SequenceNode {
		return
	}

	hostPorts := map[string]int{}
	for i, e := range ps.Content {
		e = deref(e)
		if e.Kind != yaml.ScalarNode || st.unresolved[e] {
			continue
		}
		path := fmt.Sprintf("ports[%d]", i)
		p, err := ParsePort(e.Value)
		if err != nil {
			st.errorf(e, path, "%v", err)
			continue
		}
		if p.HostPort != 0 {
			key := p.HostIP + "|" + strconv.Itoa(p.HostPort) + "/" + p.Protocol
			if j, dup := hostPorts[key]; dup {
				st.errorf(e, path, "host port %d/%s is already published by ports[%d]", p.HostPort, p.Protocol, j)
				continue
			}
			hostPorts[key] = i
		}
		s.Ports = append(s.Ports, p)
	}
}

func (st *state) network(root *yaml.Node, s *Spec) {
	_, n := lookupKey(root, "network")
	for _, c := range DefaultBlockCIDRs {
		p, _ := ParseCIDR(c)
		s.Network.BlockCIDRs = append(s.Network.BlockCIDRs, p)
	}
	if n == nil || n.Kind != yaml.MappingNode {
		return
	}
	if v, ok := st.str(n, "policy", s, "network"); ok {
		s.Network.Policy = v
	}
	s.Network.AgentHosts = st.boolean(n, "agentHosts", true)
	s.Network.Allow = st.hosts(n, "allow")
	s.Network.Deny = st.hosts(n, "deny")
	s.Network.Presets, _ = st.strings(n, "presets")
	st.hostPorts(n, s)
	if _, v := lookupKey(n, "blockCIDRs"); v != nil && v.Kind == yaml.SequenceNode {
		s.Network.BlockCIDRs = nil
		cidrs, nodes := st.strings(n, "blockCIDRs")
		for i, c := range cidrs {
			p, err := ParseCIDR(c)
			if err != nil {
				st.errorf(nodes[i], fmt.Sprintf("network.blockCIDRs[%d]", i), "%v", err)
				continue
			}
			s.Network.BlockCIDRs = append(s.Network.BlockCIDRs, p)
		}
	}
	st.allowBlocked(n)
}

// services reads services: each a DNS label naming a container with its
// image and ports; a port is one service's (the sandbox reaches each on
// its own loopback), and never the proxy's.
func (st *state) services(root *yaml.Node, s *Spec) {
	_, m := lookupKey(root, "services")
	if m == nil || m.Kind != yaml.MappingNode {
		return
	}
	owner := map[int]string{}
	dockerd := ""
	for i := 0; i+1 < len(m.Content); i += 2 {
		k, v := m.Content[i], deref(m.Content[i+1])
		name, path := k.Value, "services."+k.Value
		if !ServiceName(name) {
			st.errorf(k, path, "%q is not a service name: 1 to 63 lowercase letters, digits and hyphens, not starting or ending with a hyphen", name)
			continue
		}
		if v.Kind != yaml.MappingNode {
			continue
		}
		sv := Service{Env: st.stringMap(v, "env", s, path)}
		sv.Image, _ = st.str(v, "image", s, path)
		sv.Command, _ = st.strings(v, "command")
		sv.Egress = st.boolean(v, "egress", false)
		sv.Ports = st.portNumbers(v, "ports", path+".ports", func(p int) string {
			switch {
			case p == ProxyPort:
				return fmt.Sprintf("port %d is the sandbox's proxy", p)
			case owner[p] != "":
				return fmt.Sprintf("port %d is already service %s's: the sandbox reaches each service port on its own loopback, so a port is one service's", p, owner[p])
			}
			owner[p] = name
			return ""
		})
		if _, r := lookupKey(v, "ready"); r != nil && r.Kind == yaml.MappingNode {
			cmd, _ := st.strings(r, "command")
			sv.Ready = &Ready{Command: cmd, Timeout: st.durationAt(r, "timeout", path+".ready", s, DefaultReadyTimeout, false)}
		}
		if sv.Dockerd = st.boolean(v, "dockerd", false); sv.Dockerd {
			st.dockerd(v, path, &sv, dockerd)
			dockerd = name
		}
		if s.Services == nil {
			s.Services = map[string]Service{}
		}
		s.Services[name] = sv
	}
}

// dockerd checks a dockerd service sv at path, whose mapping is v: it is
// the only one (other is the one before it, if any), sbx runs its command,
// and it lists the API's port; without a readiness check of its own it
// gets DockerdReady.
func (st *state) dockerd(v *yaml.Node, path string, sv *Service, other string) {
	k, _ := lookupKey(v, "dockerd")
	if other != "" {
		st.errorf(k, path+".dockerd", "service %s is the sandbox's Docker daemon already: a sandbox has one", other)
	}
	if len(sv.Command) > 0 {
		c, _ := lookupKey(v, "command")
		st.errorf(c, path+".command", "a dockerd service runs %s, which sbx sets: leave command out", strings.Join(DockerdArgs, " "))
	}
	if !slices.Contains(sv.Ports, DockerdPort) {
		st.errorf(k, path+".ports", "a dockerd service serves Docker's API on port %d: list it in ports", DockerdPort)
	}
	if sv.Ready == nil {
		sv.Ready = &Ready{Command: slices.Clone(DockerdReady), Timeout: DefaultReadyTimeout}
	}
}

// dockerdRuntime refuses a dockerd service the file does not run under
// gVisor: under runc a Docker daemon needs a privileged container on the
// host, and a hostile agent turns that into the host (docker run
// --privileged -v /:/host). The driver checks that the runtime is gVisor's
// (docker.Driver's runtimeProblems).
func (st *state) dockerdRuntime(root *yaml.Node, s *Spec) {
	name := s.Dockerd()
	if name == "" || (s.Docker.Runtime != "" && s.Docker.Runtime != "runc") {
		return
	}
	_, m := lookupKey(root, "services")
	_, v := lookupKey(m, name)
	k, _ := lookupKey(deref(v), "dockerd")
	st.errorf(k, "services."+name+".dockerd", "a Docker daemon runs only under gVisor: set docker.runtime to a gVisor runtime (runsc). Under runc it would need a privileged container on the host, which the agent could turn into the host (docker run --privileged -v /:/host)")
}

// ProxyPort is the sandbox's proxy's port on its loopback.
const ProxyPort = 3128

// ServiceName reports whether name is a service's name: a DNS label
// (RFC 1123), which the sandbox resolves to its own loopback.
func ServiceName(name string) bool {
	if name == "" || len(name) > 63 || name[0] == '-' || name[len(name)-1] == '-' || name == "localhost" {
		return false
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-') {
			return false
		}
	}
	return true
}

// HostAlias is the name the agent reaches network.hostPorts by, through
// the proxy, as on Docker's sbx.
const HostAlias = "host.docker.internal"

// hostPorts reads network.hostPorts: port numbers (the schema checks the
// type and range, and that each is listed once).
func (st *state) hostPorts(n *yaml.Node, s *Spec) {
	s.Network.HostPorts = st.portNumbers(n, "hostPorts", "network.hostPorts", func(int) string { return "" })
}

// portNumbers reads the list of port numbers at key of m, whose path is
// path: each that reads and that check finds nothing wrong with (""),
// the others reported.
func (st *state) portNumbers(m *yaml.Node, key, path string, check func(p int) string) []int {
	_, list := lookupKey(m, key)
	if list == nil || list.Kind != yaml.SequenceNode {
		return nil
	}
	var out []int
	for i, e := range list.Content {
		if e.Kind != yaml.ScalarNode || st.unresolved[e] {
			continue
		}
		at := fmt.Sprintf("%s[%d]", path, i)
		p, err := parsePortNumber(e.Value)
		if err != nil {
			st.errorf(e, at, "%v", err)
			continue
		}
		if why := check(p); why != "" {
			st.errorf(e, at, "%s", why)
			continue
		}
		out = append(out, p)
	}
	return out
}

// allowBlocked reports an allow entry the proxy can never reach. An IP
// literal a blocked range covers is its own exception (the proxy dials
// exactly that address, on its port if it has one), but not an
// unspecified or loopback address, which the proxy always refuses, nor
// a spelling the proxy reads as another address (IPv4 in IPv6 form) or
// never meets (a zone). localhost is loopback. The Docker host's
// addresses are refused too, but only the proxy knows them: it logs why.
func (st *state) allowBlocked(n *yaml.Node) {
	_, list := lookupKey(n, "allow")
	if list == nil || list.Kind != yaml.SequenceNode {
		return
	}
	for i, e := range list.Content {
		if e.Kind != yaml.ScalarNode || st.unresolved[e] {
			continue
		}
		h, err := ParseHost(e.Value)
		if err != nil {
			continue
		}
		path := fmt.Sprintf("network.allow[%d]", i)
		switch ip := h.IP; {
		case h.Name == "localhost" || strings.HasSuffix(h.Name, ".localhost"):
			st.errorf(e, path, "%s is loopback, %s", e.Value, refusedAlways)
		case !ip.IsValid():
		case ip.Zone() != "":
			st.errorf(e, path, "%s has a zone, which names an interface of the proxy, never a destination: write the address without it", e.Value)
		case ip.Is4In6() || ipv4Compatible(ip):
			v4 := netip.AddrFrom4([4]byte(ip.AsSlice()[12:]))
			st.errorf(e, path, "%s is an IPv4 address written as IPv6, which the proxy checks and dials as %s: write %s", e.Value, v4, Host{IP: v4, Port: h.Port})
		case alwaysRefused(ip):
			st.errorf(e, path, "%s is a loopback or unspecified address, %s", e.Value, refusedAlways)
		}
	}
}

// refusedAlways ends the message for an allow entry the proxy refuses
// whatever the policy says.
const refusedAlways = "which the proxy always refuses whatever network.allow says: a service on the host's loopback is reached only by its port in network.hostPorts, as " + HostAlias + ":PORT (and the sandbox's own loopback needs no proxy)"

// ipv4Compatible reports whether a is an IPv4-compatible IPv6 address
// (::a.b.c.d, RFC 4291 §2.5.5.1, deprecated), other than :: and ::1: the
// proxy reads it as the IPv4 address it carries.
func ipv4Compatible(a netip.Addr) bool {
	if !a.Is6() || a.Is4In6() {
		return false
	}
	b := a.As16()
	for _, x := range b[:12] {
		if x != 0 {
			return false
		}
	}
	return netip.AddrFrom4([4]byte(b[12:])).Compare(netip.AddrFrom4([4]byte{0, 0, 0, 1})) > 0
}

// alwaysRefused reports whether the egress proxy refuses a whatever its
// policy: "this network" (0.0.0.0/8), loopback, and IPv6's unspecified
// and loopback addresses (egress.New).
func alwaysRefused(a netip.Addr) bool {
	if a.Is4() {
		return a.As4()[0] == 0 || a.IsLoopback()
	}
	return a.IsUnspecified() || a.IsLoopback()
}

// dockerNetworks reads docker.networks: each a user-defined network
// (the schema checks the spelling), once.
func (st *state) dockerNetworks(d *yaml.Node, s *Spec) {
	names, nodes := st.strings(d, "networks")
	seen := map[string]int{}
	for i, name := range names {
		if st.unresolved[nodes[i]] {
			continue
		}
		path := fmt.Sprintf("docker.networks[%d]", i)
		if slices.Contains(ReservedDockerNetworks, name) {
			st.errorf(nodes[i], path, "%q is one of Docker's own networks: name user-defined networks (docker network create), which the egress proxy joins besides the default bridge", name)
			continue
		}
		if j, dup := seen[name]; dup {
			st.errorf(nodes[i], path, "network %q is already listed as docker.networks[%d]", name, j)
			continue
		}
		seen[name] = i
		s.Docker.Networks = append(s.Docker.Networks, name)
	}
}

// hosts parses a host pattern list into canonical, de-duplicated strings.
func (st *state) hosts(n *yaml.Node, key string) []string {
	list, nodes := st.strings(n, key)
	var out []string
	seen := map[string]bool{}
	for i, h := range list {
		if st.unresolved[nodes[i]] {
			continue
		}
		p, err := ParseHost(h)
		if err != nil {
			st.errorf(nodes[i], fmt.Sprintf("network.%s[%d]", key, i), "%v", err)
			continue
		}
		if c := p.String(); !seen[c] {
			seen[c] = true
			out = append(out, c)
		}
	}
	return out
}

func (st *state) loop(root *yaml.Node, s *Spec) {
	lk, l := lookupKey(root, "loop")
	if l == nil || l.Kind != yaml.MappingNode {
		return
	}
	loop := &Loop{
		IterationTimeout: DefaultIterationTimeout,
		Breaker:          Breaker{NoProgress: DefaultNoProgress, SameError: DefaultSameError},
		Backoff:          Backoff{Initial: DefaultBackoffInitial, Max: DefaultBackoffMax},
		Completion:       Completion{Promise: DefaultPromise},
	}
	if v, path, ok := st.scalar(l, "prompt", s, "loop"); ok {
		loop.Prompt = st.path(v, v.Value)
		st.mustExist(v, path, loop.Prompt, isFile, "prompt file")
		loop.PromptRoot = promptRoot(loop.Prompt, s.Workspace.Path, s.Dir)
		if loop.PromptRoot == "" && !st.unresolved[v] && !st.workspaceUnresolved(root) {
			st.errorf(v, path, "prompt file %s is outside the workspace and the sandbox file's directory: sbx reads it within one of them, so that a symlink put in its place cannot lead to other files", loop.Prompt)
		}
	}
	loop.MaxIterations = st.integer(l, "maxIterations", 0)
	if _, c := lookupKey(l, "completion"); c != nil && c.Kind == yaml.MappingNode {
		loop.Completion = Completion{}
		loop.Completion.Promise, _ = st.str(c, "promise", s, "loop.completion")
		loop.Completion.Verify, _ = st.strings(c, "verify")
	}
	loop.IterationTimeout = st.duration(l, "iterationTimeout", s, loop.IterationTimeout)
	loop.MaxDuration = st.duration(l, "maxDuration", s, 0)
	if _, b := lookupKey(l, "breaker"); b != nil {
		loop.Breaker.NoProgress = st.integer(b, "noProgress", loop.Breaker.NoProgress)
		loop.Breaker.SameError = st.integer(b, "sameError", loop.Breaker.SameError)
	}
	if _, b := lookupKey(l, "backoff"); b != nil && b.Kind == yaml.MappingNode {
		loop.Backoff.Initial = st.durationAt(b, "initial", "loop.backoff", s, loop.Backoff.Initial, true)
		loop.Backoff.Max = st.durationAt(b, "max", "loop.backoff", s, loop.Backoff.Max, false)
	}
	loop.Command, _ = st.strings(l, "command")
	loop.Ephemeral = st.boolean(l, "ephemeral", false)
	loop.Checkpoint = LoopCheckpoint{When: CheckpointNever, Keep: DefaultCheckpointKeep}
	if _, c := lookupKey(l, "checkpoint"); c != nil {
		switch c.Kind {
		case yaml.ScalarNode:
			loop.Checkpoint.When = c.Value
		case yaml.MappingNode:
			if w, ok := st.str(c, "when", s, "loop.checkpoint"); ok {
				loop.Checkpoint.When = w
			}
			loop.Checkpoint.Keep = st.integer(c, "keep", DefaultCheckpointKeep)
		}
	}
	if s.Agent == "shell" && len(loop.Command) == 0 {
		st.errorf(lk, "loop.command", "required when agent is shell: sbx has no default command for a plain shell")
	}
	s.Loop = loop
}

func (st *state) duration(m *yaml.Node, key string, s *Spec, def time.Duration) time.Duration {
	return st.durationAt(m, key, "loop", s, def, false)
}

// durationAt reads the duration at key of the mapping at parent; zero is
// an error unless zeroOK.
func (st *state) durationAt(m *yaml.Node, key, parent string, s *Spec, def time.Duration, zeroOK bool) time.Duration {
	v, path, ok := st.scalar(m, key, s, parent)
	if !ok || st.unresolved[v] {
		return def
	}
	d, err := time.ParseDuration(v.Value)
	switch {
	case err != nil:
		st.errorf(v, path, "invalid duration %q: use a number and a unit, as in 90s, 15m or 4h", v.Value)
	case d < 0 || (d == 0 && !zeroOK):
		st.errorf(v, path, "must be greater than zero, got %s", v.Value)
	default:
		return d
	}
	return def
}

// kubernetes reads the kubernetes driver's block. Its shapes are the
// schema's; what depends on other fields is checked here.
func (st *state) kubernetes(root *yaml.Node, s *Spec) {
	if _, k := lookupKey(root, "kubernetes"); k != nil && k.Kind == yaml.MappingNode {
		o := &Kubernetes{}
		o.Context, _ = st.str(k, "context", s, "kubernetes")
		o.Namespace, _ = st.str(k, "namespace", s, "kubernetes")
		o.Registry, _ = st.str(k, "registry", s, "kubernetes")
		o.RuntimeClassName, _ = st.str(k, "runtimeClassName", s, "kubernetes")
		o.Egress, _ = st.str(k, "egress", s, "kubernetes")
		o.WarmPool = st.integer(k, "warmPool", 0)
		o.WorkspaceSize, _ = st.str(k, "workspaceSize", s, "kubernetes")
		o.StorageClass, _ = st.str(k, "storageClass", s, "kubernetes")
		s.Kubernetes = o
	}
	if s.Driver == "kubernetes" && s.Template.Build != nil && s.K8s().Registry == "" {
		_, t := lookupKey(root, "template")
		bk, _ := lookupKey(t, "build")
		st.errorf(bk, "template.build", "the kubernetes driver pushes a built template to kubernetes.registry for the cluster to pull; name a registry the nodes can pull from, or give template.image")
	}
}

// checkSecretHosts checks the hosts a secret's value goes to: each a name
// or an address, never a wildcard (a secret goes to hosts the file names,
// not to whatever answers under a domain), and each one the network lets
// the sandbox reach, or the value could never be sent.
func (st *state) checkSecretHosts(s *Spec) {
	if len(st.secretHosts) == 0 {
		return
	}
	var allowed []Host
	for _, r := range s.Network.AllowRules(s.Agent) {
		if h, err := ParseHost(r.Host); err == nil {
			allowed = append(allowed, h)
		}
	}
	for _, pn := range st.secretHosts {
		n, path := pn.node, pn.path
		if st.unresolved[n] {
			continue
		}
		h, err := ParseHost(n.Value)
		switch {
		case err != nil:
			st.errorf(n, path, "%v", err)
			continue
		case h.Wildcard:
			st.errorf(n, path, "a secret goes to the hosts the file names, not to every host under %s: name them", strings.TrimPrefix(n.Value, "*."))
			continue
		case s.Network.Policy == "allow":
			continue
		}
		name, port := h.Name, h.Port
		if h.IP.IsValid() {
			name = h.IP.String()
		}
		if port == 0 {
			port = 443
		}
		reachable := false
		for _, a := range allowed {
			if (a.IP.IsValid() && h.IP == a.IP && (a.Port == 0 || a.Port == port)) || (!a.IP.IsValid() && !h.IP.IsValid() && a.Matches(name, port)) {
				reachable = true
				break
			}
		}
		if !reachable {
			st.errorf(n, path, "%s is not a host the network allows (network.allow, presets, the agent's hosts); the secret could never reach it", n.Value)
		}
	}
}

// pathNode is a node with its field path, for a check made after the
// pass that found it.
type pathNode struct {
	node *yaml.Node
	path string
}
