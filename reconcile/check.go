package reconcile

import (
	"fmt"
	"net/netip"
	"sort"

	"github.com/sbxhq/sbx/spec"
)

// Constraints are what a backend requires of a sandbox beyond its
// capability rows, as data: the planner refuses a plan that breaks one,
// and validate reports it at the file's position when the file names the
// driver.
type Constraints struct {
	// MountsAtSource: extra mounts appear at their host path inside the
	// sandbox (Docker's sbx and the plugin mount paths, not targets).
	MountsAtSource bool
	// HostIPNeedsPort: a port with a host IP other than loopback needs a
	// host port (sbx's port syntax cannot say "any port on this IP").
	HostIPNeedsPort bool
	// TCPPortsOnly, when set, says why the backend publishes tcp ports
	// only.
	TCPPortsOnly string
	// Agents the backend cannot run, with why.
	Agents map[string]string
	// NoCheckpoints, when set, says why the backend cannot save or
	// restore checkpoints (template.checkpoint).
	NoCheckpoints string
	// DNSLabelNames, when set, is the longest sandbox name the backend
	// takes, and names must be DNS labels (lowercase letters, digits and
	// hyphens): the kubernetes driver names objects after the sandbox.
	DNSLabelNames int
	// BlockedBeatsAllow, when set, says why the backend cannot make an IP
	// literal of network.allow an exception to the blocked ranges that
	// cover it, as the docker driver's proxy does (on Docker's sbx, say,
	// deny rules win over allow rules).
	BlockedBeatsAllow string
	// ServicesShareEgress, when set, says why every service must say
	// egress: true: the backend runs services where they share the
	// sandbox's own way out.
	ServicesShareEgress string
	// NoDockerd, when set, says why the backend runs no dockerd service.
	NoDockerd string
	// MaxServiceName, when set, is the longest service name the backend
	// takes (it names a container after it).
	MaxServiceName int
}

// Problem is one thing a sandbox asks of a backend that the backend
// cannot do, at a field path of the file.
type Problem struct {
	Path    string
	Message string
}

