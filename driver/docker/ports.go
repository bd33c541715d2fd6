package docker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/sbxhq/sbx/egress"
	"github.com/sbxhq/sbx/reconcile"
	"github.com/sbxhq/sbx/spec"
)

// Published ports. The sandbox has no network interface but loopback, so
// the ports the file publishes are a forwarder's (egress.PortsMain): a
// container of its own, PortsName, on a bridge network of its own of the
// same name, which Docker publishes on the host (127.0.0.1 unless the
// file writes another host IP). The forwarder reaches the sandbox's
// loopback over connections the sandbox's init parks on its Unix socket,
// on a tmpfs volume the sandbox mounts read-only; it never dials. Its
// network holds nothing else, so no other container reaches the
// sandbox's ports. A change of ports makes the forwarder again; the
// sandbox runs on.

// Paths of the forwarder's socket, in both containers.
const (
	portsDir    = "/run/sbx-ports"
	portsSocket = portsDir + "/ports.sock"
	// labelPorts holds (JSON) the ports the file declared, on the
	// forwarder: what observing reports them as.
	labelPorts = "dev.sbx.ports"
)

// PortsName is the container, and the network, of sandbox name's
// published ports' forwarder.
func PortsName(name string) string { return "sbx-" + name + "-ports" }

// portBinding is a host address Docker publishes a container port on
// (Engine API v1.41 "PortBinding": HostIp, HostPort), in a container
// create's HostConfig.PortBindings and an inspection's
// NetworkSettings.Ports.
type portBinding struct {
	HostIP   string `json:"HostIp"`
	HostPort string
}

// hostIP is where a port is published: the host's loopback unless the
// file writes an address.
func hostIP(p spec.Port) string {
	if p.HostIP == "" {
		return "127.0.0.1"
	}
	return p.HostIP
}

// forwarderContainer is the forwarder of sp's ports: sbx's proxy image
// running __ports, with the proxy's safeguards, each declared port
// published as docker run -p HOST_IP:HOST_PORT:PORT would.
func forwarderContainer(sp *spec.Spec, image string) (*containerSpec, error) {
	declared, err := json.Marshal(sp.Ports)
	if err != nil {
		return nil, err
	}
	c := &containerSpec{
		Image:        image,
		Cmd:          []string{egress.PortsVerb, "--socket", portsSocket},
		Labels:       labels(sp.Name, "ports"),
		ExposedPorts: map[string]struct{}{},
		HostConfig: hostConfig{
			Binds:         []string{volumeName(sp.Name, "ports") + ":" + portsDir},
			NetworkMode:   PortsName(sp.Name),
			RestartPolicy: restartPolicy{Name: "unless-stopped"},
			PortBindings:  map[string][]portBinding{},
		},
	}
	c.Labels[labelPorts] = string(declared)
	for _, p := range sp.Ports {
		if p.Protocol != "tcp" {
			return nil, fmt.Errorf("the docker driver publishes tcp ports only, not %s", p)
		}
		key := strconv.Itoa(p.ContainerPort) + "/tcp"
		if _, ok := c.ExposedPorts[key]; !ok {
			c.ExposedPorts[key] = struct{}{}
			c.Cmd = append(c.Cmd, "--port", strconv.Itoa(p.ContainerPort))
		}
		b := portBinding{HostIP: hostIP(p)}
		if p.HostPort != 0 {
			b.HostPort = strconv.Itoa(p.HostPort)
		}
		c.HostConfig.PortBindings[key] = append(c.HostConfig.PortBindings[key], b)
	}
	sidecarHardening(c)
	return c, nil
}

// setPorts makes sp's forwarder again with the ports of the file: the old
// one goes, and with no ports its network too. The new one starts when
// the sandbox runs (else the start step starts it with the sandbox); one
// that fails to start (its host port taken, say) is removed, so that the
// next plan publishes the ports again.
func (d *Driver) setPorts(ctx context.Context, sp *spec.Spec) error {
	name := PortsName(sp.Name)
	if err := d.api.removeContainer(ctx, name); err != nil {
		return err
	}
	if len(sp.Ports) == 0 {
		return d.api.removeNetwork(ctx, name)
	}
	if err := d.api.createNetwork(ctx, name, labels(sp.Name, "ports-network")); err != nil {
		return err
	}
	return d.makeSidecar(ctx, sp, name, "publishing the ports", func(image string) (*containerSpec, error) {
		return forwarderContainer(sp, image)
	})
}

// makeSidecar creates a container of sp's beside the sandbox (the ports'
// forwarder, the host relay) from sbx's proxy image, with the sandbox's
// volumes, and starts it when the sandbox runs (else the start step
// starts it with the sandbox). One that fails to start (its host port
// taken, say) is removed, so that the next plan makes it again.
func (d *Driver) makeSidecar(ctx context.Context, sp *spec.Spec, name, what string, build func(image string) (*containerSpec, error)) error {
	image, err := d.egressImage(ctx)
	if err != nil {
		return err
	}
	c, err := build(image)
	if err != nil {
		return err
	}
	if err := d.volumes(ctx, sp.Name, sp.Services); err != nil {
		return err
	}
	id, err := d.api.createContainer(ctx, name, c)
	if err != nil {
		return err
	}
	sb, err := d.api.inspectContainer(ctx, ContainerName(sp.Name))
	if err != nil || sb == nil || !sb.State.Running {
		return err
	}
	if err := d.api.startContainer(ctx, id); err != nil {
		d.api.removeContainer(context.WithoutCancel(ctx), id)
		return fmt.Errorf("%s of sandbox %q: %w", what, sp.Name, err)
	}
	return nil
}

