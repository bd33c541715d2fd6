// Package docker is the driver for plain Docker Engine (Linux, CI): the
// sandbox is a container with no network interface but loopback, whose only
// way out is sbx's egress proxy in a sibling container, reached through a
// Unix socket on a shared volume. The policy lives on a volume only the
// proxy mounts. Everything sbx creates carries sbx's labels, and destroy
// removes exactly that.
//
// Building, pulling, exec and logs go through the docker CLI; creating,
// and what plan, an in-place change and removal need (inspect, the
// proxy's control channel, deleting), go to the Engine API of the same
// daemon (see engine).
package docker

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sbxhq/sbx/checkpoint"
	"github.com/sbxhq/sbx/driver"
	"github.com/sbxhq/sbx/driver/buildctx"
	"github.com/sbxhq/sbx/driver/cliutil"
	"github.com/sbxhq/sbx/driver/runner"
	"github.com/sbxhq/sbx/egress"
	"github.com/sbxhq/sbx/netlog"
	"github.com/sbxhq/sbx/reconcile"
	"github.com/sbxhq/sbx/spec"
)

// Labels on everything the driver creates, beside driver's shared ones.
const (
	labelWS = "dev.sbx.workspace"
	// labelHardening is the version of the safeguards the container was
	// made with (Hardening); labelProtect says whether its
	// declaration is mounted read-only inside it.
	labelHardening = "dev.sbx.hardening"
	labelProtect   = "dev.sbx.protect"
	// labelProtected lists (JSON) the paths mounted read-only to protect
	// the declaration, so observing tells them from the file's mounts.
	labelProtected = "dev.sbx.protected"
	// labelUser is the user the file declared ("" for the template's
	// own): Docker fills Config.User from the image's USER when create
	// names none, so Config.User alone cannot tell "the template's
	// user" from a user the file named.
	labelUser = "dev.sbx.user"
)

// Paths inside the containers.
const (
	helperPath = "/.sbx/sbx"       // sbx's static binary in the sandbox
	socketDir  = "/run/sbx-egress" // the shared socket volume
	socketPath = socketDir + "/egress.sock"
	policyPath = "/policy/policy.json" // in the egress container only
)

// Options configure the driver.
type Options struct {
	Runner *runner.Runner
	// Docker is the docker CLI.
	Docker string
	// Binary is a static Linux build of sbx: the egress proxy's image and
	// the sandbox's init and bridge.
	Binary string
}

// Driver is the docker driver.
type Driver struct {
	opts Options
	// egressTag is the proxy image known to exist.
	egressTag string
	// pruneAfter is pruneAfter, but in tests.
	pruneAfter time.Duration
	api        *engine
	// daemon is what the driver read of the daemon's GET /info, asked
	// once (daemonInfo).
	daemon struct {
		sync.Mutex
		info *daemonInfo
	}

	mu sync.Mutex // guards networks and specs
	// networks are each sandbox's docker.networks (Configure).
	networks map[string][]string
	// specs are the sandboxes sbx was given (Configure), whose
	// declarations each protects from the others.
	specs []*spec.Spec
}

var (
	_ driver.Backend        = (*Driver)(nil)
	_ driver.Execer         = (*Driver)(nil)
	_ driver.NetLogger      = (*Driver)(nil)
	_ driver.EgressCounter  = (*Driver)(nil)
	_ driver.Helper         = (*Driver)(nil)
	_ driver.RuntimeChecker = (*Driver)(nil)
	_ driver.Configurer     = (*Driver)(nil)
	_ driver.Unprotecter    = (*Driver)(nil)
)

// New returns a docker driver.
func New(opts Options) *Driver {
	if opts.Runner == nil {
		opts.Runner = &runner.Runner{}
	}
	if opts.Docker == "" {
		opts.Docker = "docker"
	}
	return &Driver{opts: opts, api: &engine{run: opts.Runner, docker: opts.Docker}, pruneAfter: pruneAfter}
}

// Name is the driver's name in sandbox.yaml.
func (d *Driver) Name() string { return "docker" }

// Caps is the docker driver's table of what changes in place.
func (d *Driver) Caps() reconcile.Caps { return Capabilities() }

// Executable is the docker CLI.
func (d *Driver) Executable() string { return d.opts.Docker }

// SandboxHelper is where sbx's own binary is inside a sandbox.
func (d *Driver) SandboxHelper() string { return helperPath }

func (d *Driver) docker(ctx context.Context, args ...string) ([]byte, error) {
	return d.opts.Runner.Output(ctx, append([]string{d.opts.Docker}, args...)...)
}

// Identify asks the daemon its version; it fails when no daemon answers,
// or when sbx is not a static Linux build, which the containers need (the
// proxy's image and the sandbox's init are this binary).
func (d *Driver) Identify(ctx context.Context) (driver.Identity, error) {
	out, err := d.docker(ctx, "version", "--format", "{{.Server.Version}}")
	if err != nil {
		return driver.Identity{}, fmt.Errorf("cannot reach a Docker daemon: %v", err)
	}
	if err := driver.CheckStatic(d.opts.Binary); err != nil {
		return driver.Identity{}, err
	}
	return driver.Identity{Version: "engine " + strings.TrimSpace(string(out))}, nil
}

// Use does nothing: no behaviour of the driver depends on the daemon's
// version.
func (d *Driver) Use(driver.Identity) {}

// BuildHash fingerprints a template's build context.
func (d *Driver) BuildHash(sp *spec.Spec) (string, error) {
	if sp.Template.Build == nil {
		return "", nil
	}
	return buildctx.Hash(sp.Template.Build)
}

