package reconcile

import (
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"strings"

	"github.com/sbxhq/sbx/spec"
)

// Widening is one way a plan gives the sandbox more than the user last
// approved: more egress (a private address, a Docker network joined), a
// host path, a host secret or variable, a host command, a weaker runtime,
// higher limits, another template, a published port, or its declaration
// no longer protected. The agent inside may be
// hostile and may have written the file the change came from, so apply -y
// refuses a widening unless --approve-widening says the user saw it.
type Widening struct {
	// Path is the field, as diffs name it ("mounts[1]", "network.allow").
	Path string `json:"path"`
	// What says what the sandbox gains, for people.
	What string `json:"what"`
	// Origin is FILE:LINE:COL of the value that causes it ("" for a
	// driver default).
	Origin string `json:"origin,omitempty"`
	// FromSandbox is set when that file is one the sandbox could have
	// written (in its workspace or a read-write mount, and not kept
	// read-only inside it).
	FromSandbox bool `json:"from_sandbox,omitempty"`
	// Writers names, sorted, every other sandbox known on this machine
	// that could have written that file (Desired.Neighbours): a neighbour
	// sharing the workspace, or the sandbox a renamed file was approved as.
	Writers []string `json:"writers,omitempty"`
}

// String is the line the plan shows.
func (w Widening) String() string {
	s := w.What
	if w.Origin != "" {
		s += " (from " + w.Origin
		s += writersPhrase(w.FromSandbox, w.Writers)
		s += ")"
	}
	return s
}

// writersPhrase says who could have written a widening's file:
// ", a file the sandbox and sandbox a can write".
func writersPhrase(self bool, others []string) string {
	who := ""
	switch len(others) {
	case 0:
	case 1:
		who = "sandbox " + others[0]
	default:
		who = "sandboxes " + strings.Join(others, ", ")
	}
	switch {
	case self && who != "":
		return ", a file the sandbox and " + who + " can write"
	case self:
		return ", a file the sandbox can write"
	case who != "":
		return ", a file " + who + " can write"
	}
	return ""
}

// widenings compares the desired sandbox with what the user approved for
// its files (Desired.Approved: found by the declaration files' paths, never
// by the name a file gives). With no approval on record, what a declaration
// file asks for counts as widening beyond the defaults (DefaultSpec) as soon
// as any sandbox known on this machine could have written one of the
// sandbox's declaration files: a renamed or planted declaration gets
// nothing the user did not approve. Only when no sandbox could have
// written any of them (first use: no sandbox mounts that directory yet)
// are the files the user's own, and only host commands count: a command
// runs on the host and is always approved explicitly, as Docker's sbx env
// asks consent for host commands.
//
// With declared (PlanChange), d.Approved is another revision's
// declaration, or the defaults without the agent's hosts when that
// revision has none, and no file is judged by who could write it here.
func widenings(d Desired, caps Caps, declared bool) []Widening {
	w := &widener{d: d.Spec, caps: caps, buildHash: d.BuildHash, fps: d.Fingerprints, neighbours: d.Neighbours, declared: declared}
	if d.Approved != nil {
		w.base = &d.Approved.Config
		w.approved = w.base
		w.baseBuild = d.Approved.BuildHash
		w.baseFPs = d.Approved.Fingerprints
	} else if w.declarationWritable() {
		w.base = DefaultSpec(d.Spec, caps)
	}
	w.secrets()
	if w.base == nil {
		return w.out
	}
	w.network()
	w.dockerNetworks()
	w.mounts()
	w.workspace()
	w.hostVars()
	w.template()
	w.resources()
	w.ports()
	w.hostPorts()
	w.services()
	w.hardening()
	sort.SliceStable(w.out, func(i, j int) bool { return w.out[i].Path < w.out[j].Path })
	return w.out
}

type widener struct {
	// base is what d is measured from: the approved spec, the defaults,
	// or nil (only host commands count).
	d, base *spec.Spec
	// approved is the approved spec (nil when there is none).
	approved   *spec.Spec
	neighbours []Neighbour
	caps       Caps
	buildHash  string
	baseBuild  string
	fps        map[string]string
	baseFPs    map[string]string
	out        []Widening
	protectSet map[string]bool
	declared   bool
}