// Check lists what the sandbox asks that the driver cannot do: every
// field the driver does not support that the file sets, and every
// constraint it breaks. It is pure.
func Check(sb *spec.Spec, caps Caps) []Problem {
	var ps []Problem
	unsupported := func(f Field, path string, set bool) {
		if c := caps.Of(f); set && c.Mode == Unsupported {
			ps = append(ps, Problem{Path: path, Message: c.Reason})
		}
	}
	unsupported(FieldPorts, "ports", len(sb.Ports) > 0)
	unsupported(FieldResources, "resources", sb.Resources.CPUs > 0 || sb.Resources.Memory > 0)
	unsupported(FieldPids, "resources.pids", sb.Resources.Pids > 0)
	unsupported(FieldTemplateBuild, "template.build", sb.Template.Build != nil)
	unsupported(FieldMounts, "mounts", len(sb.Mounts) > 0)
	unsupported(FieldRuntime, "docker.runtime", sb.Docker.Runtime != "")
	unsupported(FieldDockerNetworks, "docker.networks", len(sb.Docker.Networks) > 0)
	unsupported(FieldHostPorts, "network.hostPorts", len(sb.Network.HostPorts) > 0)
	for _, name := range sortedKeys(sb.Services) {
		unsupported(FieldServices, "services."+name, true)
	}
	for _, n := range sortedKeys(sb.Secrets) {
		unsupported(FieldSecretHosts, "secrets."+n+".hosts", len(sb.Secrets[n].Hosts) > 0)
		unsupported(FieldSecretFiles, "secrets."+n+".file", sb.Secrets[n].File != "")
	}
	c := caps.Constraints
	if c.BlockedBeatsAllow != "" {
		for _, h := range sb.Network.Allow {
			if ip, b, ok := BlockedLiteral(h, sb.Network.BlockCIDRs); ok {
				ps = append(ps, Problem{Path: "network.allow", Message: fmt.Sprintf("%s is inside blocked range %s, and %s: list network.blockCIDRs without that range to reach %s", h, b, c.BlockedBeatsAllow, ip)})
			}
		}
	}
	for _, name := range sortedKeys(sb.Services) {
		s, path := sb.Services[name], "services."+name
		if c.ServicesShareEgress != "" && !s.Egress {
			ps = append(ps, Problem{Path: path + ".egress", Message: "write egress: true: " + c.ServicesShareEgress})
		}
		if c.MaxServiceName > 0 && len(name) > c.MaxServiceName {
			ps = append(ps, Problem{Path: path, Message: fmt.Sprintf("the %s backend names a container after each service: a service name must be at most %d characters", caps.Driver, c.MaxServiceName)})
		}
		if c.NoDockerd != "" && s.Dockerd {
			ps = append(ps, Problem{Path: path + ".dockerd", Message: c.NoDockerd})
		}
	}
	if c.NoCheckpoints != "" && sb.Template.Checkpoint != "" {
		ps = append(ps, Problem{Path: "template.checkpoint", Message: c.NoCheckpoints})
	}
	if n := c.DNSLabelNames; n > 0 && !dnsLabel(sb.Name, n) {
		ps = append(ps, Problem{Path: "name", Message: fmt.Sprintf("the %s backend names objects after the sandbox: the name must be at most %d lowercase letters, digits and hyphens", caps.Driver, n)})
	}
	if why, ok := c.Agents[sb.Agent]; ok {
		ps = append(ps, Problem{Path: "agent", Message: why})
	}
	if c.MountsAtSource {
		for i, m := range sb.Mounts {
			if m.Target != m.Source {
				ps = append(ps, Problem{Path: fmt.Sprintf("mounts[%d]", i),
					Message: fmt.Sprintf("the %s backend mounts extra paths at the same path as on the host; set the target to %s", caps.Driver, m.Source)})
			}
		}
	}
	if c.TCPPortsOnly != "" {
		for i, p := range sb.Ports {
			if p.Protocol != "tcp" {
				ps = append(ps, Problem{Path: fmt.Sprintf("ports[%d]", i),
					Message: fmt.Sprintf("%s cannot be published: %s", PortString(p), c.TCPPortsOnly)})
			}
		}
	}
	if c.HostIPNeedsPort {
		for i, p := range sb.Ports {
			if p.HostIP != "" && p.HostPort == 0 && p.HostIP != "127.0.0.1" && p.HostIP != "::1" {
				ps = append(ps, Problem{Path: fmt.Sprintf("ports[%d]", i),
					Message: fmt.Sprintf("the %s backend needs a host port with a host IP (HOST_IP:HOST_PORT:PORT)", caps.Driver)})
			}
		}
	}
	sort.SliceStable(ps, func(i, j int) bool { return ps[i].Path < ps[j].Path })
	return ps
}

// dnsLabel reports whether name is a DNS label (RFC 1123, as Kubernetes
// names objects) of at most max characters.
func dnsLabel(name string, max int) bool {
	if name == "" || len(name) > max || name[0] == '-' || name[len(name)-1] == '-' {
		return false
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-') {
			return false
		}
	}
	return true
}

// BlockedLiteral reports whether an allow entry is an IP literal that a
// blocked range covers, and which range: on the docker driver, an
// exception its proxy dials exactly.
func BlockedLiteral(allow string, blocked []netip.Prefix) (netip.Addr, netip.Prefix, bool) {
	h, err := spec.ParseHost(allow)
	if err != nil || !h.IP.IsValid() {
		return netip.Addr{}, netip.Prefix{}, false
	}
	ip := h.IP.Unmap()
	for _, b := range blocked {
		if b.Contains(ip) {
			return ip, b, true
		}
	}
	return netip.Addr{}, netip.Prefix{}, false
}