// sidecarHardening gives a container of sbx's own beside the sandbox
// (the proxy, the ports' forwarder, the host relay) the proxy's
// safeguards, and one scheduler thread: a connection then runs where it
// was accepted instead of waking another thread (BENCHMARKS.md).
func sidecarHardening(c *containerSpec) {
	proxyHardening(c)
	c.Env = append(c.Env, "GOMAXPROCS=1")
}

// portsCall is the call of a set-ports step.
func (d *Driver) portsCall(sp *spec.Spec) reconcile.Call {
	name := PortsName(sp.Name)
	var desc string
	if len(sp.Ports) == 0 {
		desc = "remove " + name + " and its network (Engine API)"
	} else {
		var ps []string
		for _, p := range sp.Ports {
			ps = append(ps, publishArg(p))
		}
		desc = fmt.Sprintf("remove %s, then create it on its own network %s: sbx-egress:<hash> %s, -p %s, and start it if %s runs (Engine API)",
			name, name, egress.PortsVerb, strings.Join(ps, " -p "), ContainerName(sp.Name))
	}
	return reconcile.Call{Desc: desc, Run: func(ctx context.Context) error { return d.setPorts(ctx, sp) }}
}

// publishArg is a port as docker run -p writes it, with the host IP the
// driver publishes on.
func publishArg(p spec.Port) string {
	host := hostIP(p)
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	hp := ""
	if p.HostPort != 0 {
		hp = strconv.Itoa(p.HostPort)
	}
	return fmt.Sprintf("%s:%s:%d", host, hp, p.ContainerPort)
}

// observePorts is what a sandbox publishes: nothing without a forwarder,
// or with one that does not run while the sandbox does (the plan makes it
// again); what the forwarder was made with while the sandbox is stopped;
// else the bindings Docker made, each in the terms of the file that
// declared it (no host IP for the loopback the driver chose, the host
// port Docker picked where the file named none).
func observePorts(fw *inspect, sandboxRunning bool) ([]spec.Port, error) {
	if fw == nil {
		return nil, nil
	}
	var declared []spec.Port
	if err := labelJSON(fw, labelPorts, &declared); err != nil {
		return nil, err
	}
	if !fw.State.Running {
		if sandboxRunning {
			return nil, nil
		}
		return declared, nil
	}
	var live []spec.Port
	for key, bs := range fw.NetworkSettings.Ports {
		port, proto, ok := strings.Cut(key, "/")
		cp, err := strconv.Atoi(port)
		if !ok || err != nil || proto != "tcp" {
			return nil, fmt.Errorf("the ports forwarder %s publishes %q, which the docker driver did not make", fw.Name, key)
		}
		for _, b := range bs {
			hp, err := strconv.Atoi(b.HostPort)
			if err != nil {
				return nil, fmt.Errorf("the ports forwarder %s publishes %s on host port %q", fw.Name, key, b.HostPort)
			}
			p := spec.Port{HostIP: b.HostIP, HostPort: hp, ContainerPort: cp, Protocol: "tcp"}
			if slices.ContainsFunc(declared, func(d spec.Port) bool {
				return d.HostIP == "" && d.ContainerPort == cp && (d.HostPort == 0 || d.HostPort == hp)
			}) && b.HostIP == "127.0.0.1" {
				p.HostIP = ""
			}
			live = append(live, p)
		}
	}
	sort.Slice(live, func(i, j int) bool { return reconcile.PortString(live[i]) < reconcile.PortString(live[j]) })
	return live, nil
}

// createNetwork creates a bridge network (POST /networks/create, Engine
// API v1.41 "NetworkCreateRequest": Name, Driver, Labels), as docker
// network create does; one of that name that exists is kept.
func (e *engine) createNetwork(ctx context.Context, name string, labels map[string]string) error {
	if n, err := e.inspectNetwork(ctx, name); err != nil || n != nil {
		return err
	}
	body := map[string]any{"Name": name, "Driver": "bridge", "Labels": labels}
	_, err := e.doJSON(ctx, http.MethodPost, "/networks/create", nil, body)
	var ae *apiError
	if errors.As(err, &ae) && ae.Status == http.StatusConflict {
		return nil // made meanwhile, by another apply of this sandbox
	}
	return err
}

// removeNetwork removes a network; one already gone is not an error.
func (e *engine) removeNetwork(ctx context.Context, name string) error {
	_, err := e.do(ctx, http.MethodDelete, "/networks/"+url.PathEscape(name), nil, nil, "")
	if notFound(err) {
		return nil
	}
	return err
}

// networksLabelled lists the IDs of the networks that carry a label (GET
// /networks, Engine API v1.41 "Network": Id).
func (e *engine) networksLabelled(ctx context.Context, label string) ([]string, error) {
	data, err := e.do(ctx, http.MethodGet, "/networks", labelFilter(label), nil, "")
	if err != nil {
		return nil, err
	}
	var list []struct {
		ID string `json:"Id"`
	}
	if err := json.Unmarshal(data, &list); err != nil {
		return nil, fmt.Errorf("listing networks: %v", err)
	}
	ids := make([]string, len(list))
	for i, n := range list {
		ids[i] = n.ID
	}
	return ids, nil
}