// applies reports whether the driver acts on a field at all.
func (w *widener) applies(f Field) bool {
	m := w.caps.Of(f).Mode
	return m != Ignored && m != Unsupported
}

func (w *widener) add(path, what string, o spec.Origin, ok bool) {
	wd := Widening{Path: path, What: what}
	if ok && w.declared {
		wd.Origin = o.String()
	} else if ok {
		wd.Origin = o.String()
		wd.FromSandbox = w.writable(o.Path)
		wd.Writers = w.neighbourWriters(o.Path)
	}
	w.out = append(w.out, wd)
}

// neighbourWriters names, sorted, the neighbours that could write the
// file at path (the planned sandbox itself aside: writable judges it).
func (w *widener) neighbourWriters(path string) []string {
	var names []string
	for _, n := range w.neighbours {
		if n.Name != w.d.Name && n.CanWrite(path) {
			names = append(names, n.Name)
		}
	}
	sort.Strings(names)
	return slices.Compact(names)
}

// declarationWritable reports whether a neighbour could have written
// one of the sandbox's declaration files (its layers and the
// sandbox.local.yaml next to its base file, present or not).
func (w *widener) declarationWritable() bool {
	paths := declarationPaths(w.d)
	for _, p := range paths {
		if len(w.neighbourWriters(p)) > 0 {
			return true
		}
	}
	return false
}

// declarationPaths are a spec's declaration files and the overlay next
// to its base file.
func declarationPaths(s *spec.Spec) []string {
	var paths []string
	for _, f := range s.Declarations {
		paths = append(paths, f.Path)
	}
	if len(s.Declarations) > 0 {
		paths = append(paths, spec.LocalPath(s.Declarations[0].Path))
	}
	return paths
}

// at records a widening at a field path, from the value's origin.
func (w *widener) at(path, what string) {
	o, ok := w.d.OriginOf(path)
	w.add(path, what, o, ok)
}

// writable reports whether the sandbox could have written the file: it is
// in the desired or the approved sandbox's writable paths, and the driver
// did not keep it read-only (it protects the approved sandbox's
// declaration files, and a sandbox.local.yaml next to its base file).
func (w *widener) writable(path string) bool {
	if path == "" || !(w.d.Writable(path) || (w.approved != nil && w.approved.Writable(path))) {
		return false
	}
	if w.caps.Protects && w.approved != nil && w.approved.Protect {
		if w.protectSet == nil {
			w.protectSet = map[string]bool{}
			for _, p := range declarationPaths(w.approved) {
				w.protectSet[p] = true
			}
		}
		return !w.protectSet[path]
	}
	return true
}

func (w *widener) secrets() {
	for _, name := range sortedKeys(w.d.Secrets) {
		sec := w.d.Secrets[name]
		path := "secrets." + name
		var old *spec.Secret
		if w.base != nil {
			if s, ok := w.base.Secrets[name]; ok {
				old = &s
			}
		}
		same := old != nil && SecretSource(*old) == SecretSource(sec)
		if sensitiveIn(w.d, path) || fingerprintsUnder(w.baseFPs, path) != "" {
			same = old != nil && fingerprintsUnder(w.fps, path) == fingerprintsUnder(w.baseFPs, path)
		}
		switch {
		case same:
		case len(sec.Command) > 0:
			w.at(path, fmt.Sprintf("secret %s runs a command on this machine: %s", name, quoteArgs(sec.Command)))
		case sec.File != "":
			w.at(path, fmt.Sprintf("secret %s reads host file %s and sends the credentials in it to %s", name, sec.File, strings.Join(sec.Hosts, ", ")))
		case w.base != nil && len(sec.Hosts) > 0:
			w.at(path, fmt.Sprintf("secret %s sends host environment variable %s to %s", name, sec.Env, strings.Join(sec.Hosts, ", ")))
		case w.base != nil:
			w.at(path, fmt.Sprintf("secret %s passes host environment variable %s into the sandbox", name, sec.Env))
		}
		if !same || old == nil {
			continue
		}
		// The same source, but the value may now go further: into the
		// sandbox, or to a host it did not go to.
		if len(old.Hosts) > 0 && len(sec.Hosts) == 0 {
			w.at(path+".hosts", fmt.Sprintf("secret %s is no longer kept out of the sandbox: the agent can read its value and send it anywhere it reaches", name))
			continue
		}
		if len(old.Hosts) == 0 {
			continue
		}
		for _, h := range sec.Hosts {
			if !slices.Contains(old.Hosts, h) {
				w.at(path+".hosts", fmt.Sprintf("secret %s may now be sent to %s", name, h))
			}
		}
	}
}

