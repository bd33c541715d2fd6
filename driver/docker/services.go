package docker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sbxhq/sbx/driver"
	"github.com/sbxhq/sbx/driver/cliutil"
	"github.com/sbxhq/sbx/egress"
	"github.com/sbxhq/sbx/internal/untrusted"
	"github.com/sbxhq/sbx/reconcile"
	"github.com/sbxhq/sbx/spec"
)

// Services. A service is a container beside the sandbox with no network
// but loopback, like the sandbox: nothing reaches it but the sandbox's
// egress proxy, and it reaches nothing (a database the agent can make run
// programs gives it no way out). Its PID 1 is sbx's static binary
// (egress.ServiceInitMain), which runs the image's own command and keeps
// connections parked on a socket the proxy listens on, one tmpfs volume
// per service, mounted read-only in the service: the proxy reaches the
// service's ports over them (egress.Proxy.ServeServiceSockets). In the sandbox,
// the service's name is its own loopback (--add-host NAME:127.0.0.1), where
// its init listens on each service port and carries the connection to
// the proxy as CONNECT NAME:PORT (egress.ServeServices), which the policy
// allows for the service's ports alone.

const (
	// servicesDir holds each service's socket directory in the proxy's
	// container (egress.ServiceSocket).
	servicesDir = "/run/sbx-svc"
	// serviceDir is the service's socket directory in its container.
	serviceDir = "/run/sbx-service"
	// labelService names the service a container is.
	labelService = "dev.sbx.service"
)

// ServiceContainer is the container of sandbox name's service svc.
func ServiceContainer(name, svc string) string { return "sbx-" + name + "-svc-" + svc }

// serviceVolume is the volume of a service's socket.
func serviceVolume(name, svc string) string { return volumeName(name, "svc-"+svc) }

// serviceFlags are the sandbox init's --service flags and the hosts
// entries that name each service's loopback.
func serviceFlags(sp *spec.Spec) (flags, hosts []string) {
	for _, svc := range serviceNames(sp.Services) {
		hosts = append(hosts, svc+":127.0.0.1")
		for _, p := range sp.Services[svc].Ports {
			flags = append(flags, "--service", svc+":"+strconv.Itoa(p))
		}
	}
	return flags, hosts
}

// serviceContainer is service svc of sp: its image run by sbx's service
// init, with no network, and the sandbox's runtime, safeguards and
// limits. The image's entrypoint and command (or the file's command)
// follow the init's --.
func serviceContainer(sp *spec.Spec, svc string, img *imageInfo, binary string) *containerSpec {
	s := sp.Services[svc]
	cmd := s.Command
	if len(cmd) == 0 {
		cmd = img.Config.Cmd
	}
	c := &containerSpec{
		Hostname:   svc,
		Image:      s.Image,
		Entrypoint: append(serviceInit(s), img.Config.Entrypoint...),
		Cmd:        cmd,
		Labels:     labels(sp.Name, "service"),
		HostConfig: hostConfig{
			Binds:         []string{binary + ":" + helperPath + ":ro", serviceVolume(sp.Name, svc) + ":" + serviceDir + ":ro"},
			NetworkMode:   "none",
			RestartPolicy: restartPolicy{Name: "unless-stopped"},
			Runtime:       sp.Docker.Runtime,
			SecurityOpt:   []string{"no-new-privileges"},
		},
	}
	c.Labels[labelService] = svc
	// Keeps Cmd when empty: an image with neither entrypoint nor
	// command has nothing to run, which the init says.
	if c.Cmd == nil {
		c.Cmd = []string{}
	}
	for _, k := range cliutil.SortedKeys(s.Env) {
		c.Env = append(c.Env, k+"="+s.Env[k])
	}
	if s.Egress {
		// The sandbox's proxy, on the service's loopback (its init's
		// bridge, over the proxy's socket mounted read-only).
		c.HostConfig.Binds = append(c.HostConfig.Binds, volumeName(sp.Name, "sock")+":"+socketDir+":ro")
		c.Env = append(c.Env, driver.ProxyEnv()...)
	}
	// The sandbox's safeguards and limits: a service the agent drives
	// (a database it makes sort a huge table) is bounded as the sandbox
	// is.
	sandboxHardening(&c.HostConfig)
	if s.Dockerd {
		dockerdContainer(c, s)
	}
	pids, _, mem := limits(sp)
	c.HostConfig.PidsLimit = &pids
	c.HostConfig.Memory, c.HostConfig.MemorySwap = mem, mem
	return c
}