// ContainerName is the Docker container that is sandbox name.
func ContainerName(name string) string { return "sbx-" + name }

// EgressName is the container of sandbox name's egress proxy.
func EgressName(name string) string { return "sbx-" + name + "-egress" }
func volumeName(name, role string) string {
	return "sbx-" + name + "-" + role
}

// templateImage is the image a sandbox runs: the template's image, or the
// tag sbx gives a built template (named by its content hash).
func templateImage(sp *spec.Spec, hash string) string {
	if sp.Template.Checkpoint != "" {
		return checkpoint.Ref(sp.Template.Checkpoint)
	}
	if sp.Template.Image != "" {
		return sp.Template.Image
	}
	h := strings.TrimPrefix(hash, "sha256:")
	if len(h) > 12 {
		h = h[:12]
	}
	return "sbx-template-" + strings.ToLower(sp.Name) + ":" + h
}

// inspect is the part of a container's inspection the driver reads.
type inspect struct {
	ID     string
	Name   string
	Config struct {
		Image     string
		User      string
		Env       []string
		Labels    map[string]string
		OpenStdin bool
		StdinOnce bool
	}
	State struct {
		Status     string
		Running    bool
		Restarting bool
	}
	RestartCount int
	HostConfig   struct {
		Runtime     string
		NanoCpus    int64
		Memory      int64
		PidsLimit   *int64
		SecurityOpt []string
	}
	Mounts []struct {
		Type        string
		Name        string // a volume's
		Source      string
		Destination string
		RW          bool
	}
	// NetworkSettings.Networks are the networks the container is on, by
	// name (Engine API v1.41 "NetworkSettings").
	// NetworkSettings.Ports are the host addresses Docker published each
	// port on ("3000/tcp": [{HostIp, HostPort}]).
	NetworkSettings struct {
		Networks map[string]struct{}
		Ports    map[string][]portBinding
	}
}

// Observe inspects each declared sandbox's container and asks its proxy
// the policy in force, and inspects its ports' forwarder, its host relay
// and its services: five to seven Engine API requests per sandbox, one
// per network of its docker.networks (Configure), which must exist, and
// one for the runtimes when it has a dockerd service (runtimeProblems).
func (d *Driver) Observe(ctx context.Context, names []string) (map[string]*reconcile.Live, error) {
	live := map[string]*reconcile.Live{}
	for _, name := range names {
		problems, err := d.networkProblems(ctx, name)
		if err != nil {
			return nil, err
		}
		rtProblems, err := d.runtimeProblems(ctx, name)
		if err != nil {
			return nil, err
		}
		problems = append(problems, rtProblems...)
		in, err := d.api.inspectContainer(ctx, ContainerName(name))
		if err != nil {
			return nil, err
		}
		if in == nil {
			if len(problems) > 0 {
				live[name] = &reconcile.Live{Name: name, Problems: problems}
			}
			continue
		}
		l := &reconcile.Live{Name: name, Exists: true, Status: in.State.Status, Template: in.Config.Image, User: observedUser(in)}
		if !ours(in, name) {
			// A same-named container sbx did not create: the plan refuses
			// it without --adopt, and with it the remove step removes it
			// (and a proxy's namesake), by the ids seen here.
			foreign := []string{in.ID}
			eg, err := d.api.inspectContainer(ctx, EgressName(name))
			if err != nil {
				return nil, err
			}
			if eg != nil && !ours(eg, name) {
				foreign = append(foreign, eg.ID)
			}
			l.Detail = &observed{foreign: foreign}
			live[name] = l
			continue
		}
		l.Managed, l.Problems = true, problems
		if strings.HasPrefix(l.Template, "sbx-template-"+strings.ToLower(name)+":") {
			// A template sbx built and tagged by content: the file names no
			// image; the build hash in the record tracks it.
			l.Template = ""
		}
		if cp := in.Config.Labels[LabelCheckpoint]; cp != "" {
			// Made from a checkpoint: the file names it, not an image.
			l.Checkpoint, l.Template = cp, ""
		}
		l.Agent = in.Config.Labels["dev.sbx.agent"]
		if rec := in.Config.Labels[driver.LabelRecord]; rec != "" {
			var r reconcile.Record
			if err := json.Unmarshal([]byte(rec), &r); err == nil {
				l.Record = &r
			}
		}
		ws := in.Config.Labels[labelWS]
		protected := map[string]bool{}
		if in.Config.Labels[labelProtect] == "true" {
			for _, p := range protectedPaths(in) {
				protected[p] = true
			}
		}
		for _, m := range in.Mounts {
			switch {
			case m.Type != "bind" || m.Destination == helperPath || (protected[m.Destination] && !m.RW):
			case m.Destination == ws:
				l.Workspace = spec.Workspace{Path: m.Source, ReadOnly: !m.RW}
			default:
				l.Mounts = append(l.Mounts, spec.Mount{Source: m.Source, Target: m.Destination, ReadOnly: !m.RW})
			}
		}
		sort.Slice(l.Mounts, func(i, j int) bool { return l.Mounts[i].Target < l.Mounts[j].Target })
		l.Resources = spec.Resources{CPUs: float64(in.HostConfig.NanoCpus) / 1e9, Memory: in.HostConfig.Memory}
		if p := in.HostConfig.PidsLimit; p != nil && *p > 0 {
			l.Resources.Pids = int(*p)
		}
		if l.Runtime, l.DefaultRuntime, err = d.runtimeOf(ctx, in); err != nil {
			return nil, err
		}
		for _, o := range in.HostConfig.SecurityOpt {
			if o == "no-new-privileges" || o == "no-new-privileges:true" || o == "no-new-privileges=true" {
				l.NoNewPrivileges = true
			}
		}
		l.Protect = in.Config.Labels[labelProtect] == "true"
		if lost := lostProtection(in.Config.Labels); len(lost) > 0 {
			// Bound no more: as good as unprotected, and said why.
			l.Protect = false
			l.Notes = append(l.Notes, lost...)
		}
		l.Hardening = in.Config.Labels[labelHardening]
		pol, eg, err := d.readPolicy(ctx, name)
		if err != nil {
			return nil, err
		}
		if pol != nil {
			l.Network = reconcile.LiveNetwork{Policy: pol.Default, Allow: pol.Allow, Deny: pol.Deny, BlockCIDRs: pol.BlockCIDRs}
			relay, err := d.api.inspectContainer(ctx, HostRelayName(name))
			if err != nil {
				return nil, err
			}
			if l.Network.HostPorts, err = observeHostPorts(pol.HostPorts, relay, in.State.Running); err != nil {
				return nil, err
			}
		}
		if eg != nil {
			l.DockerNetworks = joined(eg)
		}
		switch {
		case eg == nil:
			l.Missing = []string{"egress container"}
			l.Stopped = !in.State.Running
		case !in.State.Running:
			l.Stopped = true
		case !eg.State.Running:
			// The sandbox without its proxy has no way out at all; it
			// is as good as stopped, and docker start fixes it.
			l.Stopped = true
			l.Status = "running, its egress proxy " + eg.State.Status
		}
		if l.Record != nil && len(l.Record.Config.Services) > 0 {
			// Its services are part of it: one gone is made again, one
			// stopped makes it as good as stopped.
			missing, stopped, err := d.observeServices(ctx, name, serviceNames(l.Record.Config.Services))
			if err != nil {
				return nil, err
			}
			l.Missing = append(l.Missing, missing...)
			if len(stopped) > 0 && in.State.Running {
				l.Stopped = true
				l.Status = "running, its service " + strings.Join(stopped, ", ") + " not"
			}
		}
		fw, err := d.api.inspectContainer(ctx, PortsName(name))
		if err != nil {
			return nil, err
		}
		if l.Ports, err = observePorts(fw, in.State.Running); err != nil {
			return nil, err
		}
		l.Detail = &observed{egress: eg}
		live[name] = l
	}
	return live, nil
}