func (w *widener) network() {
	d, b := w.d.Network, w.base.Network
	if d.Policy == "allow" && b.Policy != "allow" {
		w.at("network.policy", "network.policy allow: the sandbox may reach any host")
	}
	had := map[string]bool{}
	for _, r := range b.AllowRules(w.base.Agent) {
		had[r.Host] = true
	}
	for _, r := range d.AllowRules(w.d.Agent) {
		if had[r.Host] {
			continue
		}
		what := fmt.Sprintf("egress to %s", r.Host)
		if _, b, ok := BlockedLiteral(r.Host, d.BlockCIDRs); ok {
			what += fmt.Sprintf(", a private address: an exception to blocked range %s", b)
		}
		switch src := r.Source; {
		case src == "network.allow":
			host := r.Host
			o, ok := w.d.OriginOfItem("network.allow", func(v string) bool {
				h, err := spec.ParseHost(v)
				return err == nil && h.String() == host
			})
			w.add("network.allow", what, o, ok)
		case strings.HasPrefix(src, "preset "):
			preset := strings.TrimPrefix(src, "preset ")
			o, ok := w.d.OriginOfItem("network.presets", func(v string) bool { return v == preset })
			w.add("network.presets", what+" (preset "+preset+")", o, ok)
		default: // the agent's own hosts
			path := "agent"
			if _, set := w.d.Origins["network.agentHosts"]; set && !b.AgentHosts {
				path = "network.agentHosts"
			}
			w.at(path, what+" ("+src+")")
		}
	}
	for _, h := range b.Deny {
		if !slices.Contains(d.Deny, h) {
			w.at("network.deny", fmt.Sprintf("no longer denies %s", h))
		}
	}
	for _, p := range b.BlockCIDRs {
		if !slices.Contains(d.BlockCIDRs, p) {
			w.at("network.blockCIDRs", fmt.Sprintf("may reach %s (no longer in blockCIDRs)", p))
		}
	}
}

// dockerNetworks flags each Docker network the egress proxy joins that
// it was not on: the addresses of its subnet are exceptions to the
// blocked ranges.
func (w *widener) dockerNetworks() {
	if !w.applies(FieldDockerNetworks) {
		return
	}
	for _, n := range w.d.Docker.Networks {
		if slices.Contains(w.base.Docker.Networks, n) {
			continue
		}
		o, ok := w.d.OriginOfItem("docker.networks", func(v string) bool { return v == n })
		w.add("docker.networks", fmt.Sprintf("the egress proxy joins Docker network %s: the sandbox may reach the private addresses of its containers that network.allow allows", n), o, ok)
	}
}

func (w *widener) mounts() {
	had := map[string]bool{}
	for _, m := range w.base.Mounts {
		had[mountString(m)] = true
	}
	for i, m := range w.d.Mounts {
		if had[mountString(m)] {
			continue
		}
		mode := "read-write"
		if m.ReadOnly {
			mode = "read-only"
		}
		src := m.Source
		if sensitiveIn(w.d, fmt.Sprintf("mounts[%d]", i)) {
			src = "(sensitive)"
		}
		w.at(fmt.Sprintf("mounts[%d]", i), fmt.Sprintf("host path %s mounted at %s, %s", src, m.Target, mode))
	}
}

func (w *widener) workspace() {
	d, b := w.d.Workspace, w.base.Workspace
	switch {
	case d.Path != b.Path:
		mode := "read-write"
		if d.ReadOnly {
			mode = "read-only"
		}
		w.at("workspace", fmt.Sprintf("workspace %s, %s", d.Path, mode))
	case b.ReadOnly && !d.ReadOnly:
		w.at("workspace.readOnly", fmt.Sprintf("workspace %s becomes writable", d.Path))
	}
	if w.applies(FieldProtect) && w.base.Protect && !w.d.Protect {
		w.at("workspace.protect", "the sandbox may rewrite its own declaration and write the host's .git, whose config and hooks git runs on your side (workspace.protect false)")
	}
}