// dockerdContainer makes c, service s's container, a Docker daemon's
// under gVisor (which the plan checked: runtimeProblems), as gVisor's
// "Docker in gVisor" guide runs one: dockerd with sbx's flags
// (spec.DockerdArgs) in place of the image's entrypoint and command,
// every capability, and /var/lib/docker on a tmpfs (gVisor takes only a
// tmpfs as the upper layer of an overlay), with exec, where images and
// containers live. The capabilities are gVisor's kernel's, not the
// host's: the daemon, and every container it runs, privileged or not,
// sees the service's own files, loopback and processes, and the tmpfs
// counts against the service's memory limit.
func dockerdContainer(c *containerSpec, s spec.Service) {
	c.Entrypoint = append(serviceInit(s), spec.DockerdArgs...)
	c.Cmd = []string{}
	c.HostConfig.CapAdd, c.HostConfig.CapDrop = []string{"ALL"}, nil
	c.HostConfig.Tmpfs = map[string]string{"/var/lib/docker": "rw,exec"}
}

// runtimeProblems reports a dockerd service whose sandbox's runtime is
// not gVisor's on this daemon: the spec refuses runc by name, and here
// the runtime the file names must be one the daemon runs with a runsc
// binary (daemonInfo's Runtimes). Under runc, or any runtime sbx cannot tell
// is gVisor, a Docker daemon needs a privileged container on the host.
func (d *Driver) runtimeProblems(ctx context.Context, name string) ([]reconcile.Problem, error) {
	sp := d.configured(name)
	if sp == nil || sp.Dockerd() == "" {
		return nil, nil
	}
	path := "services." + sp.Dockerd() + ".dockerd"
	info, err := d.daemonInfo(ctx)
	if err != nil {
		return nil, err
	}
	rt, ok := info.Runtimes[sp.Docker.Runtime]
	switch {
	case !ok:
		return []reconcile.Problem{{Path: path, Message: fmt.Sprintf("this Docker daemon has no runtime %q (docker.runtime), which a Docker daemon of the agent's own needs: gVisor's runsc", sp.Docker.Runtime)}}, nil
	case !gvisorPath(rt.Path):
		return []reconcile.Problem{{Path: path, Message: fmt.Sprintf("docker.runtime %q runs %s, not gVisor's runsc: a Docker daemon of the agent's own runs only under gVisor (under another runtime it would need a privileged container on the host)", sp.Docker.Runtime, rt.Path)}}, nil
	}
	return nil, nil
}

// gvisorPath reports whether a runtime's path names gVisor's runsc.
func gvisorPath(p string) bool {
	return strings.HasPrefix(filepath.Base(p), "runsc")
}

// serviceInit is a service's init and its flags, up to the --.
func serviceInit(s spec.Service) []string {
	argv := []string{helperPath, egress.ServiceInitVerb, "--socket", serviceDir + "/service.sock"}
	if s.Egress {
		argv = append(argv, "--proxy-socket", socketPath)
	}
	return append(argv, "--")
}

// startServices creates and starts sp's services (pulling an absent
// image, as for the template) and waits for each to pass its readiness
// check.
func (d *Driver) startServices(ctx context.Context, sp *spec.Spec) error {
	for _, svc := range serviceNames(sp.Services) {
		if err := d.startService(ctx, sp, svc); err != nil {
			return err
		}
	}
	for _, svc := range serviceNames(sp.Services) {
		if err := d.waitReady(ctx, sp, svc); err != nil {
			return err
		}
	}
	return nil
}

// startService makes service svc (again: one there is removed first).
func (d *Driver) startService(ctx context.Context, sp *spec.Spec, svc string) error {
	s := sp.Services[svc]
	if err := d.pull(ctx, s.Image, "service "+svc+"'s image"); err != nil {
		return err
	}
	img, err := d.api.inspectImage(ctx, s.Image)
	if err != nil {
		return err
	}
	if img == nil {
		return fmt.Errorf("service %s: image %s is not on this machine", svc, s.Image)
	}
	name := ServiceContainer(sp.Name, svc)
	if err := d.api.removeContainer(ctx, name); err != nil {
		return err
	}
	id, err := d.api.createContainer(ctx, name, serviceContainer(sp, svc, img, d.opts.Binary))
	if err != nil {
		return err
	}
	return d.api.startContainer(ctx, id)
}

