package reconcile

import (
	"strconv"

	"github.com/sbxhq/sbx/spec"
)

// Neighbour is a sandbox known on this machine (a record or an approval in
// the state directory, a sandbox the backend lists, or one of the files
// given) that may write host files: its workspace and read-write mounts.
// Every sandbox that can write a path counts when sbx judges it, so a
// declaration one agent rewrote for another sandbox sharing its workspace
// is not taken for the user's own.
type Neighbour struct {
	Name string
	// Spec is what the sandbox has (its approved or recorded config).
	Spec *spec.Spec
	// Protected is set when its driver keeps its own declaration files
	// read-only inside it (Caps.Protects); its workspace.protect must be
	// on as well.
	Protected bool
}

// CanWrite reports whether the neighbour could write the host file at
// path: it lies in its read-write workspace or a read-write mount, and is
// not one of the declaration files it keeps read-only. A neighbour keeps
// only its own declaration read-only, never another sandbox's.
func (n Neighbour) CanWrite(path string) bool {
	if path == "" || n.Spec == nil || !n.Spec.Writable(path) {
		return false
	}
	if n.Protected && n.Spec.Protect {
		for _, p := range declarationPaths(n.Spec) {
			if p == path {
				return false
			}
		}
	}
	return true
}

// DefaultSpec is what a sandbox declared by d's files gets when its file
// says nothing but its name, agent and driver: no mounts, no env, no
// secrets, no ports, a deny policy with the agent's own hosts and the
// default blocked ranges, the agent's default template, the default
// runtime, the driver's default limits, the workspace the base file's
// directory, protection on. A sandbox the user never approved is measured
// from it when a sandbox could have written its declaration.
func DefaultSpec(d *spec.Spec, caps Caps) *spec.Spec {
	base := "sandbox.yaml"
	if len(d.Files) > 0 {
		base = d.Files[0]
	}
	doc := "version: 1\nname: defaults\nagent: " + strconv.Quote(d.Agent) + "\ndriver: " + strconv.Quote(d.Driver) + "\n"
	var s *spec.Spec
	if res, _ := spec.Parse(base, d.Dir, []byte(doc), spec.Options{}); res != nil && len(res.Specs) == 1 {
		s = res.Specs[0]
	} else { // an agent or driver the loader refuses: nothing widened
		s = &spec.Spec{Agent: d.Agent, Driver: d.Driver, Workspace: spec.Workspace{Path: d.Dir}, Protect: true,
			Network: spec.Network{Policy: "deny", AgentHosts: true}, Docker: spec.Docker{NoNewPrivileges: true}}
		for _, c := range spec.DefaultBlockCIDRs {
			if p, err := spec.ParseCIDR(c); err == nil {
				s.Network.BlockCIDRs = append(s.Network.BlockCIDRs, p)
			}
		}
	}
	s.Name, s.NameDerived = d.Name, d.NameDerived
	s.Files, s.Dir, s.Declarations = d.Files, d.Dir, d.Declarations
	s.Resources = caps.Defaults
	s.Origins, s.HostVars, s.Sensitive = nil, nil, nil
	return s
}