// ours reports whether sbx made the container for the sandbox name.
func ours(in *inspect, name string) bool {
	return in.Config.Labels[driver.LabelManaged] == "true" && in.Config.Labels[driver.LabelSandbox] == name
}

// observedUser is who a sandbox's processes run as, in the terms of the
// file that made it: the user it named, or "" when it named none and the
// container runs as its image's USER (which Docker copies into
// Config.User at create) or as the workspace's owner sbx chose
// (labelUserDefault). A container without sbx's user label (made by an
// earlier sbx, or not by sbx) is known by Config.User alone.
func observedUser(in *inspect) string {
	declared, ok := in.Config.Labels[labelUser]
	chosen := in.Config.Labels[labelUserDefault]
	switch {
	case !ok, declared != "" && declared != in.Config.User, declared == "" && chosen != "" && chosen != in.Config.User:
		return in.Config.User
	}
	return declared
}

// protectedPaths are the paths a sandbox container was given read-only to
// protect its declaration (labelProtected).
func protectedPaths(in *inspect) []string {
	var paths []string
	json.Unmarshal([]byte(in.Config.Labels[labelProtected]), &paths)
	return paths
}

// controllable reports whether an egress container answers on its
// control channel: it runs, with stdin open (created so by this sbx; an
// earlier one made proxies that only reload their file on SIGHUP).
func controllable(eg *inspect) bool {
	return eg.State.Running && eg.Config.OpenStdin && !eg.Config.StdinOnce
}

// readPolicy returns the policy a sandbox's proxy enforces, as the proxy
// itself reports it; for a stopped proxy, or one without a control
// channel, the policy file it loads. Both are nil when there is no proxy;
// eg is the proxy's inspection.
func (d *Driver) readPolicy(ctx context.Context, name string) (pol *egress.Policy, eg *inspect, err error) {
	eg, err = d.api.inspectContainer(ctx, EgressName(name))
	if err != nil || eg == nil {
		return nil, nil, err
	}
	if controllable(eg) {
		rep, err := d.api.control(ctx, EgressName(name), egress.ControlRequest{Op: "policy"})
		if err != nil {
			return nil, nil, err
		}
		if rep.Error != "" || rep.Policy == nil {
			return nil, nil, fmt.Errorf("the egress proxy of %q did not say its policy: %s", name, rep.Error)
		}
		return rep.Policy, eg, nil
	}
	data, err := d.api.readFile(ctx, EgressName(name), policyPath)
	if err != nil || data == nil {
		return nil, eg, err
	}
	var p egress.Policy
	if err := json.Unmarshal(data, &p); err != nil {
		return nil, nil, fmt.Errorf("live policy of %q: %v", name, err)
	}
	return &p, eg, nil
}

