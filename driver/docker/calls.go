package docker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"sync"

	"github.com/sbxhq/sbx/driver"
	"github.com/sbxhq/sbx/driver/buildctx"
	"github.com/sbxhq/sbx/driver/cliutil"
	"github.com/sbxhq/sbx/driver/runner"
	"github.com/sbxhq/sbx/egress"
	"github.com/sbxhq/sbx/reconcile"
	"github.com/sbxhq/sbx/spec"
)

// observed is what Observe read of a sandbox for the calls of its steps:
// its proxy's container (nil when it is gone), or, for a same-named
// container sbx did not create, the ids of it and of a proxy's namesake,
// which the remove step of an adopting plan removes.
type observed struct {
	egress  *inspect
	foreign []string
}

func foreignOf(live *reconcile.Live) []string {
	if live != nil {
		if o, ok := live.Detail.(*observed); ok {
			return o.foreign
		}
	}
	return nil
}

func egressOf(live *reconcile.Live) *inspect {
	if live != nil {
		if o, ok := live.Detail.(*observed); ok {
			return o.egress
		}
	}
	return nil
}

// Calls turns a step into docker commands and Engine API requests.
func (d *Driver) Calls(s reconcile.Step, sp *spec.Spec, live *reconcile.Live) ([]reconcile.Call, error) {
	name := s.Sandbox
	switch s.Kind {
	case reconcile.StepBuild:
		hash, err := buildctx.Hash(sp.Template.Build)
		if err != nil {
			return nil, err
		}
		args := append([]string{d.opts.Docker}, buildctx.DockerArgs(sp.Template.Build, templateImage(sp, hash))...)
		return []reconcile.Call{cliutil.StreamedCall(d.opts.Runner, args)}, nil
	case reconcile.StepStop:
		label := driver.LabelSandbox + "=" + name
		return []reconcile.Call{{
			Desc: fmt.Sprintf("stop the containers labelled %s (%s, %s, its services, ports' forwarder and host relay) together, SIGKILL after 5 s (Engine API POST /containers/NAME/stop?t=5, as docker stop --time 5)", label, ContainerName(name), EgressName(name)),
			Run: func(ctx context.Context) error {
				ids, err := d.api.containersLabelled(ctx, label)
				if err != nil {
					return err
				}
				return d.containers(ctx, "stop", url.Values{"t": {"5"}}, ids...)
			},
		}}, nil
	case reconcile.StepStart:
		// Any may start first: the sandbox's helper dials the proxy's
		// socket per connection, the services' and the forwarder's
		// parked connections are dialled again until they are taken, and
		// the tmpfs volumes they share are mounted while either side runs.
		sb, eg := ContainerName(name), EgressName(name)
		label := driver.LabelSandbox + "=" + name
		return []reconcile.Call{{
			Desc: fmt.Sprintf("start %s, %s and the other containers labelled %s (its services, ports' forwarder and host relay) together, and wait until its services are ready (Engine API POST /containers/NAME/start, as docker start)", eg, sb, label),
			Run: func(ctx context.Context) error {
				if err := restorePlaceholder(sp); err != nil {
					return err
				}
				ids, err := d.api.containersLabelled(ctx, label)
				if err != nil {
					return err
				}
				if err := d.containers(ctx, "start", nil, ids...); err != nil {
					return err
				}
				for _, svc := range serviceNames(sp.Services) {
					if err := d.waitReady(ctx, sp, svc); err != nil {
						return err
					}
				}
				return nil
			},
		}}, nil
	case reconcile.StepRemove:
		if foreign := foreignOf(live); len(foreign) > 0 {
			// Adopting (the plan refuses a container sbx did not create
			// without --adopt): the containers found by the sandbox's
			// names go, by the ids the plan saw, so one put there since
			// is not removed (the create then says the name is in use).
			return []reconcile.Call{{Desc: fmt.Sprintf("remove the containers sbx did not create that hold the sandbox's names, %s (ids %s, as the plan found them; their volumes stay), and anything labelled %s=%s (Engine API)",
				ContainerName(name), strings.Join(shortIDs(foreign), ", "), driver.LabelSandbox, name),
				Run: func(ctx context.Context) error {
					for _, id := range foreign {
						if err := d.api.removeKeepingVolumes(ctx, id); err != nil {
							return err
						}
					}
					return d.remove(ctx, name)
				}}}, nil
		}
		return []reconcile.Call{{Desc: "fetch the sandbox's commits into refs/sbx/" + name + "/* (git fetch), remove the containers, then the volumes, labelled " + driver.LabelSandbox + "=" + name + ", and unused proxy images of earlier sbx builds (Engine API)",
			Run: func(ctx context.Context) error {
				// Reading a stopped container's files mounts its binds
				// too: a removed placeholder would come back a directory.
				if sp != nil {
					if err := restorePlaceholder(sp); err != nil {
						return err
					}
				}
				// The sandbox's own git directory goes with it: its
				// commits come home first. A fetch that fails (no git on
				// the host, objects git refuses) does not keep the agent's
				// sandbox alive; it is said once the removal is done.
				fetchErr := d.fetchBeforeRemove(ctx, name)
				if err := d.remove(ctx, name); err != nil {
					return err
				}
				if fetchErr != nil {
					return fmt.Errorf("sandbox %q was removed, but its commits could not be brought home: %w", name, fetchErr)
				}
				// Stale proxy images go (this binary's stays, for the
				// next create); failing to remove them fails nothing.
				if own, err := egressTagOf(d.opts.Binary); err == nil {
					d.pruneImages(ctx, egressRepo, own, d.pruneAfter)
				}
				return nil
			}}}, nil
	case reconcile.StepCreate:
		return d.createCalls(sp, s.Record)
	case reconcile.StepRepair:
		return d.repairCalls(sp, s.Parts)
	case reconcile.StepSetNetwork:
		return d.policyCalls(sp, live)
	case reconcile.StepJoinNetworks:
		return d.joinCalls(sp), nil
	case reconcile.StepSetPorts:
		return []reconcile.Call{d.portsCall(sp)}, nil
	case reconcile.StepUpdateResources:
		return []reconcile.Call{d.command(append(append([]string{d.opts.Docker, "update"}, resourceArgs(sp)...), ContainerName(name)))}, nil
	case reconcile.StepVerify:
		return []reconcile.Call{{Desc: fmt.Sprintf("inspect %s and %s: both running (Engine API)", ContainerName(name), EgressName(name)),
			Run: func(ctx context.Context) error { return d.verify(ctx, name) }}}, nil
	}
	return nil, fmt.Errorf("the docker driver cannot %s", s.Kind)
}