// waitReady waits until service svc's readiness check passes, when it
// has one, within its timeout: the check is exec'd in the service's
// container every half second while apply waits, and never after (a
// Docker health check would run for as long as the service does). A
// service that exits fails at once.
func (d *Driver) waitReady(ctx context.Context, sp *spec.Spec, svc string) error {
	s := sp.Services[svc]
	if s.Ready == nil {
		return nil
	}
	name := ServiceContainer(sp.Name, svc)
	fail := func(err error) error {
		if s.Dockerd {
			return fmt.Errorf("%w%s", err, d.dockerdWhy(name))
		}
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, s.Ready.Timeout)
	defer cancel()
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	var out limitedBuffer
	code, last := -1, ""
	restarts := -1
	for {
		in, err := d.api.inspectContainer(context.WithoutCancel(ctx), name)
		if err != nil {
			return err
		}
		switch {
		case in == nil:
			return fmt.Errorf("service %s: its container %s is gone", svc, name)
		case !in.State.Running || in.State.Restarting || (restarts >= 0 && in.RestartCount > restarts):
			// Its restart policy starts it again: a restart is an exit.
			return fail(fmt.Errorf("service %s exited before it was ready: docker logs %s says why", svc, name))
		}
		restarts = in.RestartCount
		out.Reset()
		c, err := d.api.exec(ctx, name, s.Ready.Command, driver.ExecOptions{Stdout: &out, Stderr: &out})
		if err == nil && c == 0 {
			return nil
		}
		if err == nil {
			code, last = c, out.String()
		}
		select {
		case <-ctx.Done():
			if err := context.Cause(ctx); !errors.Is(err, context.DeadlineExceeded) {
				return err
			}
			why := ""
			if code >= 0 {
				why = fmt.Sprintf(" (its last try exited %d: %s)", code, untrusted.Line(strings.TrimSpace(last)))
			}
			return fail(fmt.Errorf("service %s was not ready within %s: %s did not succeed%s", svc, s.Ready.Timeout, strings.Join(s.Ready.Command, " "), why))
		case <-tick.C:
		}
	}
}

// dockerdWhy is what an apply says of a Docker daemon that did not come
// up: why dockerd said it stopped (escaped), and which gVisor runs one.
// The log is the agent's to fill (it drives the daemon): only the lines
// dockerdFailure may pick are kept, each cut to 300 bytes.
func (d *Driver) dockerdWhy(container string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var f dockerdFailure
	d.api.logLines(ctx, container, time.Time{}, f.add)
	why := "; a Docker daemon needs gVisor of 2023 or later (Debian bookworm's runsc, of 2022, has no devices cgroup for it)"
	if l := f.line(); l != nil {
		why = "; dockerd logged: " + untrusted.Line(string(l)) + why
	}
	return why
}

// dockerdFailure finds the line of a daemon's log that says why it
// stopped: the last "failed to start daemon" (dockerd 20.10 prints it
// bare, later releases as a level=fatal entry), else the last error or
// fatal entry, else the last line. Its restart policy may have started it
// again, so the log's last line may be a later run's warning.
type dockerdFailure struct{ failed, errored, last []byte }

func (f *dockerdFailure) add(l []byte) {
	if l = bytes.TrimSpace(l); len(l) == 0 {
		return
	}
	keep := func(dst *[]byte) { *dst = append((*dst)[:0], l[:min(len(l), 300)]...) }
	switch {
	case bytes.Contains(l, []byte("failed to start daemon")):
		keep(&f.failed)
	case bytes.Contains(l, []byte("level=fatal")), bytes.Contains(l, []byte("level=error")):
		keep(&f.errored)
	}
	keep(&f.last)
}

func (f *dockerdFailure) line() []byte {
	for _, l := range [][]byte{f.failed, f.errored, f.last} {
		if l != nil {
			return l
		}
	}
	return nil
}

// limitedBuffer keeps the first 300 bytes written to it: enough of a
// readiness check's output to say why it failed.
type limitedBuffer struct{ b []byte }

func (l *limitedBuffer) Write(p []byte) (int, error) {
	if room := 300 - len(l.b); room > 0 {
		l.b = append(l.b, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

func (l *limitedBuffer) Reset()         { l.b = l.b[:0] }
func (l *limitedBuffer) String() string { return string(l.b) }

// observeServices says which of the declared services is missing or not
// running, by the service containers labelled as the sandbox's.
func (d *Driver) observeServices(ctx context.Context, name string, declared []string) (missing, stopped []string, err error) {
	list, err := d.api.listContainers(ctx, driver.LabelSandbox+"="+name)
	if err != nil {
		return nil, nil, err
	}
	found := map[string]string{}
	for _, c := range list {
		if svc := c.Labels[labelService]; svc != "" && c.Labels[driver.LabelRole] == "service" {
			found[svc] = c.State
		}
	}
	for _, svc := range declared {
		state, ok := found[svc]
		switch {
		case !ok:
			missing = append(missing, "service "+svc)
		case state != "running":
			stopped = append(stopped, svc)
		}
	}
	return missing, stopped, nil
}

// servicePart is the service a repair part names ("service NAME").
func servicePart(part string) (string, bool) {
	svc, ok := strings.CutPrefix(part, "service ")
	return svc, ok && spec.ServiceName(svc)
}

// serviceNames are the names of services, sorted.
func serviceNames(svcs map[string]spec.Service) []string {
	return slices.Sorted(maps.Keys(svcs))
}