// hostVars flags host environment variables a value now carries into the
// sandbox that the approved one did not (env: {X: ${AWS_SECRET_KEY}}).
func (w *widener) hostVars() {
	for _, path := range sortedKeys(w.d.HostVars) {
		var added []string
		for _, v := range w.d.HostVars[path] {
			if !slices.Contains(w.base.HostVars[path], v) {
				added = append(added, v)
			}
		}
		if len(added) == 0 {
			continue
		}
		noun := "variable"
		if len(added) > 1 {
			noun = "variables"
		}
		w.at(path, fmt.Sprintf("%s reads host environment %s %s", path, noun, strings.Join(added, ", ")))
	}
}

func (w *widener) template() {
	d, b := w.d.Template, w.base.Template
	if d.Checkpoint != "" {
		// A checkpoint is a whole filesystem, perhaps another sandbox's or
		// one imported from a file: another template.
		if d.Checkpoint != b.Checkpoint {
			w.at("template.checkpoint", "template from checkpoint "+d.Checkpoint)
		}
		return
	}
	if d.Build == nil {
		if d.Image != b.Image || b.Build != nil {
			img := d.Image
			if w.d.Sensitive["template.image"] || w.d.Sensitive["template"] {
				img = "(sensitive)"
			}
			path := "template.image"
			if _, ok := w.d.Origins[path]; !ok {
				path = "template"
			}
			w.at(path, "template image "+img)
		}
		return
	}
	switch {
	case b.Build == nil:
		w.at("template.build", "template built from "+d.Build.Context)
	case w.buildHash != w.baseBuild || d.Build.Context != b.Build.Context || d.Build.Dockerfile != b.Build.Dockerfile:
		w.at("template.build", "template build context or Dockerfile changed ("+d.Build.Context+")")
	}
	if d.Build.Network && (b.Build == nil || !b.Build.Network) {
		w.at("template.build.network", "the template build gets the Docker daemon's network")
	}
}

func (w *widener) resources() {
	if !w.applies(FieldResources) {
		return
	}
	d := effectiveResources(w.d.Resources, w.caps.Defaults)
	b := w.base.Resources
	if b.CPUs != 0 && (d.CPUs == 0 || d.CPUs > b.CPUs) {
		to := cpusString(d.CPUs)
		if to == "" {
			to = "unlimited"
		}
		w.at("resources.cpus", fmt.Sprintf("cpu limit %s → %s", cpusString(b.CPUs), to))
	}
	if w.applies(FieldPids) && b.Pids != 0 && (d.Pids == 0 || d.Pids > b.Pids) {
		to := pidsString(d.Pids)
		if to == "" {
			to = "unlimited"
		}
		w.at("resources.pids", fmt.Sprintf("process limit %d → %s", b.Pids, to))
	}
	if b.Memory != 0 && (d.Memory == 0 || d.Memory > b.Memory) {
		to := memoryString(d.Memory)
		if to == "" {
			to = "unlimited"
		}
		w.at("resources.memory", fmt.Sprintf("memory limit %s → %s", memoryString(b.Memory), to))
	}
}

func (w *widener) services() {
	if !w.applies(FieldServices) {
		return
	}
	for _, name := range sortedKeys(w.d.Services) {
		s := w.d.Services[name]
		b, ok := w.base.Services[name]
		if !ok || b.Image != s.Image {
			w.at("services."+name, "runs service image "+s.Image)
		}
		if s.Egress && !b.Egress {
			w.at("services."+name+".egress", "service "+name+" reaches what the sandbox's policy allows")
		}
		if s.Dockerd && !b.Dockerd {
			w.at("services."+name+".dockerd", "gives the agent a Docker daemon (service "+name+"), under gVisor")
		}
	}
}