// shortIDs are container ids as docker ps shows them.
func shortIDs(ids []string) []string {
	short := make([]string, len(ids))
	for i, id := range ids {
		short[i] = id[:min(12, len(id))]
	}
	return short
}

// command is one docker CLI command of a plan.
func (d *Driver) command(argv []string) reconcile.Call {
	return reconcile.Call{Desc: runner.Quote(argv), Run: func(ctx context.Context) error {
		_, err := d.opts.Runner.Output(ctx, argv...)
		return err
	}}
}

// containers stops or starts containers concurrently, as `docker stop A B`
// and `docker start A B` do, one Engine API request each (the daemon's
// ContainerStop and ContainerStart: 204 done, 304 already so, 404 no
// such container). Going to the API rather than the docker CLI saves a
// CLI start per call, most of what sbx would add to the raw command.
// Stopping a container that is gone is done; starting one is an error.
func (d *Driver) containers(ctx context.Context, action string, q url.Values, names ...string) error {
	errs := make([]error, len(names))
	var wg sync.WaitGroup
	for i, n := range names {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := d.api.do(ctx, http.MethodPost, "/containers/"+url.PathEscape(n)+"/"+action, q, nil, "")
			var ae *apiError
			switch {
			case errors.As(err, &ae) && ae.Status == http.StatusNotModified:
				err = nil
			case action == "stop" && notFound(err):
				err = nil
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// createCalls make the sandbox from nothing: what a create cut short left
// is removed, the proxy's image made once per sbx binary, the volumes
// created, and the proxy (with the policy in force from its first
// request) and the sandbox created and started together. It is one call,
// which removes what it made when it fails, so nothing half-made stays.
func (d *Driver) createCalls(sp *spec.Spec, rec *reconcile.Record) ([]reconcile.Call, error) {
	if _, err := protect(sp, d.neighbours(sp.Name), false); err != nil {
		return nil, err
	}
	tmpl := templateImage(sp, buildHash(sp, rec))
	n := sp.Name
	var lines []string
	image := tmpl
	switch {
	case sp.Template.Checkpoint != "":
		image += " (a checkpoint: this machine's image, never pulled)"
	case sp.Template.Build == nil:
		lines = append(lines, "docker pull "+tmpl+", unless present (its progress shown)")
	}
	lines = append(lines,
		"remove anything labelled "+driver.LabelSandbox+"="+n+" (what a create cut short left)",
		"docker build sbx-egress:<hash of this sbx>, FROM scratch, unless present",
		"create the volumes "+volumeName(n, "sock")+" (tmpfs, 1 MiB), "+volumeName(n, "policy")+" and "+volumeName(n, gitRole)+" (Engine API)",
		"create and start, together (Engine API):",
		"  "+EgressName(n)+": sbx-egress:<hash> __egress-proxy --control (the policy of sandbox.yaml), stdin open"+onNetworks(sp),
		"  "+ContainerName(n)+": --network none … "+image+" __sandbox-init",
	)
	if sp.Protect && !sp.Workspace.ReadOnly {
		lines = append(lines, "    its .git: the volume "+volumeName(n, gitRole)+", started from the host's HEAD, refs and index; the host's .git/objects read-only inside it")
	}
	if len(sp.Network.HostPorts) > 0 {
		lines = append(lines, "then "+d.relayCall(sp).Desc)
	}
	for _, svc := range serviceNames(sp.Services) {
		s := sp.Services[svc]
		line := fmt.Sprintf("then create and start %s: --network none … %s, run by sbx's service init", ServiceContainer(n, svc), s.Image)
		if s.Ready != nil {
			line += fmt.Sprintf(", and wait until %s succeeds in it (within %s)", runner.Quote(s.Ready.Command), s.Ready.Timeout)
		}
		lines = append(lines, line)
	}
	if len(sp.Ports) > 0 {
		lines = append(lines, "then "+d.portsCall(sp).Desc)
	}
	desc := strings.Join(lines, "\n")
	return []reconcile.Call{{Desc: desc, Run: func(ctx context.Context) error { return d.create(ctx, sp, rec) }}}, nil
}

// onNetworks says, for a plan's calls, which networks the proxy's
// container is made on when docker.networks names some.
func onNetworks(sp *spec.Spec) string {
	if len(sp.Docker.Networks) == 0 {
		return ""
	}
	return ", on " + strings.Join(sp.Docker.Networks, ", ") + " and the default bridge"
}

// buildHash is the content hash of the sandbox's built template: the
// record's, which the build step before the create made.
func buildHash(sp *spec.Spec, rec *reconcile.Record) string {
	if sp.Template.Build == nil {
		return ""
	}
	if rec != nil && rec.BuildHash != "" {
		return rec.BuildHash
	}
	h, _ := buildctx.Hash(sp.Template.Build)
	return h
}

// repairCalls recreate the sandbox's proxy when it is gone, with the
// policy of sandbox.yaml (its volumes are made again when they went too),
// and each of its services that is gone, waiting until it is ready.
func (d *Driver) repairCalls(sp *spec.Spec, parts []string) ([]reconcile.Call, error) {
	var calls []reconcile.Call
	proxy := false
	for _, p := range parts {
		if svc, ok := servicePart(p); ok {
			if _, declared := sp.Services[svc]; !declared {
				continue // the plan replaces or removes it
			}
			calls = append(calls, reconcile.Call{Desc: fmt.Sprintf("create and start %s (Engine API), and wait until it is ready", ServiceContainer(sp.Name, svc)),
				Run: func(ctx context.Context) error {
					if err := d.volumes(ctx, sp.Name, sp.Services); err != nil {
						return err
					}
					if err := d.startService(ctx, sp, svc); err != nil {
						return err
					}
					return d.waitReady(ctx, sp, svc)
				}})
			continue
		}
		if p != "egress container" {
			return nil, fmt.Errorf("the docker driver cannot recreate %s", p)
		}
		proxy = true
	}
	if !proxy {
		return calls, nil
	}
	n := sp.Name
	return append(calls, reconcile.Call{
		Desc: "create the volumes " + volumeName(n, "sock") + " and " + volumeName(n, "policy") + " unless present (Engine API)\ncreate and start " + EgressName(n) + ": sbx-egress:<hash> __egress-proxy --control (the policy of sandbox.yaml, written over an earlier one), stdin open" + onNetworks(sp) + " (Engine API)",
		Run:  func(ctx context.Context) error { return d.recreateEgress(ctx, sp) },
	}), nil
}

// policyCalls put the sandbox's policy in force without a restart. A
// proxy with a control channel gets it there, and answers once it is in
// force (and written to its volume for the next start) or says why it
// refused it. A proxy without one (made by an earlier sbx) gets the file
// (as docker cp would) and, when it runs, SIGHUP; a stopped proxy gets the
// file, which it loads when it starts.
func (d *Driver) policyCalls(sp *spec.Spec, live *reconcile.Live) ([]reconcile.Call, error) {
	name := EgressName(sp.Name)
	eg := egressOf(live)
	if eg == nil {
		return nil, fmt.Errorf("sandbox %q has no egress container (%s) to change", sp.Name, name)
	}
	policy := func(ctx context.Context) ([]byte, error) {
		pol, err := d.policy(ctx, sp)
		if err != nil {
			return nil, err
		}
		return json.Marshal(pol)
	}
	// The relay to the host is made to match first, when the file or the
	// live sandbox has host ports.
	var calls []reconcile.Call
	if len(sp.Network.HostPorts) > 0 || (live != nil && len(live.Network.HostPorts) > 0) {
		calls = append(calls, d.relayCall(sp))
	}
	if controllable(eg) {
		return append(calls, reconcile.Call{Desc: "attach to " + name + ": set the policy of sandbox.yaml, in force when the proxy answers (Engine API)",
			Run: func(ctx context.Context) error {
				data, err := policy(ctx)
				if err != nil {
					return err
				}
				rep, err := d.api.control(ctx, name, egress.ControlRequest{Op: "set", Policy: data})
				if err != nil {
					return err
				}
				if rep.Error != "" {
					return fmt.Errorf("the egress proxy of %q refused the new policy (the previous one stays in force): %s", sp.Name, rep.Error)
				}
				return nil
			}}), nil
	}
	calls = append(calls, reconcile.Call{Desc: "write " + policyPath + " into " + name + " (Engine API)", Run: func(ctx context.Context) error {
		data, err := policy(ctx)
		if err != nil {
			return err
		}
		return d.api.writeFile(ctx, name, filepath.Dir(policyPath), filepath.Base(policyPath), data, 0o644)
	}})
	if eg.State.Running {
		calls = append(calls, reconcile.Call{Desc: "kill -s HUP " + name + " (Engine API)", Run: func(ctx context.Context) error {
			return d.api.kill(ctx, name, "HUP")
		}})
	}
	return calls, nil
}

// verify checks that the sandbox and its proxy are running.
func (d *Driver) verify(ctx context.Context, name string) error {
	for _, c := range []string{ContainerName(name), EgressName(name)} {
		in, err := d.api.inspectContainer(ctx, c)
		if err != nil {
			return err
		}
		if in == nil {
			return fmt.Errorf("container %s does not exist", c)
		}
		if !in.State.Running {
			return fmt.Errorf("container %s is not running (%s)", c, in.State.Status)
		}
	}
	return nil
}