// remove deletes every object labelled as this sandbox's: the containers
// (together), then the networks and volumes they used.
func (d *Driver) remove(ctx context.Context, name string) error {
	label := driver.LabelSandbox + "=" + name
	ids, err := d.api.containersLabelled(ctx, label)
	if err != nil {
		return err
	}
	errs := make(chan error, len(ids))
	for _, id := range ids {
		go func() { errs <- d.api.removeContainer(ctx, id) }()
	}
	var failed []error
	for range ids {
		if err := <-errs; err != nil {
			failed = append(failed, err)
		}
	}
	if len(failed) > 0 {
		return errors.Join(failed...)
	}
	nets, err := d.api.networksLabelled(ctx, label)
	if err != nil {
		return err
	}
	for _, n := range nets {
		if err := d.api.removeNetwork(ctx, n); err != nil {
			return err
		}
	}
	vols, err := d.api.volumesLabelled(ctx, label)
	if err != nil {
		return err
	}
	for _, v := range vols {
		if err := d.api.removeVolume(ctx, v); err != nil {
			return err
		}
	}
	return nil
}

// egressImage builds (once per sbx binary) the proxy's image: FROM
// scratch with only the static binary. The roots it verifies upstreams
// with come with the secrets (driver.SetProxySecrets).
func (d *Driver) egressImage(ctx context.Context) (string, error) {
	if err := driver.CheckStatic(d.opts.Binary); err != nil {
		return "", err
	}
	tag, err := egressTagOf(d.opts.Binary)
	if err != nil {
		return "", err
	}
	if d.egressTag == tag {
		return tag, nil
	}
	if ok, err := d.api.imageExists(ctx, tag); err != nil {
		return "", err
	} else if ok {
		d.egressTag = tag
		return tag, nil
	}
	dir, err := os.MkdirTemp("", "sbx-egress-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(dir)
	if err := copyFile(d.opts.Binary, filepath.Join(dir, "sbx")); err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte("FROM scratch\nCOPY sbx /sbx\nENTRYPOINT [\"/sbx\"]\n"), 0o644); err != nil {
		return "", err
	}
	if _, err := d.docker(ctx, "build", "-q", "--label", driver.LabelManaged+"=true", "-t", tag, dir); err != nil {
		return "", err
	}
	d.egressTag = tag
	// The proxy images of earlier sbx binaries go; failing to remove them
	// is no reason to fail the create.
	d.pruneImages(ctx, egressRepo, tag, d.pruneAfter)
	return tag, nil
}