func (w *widener) hostPorts() {
	if !w.applies(FieldHostPorts) {
		return
	}
	for i, p := range w.d.Network.HostPorts {
		if !slices.Contains(w.base.Network.HostPorts, p) {
			w.at(fmt.Sprintf("network.hostPorts[%d]", i), fmt.Sprintf("reaches port %d on the host's loopback (as %s:%d)", p, spec.HostAlias, p))
		}
	}
}

func (w *widener) ports() {
	if !w.applies(FieldPorts) {
		return
	}
	had := map[string]bool{}
	for _, p := range w.base.Ports {
		had[PortString(p)] = true
	}
	for i, p := range w.d.Ports {
		if had[PortString(p)] {
			continue
		}
		if ip, err := netip.ParseAddr(p.HostIP); err == nil && !ip.IsLoopback() {
			// Not the host's loopback: other machines reach it.
			w.at(fmt.Sprintf("ports[%d]", i), "publishes sandbox port "+PortString(p)+" on host address "+p.HostIP+", reachable from other machines")
			continue
		}
		w.at(fmt.Sprintf("ports[%d]", i), "publishes sandbox port "+PortString(p)+" on the host's loopback")
	}
}

func (w *widener) hardening() {
	runtime := func(s *spec.Spec) string {
		if s.Docker.Runtime == "" {
			return "runc"
		}
		return s.Docker.Runtime
	}
	if rt := runtime(w.d); w.applies(FieldRuntime) && rt != runtime(w.base) && rt != "runsc" {
		what := "runtime " + rt
		if w.base.Docker.Runtime == "runsc" {
			what += " instead of gVisor (runsc)"
		}
		w.at("docker.runtime", what)
	}
	if w.applies(FieldNoNewPrivileges) && w.base.Docker.NoNewPrivileges && !w.d.Docker.NoNewPrivileges {
		w.at("docker.noNewPrivileges", "setuid programs may raise privileges inside the sandbox (docker.noNewPrivileges false)")
	}
	if w.applies(FieldUser) && w.d.User != w.base.User && w.base.User != "" && !rootUser(w.base.User) && (w.d.User == "" || rootUser(w.d.User)) {
		what := "runs as root instead of " + w.base.User
		if w.d.User == "" {
			what = "runs as the template's own user instead of " + w.base.User + " (root for most images)"
		}
		w.at("user", what)
	}
	if w.applies(FieldKubernetes) {
		if rc, base := w.d.K8s().RuntimeClassName, w.base.K8s().RuntimeClassName; base != "" && rc != base {
			what := "RuntimeClass " + rc + " instead of " + base
			if rc == "" {
				what = "the cluster's default runtime instead of RuntimeClass " + base
			}
			w.at("kubernetes.runtimeClassName", what)
		}
	}
	if w.applies(FieldEgressMode) && w.d.K8s().Egress == spec.EgressAdvisory && w.base.K8s().Egress != spec.EgressAdvisory {
		w.at("kubernetes.egress", "kubernetes.egress advisory: the sandbox may bypass its egress proxy on a cluster that does not enforce NetworkPolicy")
	}
}

// rootUser reports whether a user: value names root (uid 0 or the name).
func rootUser(u string) bool {
	name, _, _ := strings.Cut(u, ":")
	return name == "0" || name == "root"
}

// CommandApproved reports whether the user approved the host command (or
// host file) of secret name as the files now declare it: it is what was
// last applied. An unapproved command never runs, not even to plan, and
// an unapproved file is never read.
func CommandApproved(d Desired, name string) bool {
	if d.Spec == nil || d.Approved == nil {
		return false
	}
	sec, ok := d.Spec.Secrets[name]
	if !ok || (len(sec.Command) == 0 && sec.File == "") {
		return false
	}
	old, ok := d.Approved.Config.Secrets[name]
	if !ok {
		return false
	}
	path := "secrets." + name
	if sensitiveIn(d.Spec, path) || fingerprintsUnder(d.Approved.Fingerprints, path) != "" {
		return fingerprintsUnder(d.Fingerprints, path) == fingerprintsUnder(d.Approved.Fingerprints, path)
	}
	return slices.Equal(old.Command, sec.Command) && old.File == sec.File && old.Path == sec.Path
}