// egressTagOf is the proxy image's tag for an sbx binary.
func egressTagOf(binary string) (string, error) {
	h, err := driver.BinaryHash(binary)
	if err != nil {
		return "", err
	}
	return egressRepo + ":" + h, nil
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// pull fetches an image (the template, a service's) when the daemon does
// not have it, with its progress in the apply's output (a create would
// pull it silently); what names it in an error.
func (d *Driver) pull(ctx context.Context, image, what string) error {
	ok, err := d.api.imageExists(ctx, image)
	if err != nil || ok {
		return err
	}
	if err := cliutil.RunStreamed(ctx, d.opts.Runner, []string{d.opts.Docker, "pull", image}); err != nil {
		if ctx.Err() != nil {
			return err
		}
		return fmt.Errorf("%s %s is not on this machine and cannot be pulled (build it, or docker pull it where a registry is reachable): %v", what, image, err)
	}
	return nil
}

// create makes the sandbox: what a create cut short left is removed, then
// the volumes, the egress container (its policy in force from its first
// request) and the sandbox container are made and started. On failure it
// removes what it made.
func (d *Driver) create(ctx context.Context, sp *spec.Spec, rec *reconcile.Record) error {
	hash := ""
	if rec != nil {
		hash = rec.BuildHash
	}
	if sp.Template.Build != nil && hash == "" {
		var err error
		if hash, err = buildctx.Hash(sp.Template.Build); err != nil {
			return err
		}
	}
	prot, err := protect(sp, d.neighbours(sp.Name), true)
	if err != nil {
		return err
	}
	tmpl := templateImage(sp, hash)
	sandbox, err := d.sandboxContainer(sp, rec, prot, tmpl)
	if err != nil {
		return err
	}
	var seed []byte
	if prot.git {
		if seed, err = gitSeed(sp, prot.hostObjects); err != nil {
			return err
		}
	}
	// A checkpoint is a local image sbx made: never pulled.
	if sp.Template.Build == nil && sp.Template.Checkpoint == "" {
		if err := d.pull(ctx, tmpl, "template image"); err != nil {
			return err
		}
	}
	// The plan found no sandbox container: anything labelled as this
	// sandbox's is what a create cut short left behind (a proxy without
	// its sandbox, say), and would stand in the way.
	if err := d.remove(ctx, sp.Name); err != nil {
		return err
	}
	if err := d.createObjects(ctx, sp, sandbox, seed); err != nil {
		// Nothing half-made stays: the next apply starts clean (even
		// after Ctrl-C, within a bound).
		cleanup, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if rmErr := d.remove(cleanup, sp.Name); rmErr != nil {
			return fmt.Errorf("%w (and removing what was made: %v)", err, rmErr)
		}
		return err
	}
	return nil
}

// createObjects makes the volumes, then the egress container and the
// sandbox container, and starts them, through the Engine API. What does
// not depend on something else runs at the same time: the proxy's image
// is found (hashing this binary) while the volumes are made, and the two
// containers are created and started together. Neither container needs
// the other to start: the sandbox's bridge dials the proxy's socket per
// connection, waiting briefly for a proxy still starting, and nothing
// runs in the sandbox but its init until apply has verified both. Every
// call has ended when it returns, so a cleanup after a failure finds
// whatever was made.
func (d *Driver) createObjects(ctx context.Context, sp *spec.Spec, sandbox *containerSpec, gitSeed []byte) error {
	type found struct {
		image string
		err   error
	}
	image := make(chan found, 1)
	go func() {
		tag, err := d.egressImage(ctx)
		image <- found{tag, err}
	}()
	if err := d.volumes(ctx, sp.Name, sp.Services); err != nil {
		<-image
		return err
	}
	err := together(
		func() error {
			if err := d.chooseUser(ctx, sp, sandbox); err != nil {
				return err
			}
			id, err := d.api.createContainer(ctx, ContainerName(sp.Name), sandbox)
			if errNoImage(err) && sp.Template.Checkpoint != "" {
				// A checkpoint is this daemon's image or nothing: never
				// a registry's image that happens to have its name.
				return fmt.Errorf("checkpoint %q is not on this machine ('sbx checkpoint ls' lists them; 'sbx checkpoint import' loads one): %v", sp.Template.Checkpoint, err)
			}
			if errNoImage(err) {
				// As docker create does: pull a missing image, then
				// create again; say plainly when it cannot be pulled.
				if _, perr := d.docker(ctx, "pull", sandbox.Image); perr != nil {
					return fmt.Errorf("template image %s is not on this machine and cannot be pulled (build it, or docker pull it where a registry is reachable): %v", sandbox.Image, perr)
				}
				if err := d.chooseUser(ctx, sp, sandbox); err != nil {
					return err
				}
				id, err = d.api.createContainer(ctx, ContainerName(sp.Name), sandbox)
			}
			if err != nil {
				return err
			}
			if err := d.api.ensureUser(ctx, id, sandbox.User); err != nil {
				return err
			}
			if gitSeed != nil {
				if err := d.api.seedGit(ctx, id, sp.Workspace.Path, gitSeed); err != nil {
					return err
				}
			}
			return d.api.startContainer(ctx, id)
		},
		func() error {
			eg := <-image
			if eg.err != nil {
				return eg.err
			}
			pol, err := d.policy(ctx, sp)
			if err != nil {
				return err
			}
			return d.startEgress(ctx, sp, eg.image, pol, false)
		},
	)
	if err != nil {
		return err
	}
	if len(sp.Network.HostPorts) > 0 {
		if err := d.setHostRelay(ctx, sp); err != nil {
			return err
		}
	}
	if err := d.startServices(ctx, sp); err != nil {
		return err
	}
	if len(sp.Ports) > 0 {
		return d.setPorts(ctx, sp)
	}
	return nil
}

// together runs fns at the same time, waits for all of them whatever each
// returns, and joins their errors.
func together(fns ...func() error) error {
	errs := make([]error, len(fns))
	var wg sync.WaitGroup
	for i, f := range fns {
		wg.Go(func() { errs[i] = f() })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// labels are the labels of everything sbx creates for a sandbox.
func labels(name, role string) map[string]string {
	return map[string]string{driver.LabelManaged: "true", driver.LabelSandbox: name, driver.LabelRole: role}
}

// runtimeOf is the runtime a sandbox's container runs with, "" for the
// daemon's default, and that default's name. The daemon fills
// HostConfig.Runtime with its default when create names none (moby
// daemon/daemon_unix.go adaptContainerSettings), so the container alone
// cannot tell "the file named runc" from "the file named none": the plan
// compares the two (reconcile's liveRuntime).
func (d *Driver) runtimeOf(ctx context.Context, in *inspect) (string, string, error) {
	def, err := d.daemonDefaultRuntime(ctx)
	if err != nil {
		return "", "", err
	}
	if rt := in.HostConfig.Runtime; rt != "" && rt != def {
		return rt, def, nil
	}
	return "", def, nil
}

// daemonDefaultRuntime is the daemon's DefaultRuntime.
func (d *Driver) daemonDefaultRuntime(ctx context.Context) (string, error) {
	info, err := d.daemonInfo(ctx)
	if err != nil {
		return "", err
	}
	return info.DefaultRuntime, nil
}

// daemonInfo is the part of the daemon's GET /info the driver reads
// (Engine API v1.41 SystemInfo: DefaultRuntime, and Runtimes with each
// runtime's "path"), asked once per driver.
type daemonInfo struct {
	DefaultRuntime string
	Runtimes       map[string]struct {
		Path string `json:"path"`
	}
}

func (d *Driver) daemonInfo(ctx context.Context) (*daemonInfo, error) {
	d.daemon.Lock()
	defer d.daemon.Unlock()
	if d.daemon.info != nil {
		return d.daemon.info, nil
	}
	data, err := d.api.do(ctx, http.MethodGet, "/info", nil, nil, "")
	if err != nil {
		return nil, err
	}
	var info daemonInfo
	if err := json.Unmarshal(data, &info); err != nil {
		return nil, fmt.Errorf("reading the daemon's /info: %v", err)
	}
	if info.DefaultRuntime == "" {
		info.DefaultRuntime = "runc" // Docker's built-in default
	}
	d.daemon.info = &info
	return &info, nil
}

// sandboxContainer is the sandbox's container: no network but loopback,
// sbx's static binary as its init and egress bridge, the workspace and
// mounts with the declaration's protection on top, the safeguards, the
// limits and the env of the file, and labels that say what it was made
// from.
func (d *Driver) sandboxContainer(sp *spec.Spec, rec *reconcile.Record, prot *protection, tmpl string) (*containerSpec, error) {
	protected, err := json.Marshal(prot.paths)
	if err != nil {
		return nil, err
	}
	identity, err := recordIdentities(sp, prot)
	if err != nil {
		return nil, err
	}
	c := &containerSpec{
		Hostname:   sp.Name,
		Entrypoint: []string{helperPath},
		Image:      tmpl,
		Cmd:        []string{"__sandbox-init", "--socket", socketPath, "--ports-socket", portsSocket},
		WorkingDir: sp.Workspace.Path,
		Labels:     labels(sp.Name, "sandbox"),
		HostConfig: hostConfig{NetworkMode: "none", RestartPolicy: restartPolicy{Name: "unless-stopped"}, Runtime: sp.Docker.Runtime},
	}
	c.Labels["dev.sbx.agent"] = sp.Agent
	c.Labels[labelWS] = sp.Workspace.Path
	c.Labels[labelHardening] = Hardening
	c.Labels[labelProtect] = strconv.FormatBool(sp.Protect)
	c.Labels[labelProtected] = string(protected)
	c.Labels[labelIdentity] = identity
	// Always set, so that a checkpoint image's own label never shows
	// through; the record label likewise (checkpoint images have it
	// emptied, imported ones removed).
	c.Labels[LabelCheckpoint] = sp.Template.Checkpoint
	c.Labels[driver.LabelRecord] = ""
	c.Labels[driver.LabelOwner], c.Labels[driver.LabelOwnerWorkspace] = "", ""
	if rec != nil {
		data, err := json.Marshal(rec)
		if err != nil {
			return nil, err
		}
		c.Labels[driver.LabelRecord] = string(data)
		c.Labels[driver.LabelOwner], c.Labels[driver.LabelOwnerWorkspace] = rec.Owner.User, rec.Owner.Workspace
	}
	c.User = sp.User
	c.Labels[labelUser] = sp.User
	h := &c.HostConfig
	flags, hosts := serviceFlags(sp)
	c.Cmd = append(c.Cmd, flags...)
	h.ExtraHosts = hosts
	h.Binds = []string{
		d.opts.Binary + ":" + helperPath + ":ro",
		volumeName(sp.Name, "sock") + ":" + socketDir + ":ro",
		volumeName(sp.Name, "ports") + ":" + portsDir + ":ro",
		bind(sp.Workspace.Path, sp.Workspace.Path, sp.Workspace.ReadOnly),
	}
	for _, m := range sp.Mounts {
		h.Binds = append(h.Binds, bind(m.Source, m.Target, m.ReadOnly))
	}
	// Binds over the workspace come after it, so they lie on top.
	h.Binds = append(h.Binds, prot.binds...)
	sandboxHardening(h)
	if sp.Docker.NoNewPrivileges {
		h.SecurityOpt = append(h.SecurityOpt, "no-new-privileges")
	}
	if err := setResources(h, sp); err != nil {
		return nil, err
	}
	// The file's env first, then the proxy's address, as docker create
	// orders --env-file before -e.
	for _, k := range cliutil.SortedKeys(sp.Env) {
		c.Env = append(c.Env, k+"="+sp.Env[k])
	}
	if svc := sp.Dockerd(); svc != "" {
		if _, set := sp.Env["DOCKER_HOST"]; !set {
			c.Env = append(c.Env, "DOCKER_HOST=tcp://"+svc+":"+strconv.Itoa(spec.DockerdPort))
		}
	}
	// The services' names are the sandbox's own loopback: a client goes
	// there directly (the docker CLI's attach, which an HTTP proxy would
	// not carry, among them).
	c.Env = append(c.Env, driver.ProxyEnv(serviceNames(sp.Services)...)...)
	return c, nil
}

// The safeguards every container gets (Hardening names their version;
// change both together). The proxy needs no capability at all: it binds a
// socket on its own volume and dials out. The sandbox keeps what agents
// use (installing packages as root: chown, file ownership and modes,
// setuid/setgid to drop to a package manager's user; kill; binding low
// ports on its loopback) and loses what they do not: raw sockets, device
// nodes, audit writes, file capabilities, chroot.
//
// proxyHardening sets them on the proxy's container: --read-only
// --cap-drop ALL --security-opt no-new-privileges --pids-limit 128
// --memory 128m --memory-swap 128m -e GOMEMLIMIT=96MiB --log-driver
// json-file --log-opt max-size=10m --log-opt max-file=3.
func proxyHardening(c *containerSpec) {
	h := &c.HostConfig
	h.ReadonlyRootfs = true
	h.CapDrop = []string{"ALL"}
	h.SecurityOpt = []string{"no-new-privileges"}
	pids := int64(128)
	h.PidsLimit = &pids
	h.Memory, h.MemorySwap = 128<<20, 128<<20
	c.Env = append(c.Env, "GOMEMLIMIT=96MiB")
	h.LogConfig = logConfig{Type: "json-file", Config: map[string]string{"max-size": "10m", "max-file": "3"}}
}

// sandboxHardening sets them on the sandbox's container: --cap-drop
// NET_RAW, MKNOD, AUDIT_WRITE, SETFCAP and SYS_CHROOT (named and sorted as
// the docker CLI sends them), --log-driver json-file --log-opt
// max-size=10m --log-opt max-file=2.
func sandboxHardening(h *hostConfig) {
	h.CapDrop = []string{"CAP_AUDIT_WRITE", "CAP_MKNOD", "CAP_NET_RAW", "CAP_SETFCAP", "CAP_SYS_CHROOT"}
	h.LogConfig = logConfig{Type: "json-file", Config: map[string]string{"max-size": "10m", "max-file": "2"}}
}

// limits are the sandbox's limits: the file's, else the driver's default
// memory and process count (reconcile.DockerCaps), with no swap beyond
// the memory. cpus is as the file writes it ("" for no limit).
func limits(sp *spec.Spec) (pids int64, cpus string, memory int64) {
	pids = int64(sp.Resources.Pids)
	if pids == 0 {
		pids = DefaultPids
	}
	if sp.Resources.CPUs > 0 {
		cpus = strconv.FormatFloat(sp.Resources.CPUs, 'f', -1, 64)
	}
	memory = sp.Resources.Memory
	if memory == 0 {
		memory = DefaultMemory
	}
	return pids, cpus, memory
}

// resourceArgs are the limits as `docker update` flags.
func resourceArgs(sp *spec.Spec) []string {
	pids, cpus, mem := limits(sp)
	args := []string{"--pids-limit", strconv.FormatInt(pids, 10)}
	if cpus != "" {
		args = append(args, "--cpus", cpus)
	}
	m := strconv.FormatInt(mem, 10)
	return append(args, "--memory", m, "--memory-swap", m)
}

// setResources sets the limits on a container create, as resourceArgs
// would on the command line: --cpus in billionths of a CPU, exactly as
// the docker CLI computes it (a value finer than that is refused).
func setResources(h *hostConfig, sp *spec.Spec) error {
	pids, cpus, mem := limits(sp)
	h.PidsLimit = &pids
	if cpus != "" {
		r, ok := new(big.Rat).SetString(cpus)
		if !ok {
			return fmt.Errorf("resources.cpus: invalid value %s", cpus)
		}
		nano := r.Mul(r, big.NewRat(1e9, 1))
		if !nano.IsInt() || !nano.Num().IsInt64() {
			return fmt.Errorf("resources.cpus: %s is more precise than a billionth of a CPU", cpus)
		}
		h.NanoCpus = nano.Num().Int64()
	}
	h.Memory, h.MemorySwap = mem, mem
	return nil
}

// startEgress creates and starts a sandbox's proxy with policy pol. The
// proxy writes it onto its volume at first start (--init-policy), unless
// the volume has a policy file already: one that outlived an earlier
// proxy (rewrite) gets pol written over it before the start. Later changes
// reach it through its control channel, its stdin kept open as `docker
// run --detach --interactive` keeps it (`docker create -i` would close it
// after the first attach). With docker.networks the container is made on
// the first (so that it gets Docker's embedded DNS) and connected to the
// others and to the default bridge (the way out a user-defined network
// may not give) before it starts.
func (d *Driver) startEgress(ctx context.Context, sp *spec.Spec, image string, policy egress.Policy, rewrite bool) error {
	pol, err := json.Marshal(policy)
	if err != nil {
		return err
	}
	mode, connect := "default", []string(nil)
	if nets := sp.Docker.Networks; len(nets) > 0 {
		mode, connect = nets[0], append(slices.Clone(nets[1:]), defaultBridge)
	}
	binds := []string{volumeName(sp.Name, "sock") + ":" + socketDir, volumeName(sp.Name, "policy") + ":/policy",
		volumeName(sp.Name, "host") + ":" + hostRelayDir + ":ro"}
	cmd := []string{"__egress-proxy", "--policy", policyPath, "--init-policy", string(pol), "--control", "--listen", "unix:" + socketPath,
		"--host-relay", hostRelaySocket}
	if len(sp.Services) > 0 {
		cmd = append(cmd, "--services", servicesDir)
		for _, svc := range serviceNames(sp.Services) {
			binds = append(binds, serviceVolume(sp.Name, svc)+":"+servicesDir+"/"+svc)
		}
	}
	c := &containerSpec{
		Image: image,
		// Decisions go to the container's log (docker logs), which is
		// cheap to read from the host.
		Cmd:       cmd,
		Labels:    labels(sp.Name, "egress"),
		OpenStdin: true,
		HostConfig: hostConfig{
			Binds:         binds,
			NetworkMode:   mode,
			RestartPolicy: restartPolicy{Name: "unless-stopped"},
		},
	}
	// One scheduler thread: waking another thread was most of the
	// proxy's per-request latency; the copying of tunnels happens in the
	// kernel either way.
	sidecarHardening(c)
	id, err := d.api.createContainer(ctx, EgressName(sp.Name), c)
	if errNoImage(err) {
		// Another sbx removed the image, unused, since this one found it
		// (pruneImages): build it again.
		d.egressTag = ""
		if c.Image, err = d.egressImage(ctx); err != nil {
			return err
		}
		id, err = d.api.createContainer(ctx, EgressName(sp.Name), c)
	}
	if err != nil {
		return err
	}
	for _, n := range connect {
		if err := d.api.connectNetwork(ctx, n, id); err != nil {
			return err
		}
	}
	if rewrite {
		if err := d.api.writeFile(ctx, id, filepath.Dir(policyPath), filepath.Base(policyPath), pol, 0o644); err != nil {
			return err
		}
	}
	return d.api.startContainer(ctx, id)
}

// volumes creates the sandbox's volumes (together) that do not exist,
// with those of its services' sockets.
func (d *Driver) volumes(ctx context.Context, name string, services map[string]spec.Service) error {
	// The socket's volume is a small tmpfs: the proxy writes only its
	// socket there, and the sandbox mounts it read-only, so neither can
	// fill the host's disk with it.
	sock := socketVolume(volumeName(name, "sock"), labels(name, "sock-volume"), 64)
	policy := &volumeSpec{Name: volumeName(name, "policy"), Driver: "local", Labels: labels(name, "policy-volume")}
	// The published ports' forwarder's socket (ports.go) and the host
	// relay's (hostports.go), likewise.
	ports := socketVolume(volumeName(name, "ports"), labels(name, "ports-volume"), 16)
	host := socketVolume(volumeName(name, "host"), labels(name, "host-volume"), 16)
	// The sandbox's own git directory (git.go), made whether or not it
	// is mounted: an unused volume costs nothing.
	git := &volumeSpec{Name: volumeName(name, gitRole), Driver: "local", Labels: labels(name, gitRole+"-volume")}
	fns := []func() error{
		func() error { return d.api.createVolume(ctx, sock) },
		func() error { return d.api.createVolume(ctx, policy) },
		func() error { return d.api.createVolume(ctx, git) },
		func() error { return d.api.createVolume(ctx, ports) },
		func() error { return d.api.createVolume(ctx, host) },
	}
	for _, svc := range serviceNames(services) {
		v := socketVolume(serviceVolume(name, svc), labels(name, "service-volume"), 16)
		fns = append(fns, func() error { return d.api.createVolume(ctx, v) })
	}
	return together(fns...)
}

// socketVolume is a volume for a Unix socket: a 1 MiB tmpfs of at most
// inodes files.
func socketVolume(name string, labels map[string]string, inodes int) *volumeSpec {
	return &volumeSpec{Name: name, Driver: "local", Labels: labels,
		DriverOpts: map[string]string{"type": "tmpfs", "device": "tmpfs", "o": fmt.Sprintf("size=1m,nr_inodes=%d,mode=0755", inodes)}}
}

// recreateEgress starts a new proxy for a sandbox whose proxy is gone,
// with the policy of sandbox.yaml (written over what an earlier proxy
// left on the policy volume), making its volumes again if they went too
// (a volume create keeps an existing one). The sandbox's bridge dials the
// socket per connection, so it reaches the new proxy.
func (d *Driver) recreateEgress(ctx context.Context, sp *spec.Spec) error {
	image, err := d.egressImage(ctx)
	if err != nil {
		return err
	}
	pol, err := d.policy(ctx, sp)
	if err != nil {
		return err
	}
	if err := d.volumes(ctx, sp.Name, sp.Services); err != nil {
		return err
	}
	return d.startEgress(ctx, sp, image, pol, true)
}

func bind(src, dst string, ro bool) string {
	s := src + ":" + dst
	if ro {
		s += ":ro"
	}
	return s
}

// Exec runs argv in the sandbox. Without a terminal it goes through the
// Engine API (engine.exec), which spares the CLI process `docker exec`
// costs each time (most of a loop iteration's overhead, BENCHMARKS.md);
// with one (-t: sbx shell on a terminal) it is `docker exec`, which knows
// how to drive a terminal. Secrets go as -e NAME with the value only in
// the docker CLI's environment, or in the API request's body.
func (d *Driver) Exec(ctx context.Context, name string, argv []string, o driver.ExecOptions) (int, error) {
	if !o.TTY {
		return d.api.exec(ctx, ContainerName(name), argv, o)
	}
	flags, env := cliutil.ExecArgs(o)
	args := append(append(append([]string{d.opts.Docker, "exec"}, flags...), ContainerName(name)), argv...)
	return cliutil.ExitCode(d.opts.Runner.Run(ctx, runner.Cmd{Args: args, Env: env, Stdin: o.Stdin, Stdout: o.Stdout, Stderr: o.Stderr}))
}

// readLog returns the proxy's decision lines (its container log), those
// since a time when since is not zero.
func (d *Driver) readLog(ctx context.Context, name string, since time.Time) ([]string, error) {
	var lines []string
	err := d.api.logLines(ctx, EgressName(name), since, func(l []byte) {
		if bytes.Contains(l, []byte(`"decision"`)) {
			lines = append(lines, string(l))
		}
	})
	return lines, err
}

// NetLog reads the proxy's decisions; with follow it keeps reading new
// ones until ctx ends.
func (d *Driver) NetLog(ctx context.Context, name string, follow bool, emit func(netlog.Entry) error) error {
	return egress.FollowLog(ctx, func(ctx context.Context) ([]string, error) { return d.readLog(ctx, name, time.Time{}) }, follow, emit)
}

// EgressCount counts what the proxy denied, and what failed upstream,
// in [since, until].
func (d *Driver) EgressCount(ctx context.Context, name string, since, until time.Time, max int) (netlog.Count, error) {
	var c netlog.Count
	err := d.api.logLines(ctx, EgressName(name), since, func(l []byte) {
		if p, ok := egress.Problem(l, since, until); ok {
			c.Add(p, max)
		}
	})
	return c, err
}

// RuntimeCheck says whether the daemon has gVisor's runsc runtime, and how
// to add it.
func (d *Driver) RuntimeCheck(ctx context.Context) (bool, string) {
	out, err := d.docker(ctx, "info", "--format", "{{json .Runtimes}}")
	if err != nil {
		return false, err.Error()
	}
	var rts map[string]any
	json.Unmarshal(out, &rts)
	if _, ok := rts["runsc"]; ok {
		return true, ""
	}
	return false, `add to /etc/docker/daemon.json and restart dockerd:
  {"runtimes": {"runsc": {"path": "/usr/bin/runsc", "runtimeArgs": ["--network=none", "--host-uds=open"]}}}
(Debian/Ubuntu: apt-get install runsc)`
}
