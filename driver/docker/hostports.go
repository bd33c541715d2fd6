package docker

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/sbxhq/sbx/egress"
	"github.com/sbxhq/sbx/reconcile"
	"github.com/sbxhq/sbx/spec"
)

// Ports of the host's loopback (network.hostPorts). The egress proxy runs
// on a bridge, which cannot reach the host's loopback; a relay
// (egress.HostRelayMain) in a container on the host's network,
// HostRelayName, does, for the ports it was made with and no other. It
// listens on a Unix socket on a tmpfs volume that only the proxy's
// container mounts besides it: the sandbox never sees it, and reaches a
// host port only through the proxy's checks, as spec.HostAlias:PORT.

const (
	hostRelayDir    = "/run/sbx-host"
	hostRelaySocket = hostRelayDir + "/host.sock"
	// labelHostPorts holds (JSON) the ports the relay was made with.
	labelHostPorts = "dev.sbx.hostports"
)

// HostRelayName is the container of sandbox name's relay to the host's
// loopback.
func HostRelayName(name string) string { return "sbx-" + name + "-host" }

// relayContainer is the relay for sp's network.hostPorts: sbx's proxy
// image running __host-relay on the host's network, with the proxy's
// safeguards.
func relayContainer(sp *spec.Spec, image string) (*containerSpec, error) {
	ports, err := json.Marshal(sp.Network.HostPorts)
	if err != nil {
		return nil, err
	}
	c := &containerSpec{
		Image:  image,
		Cmd:    []string{egress.HostRelayVerb, "--socket", hostRelaySocket},
		Labels: labels(sp.Name, "host-relay"),
		HostConfig: hostConfig{
			Binds:         []string{volumeName(sp.Name, "host") + ":" + hostRelayDir},
			NetworkMode:   "host",
			RestartPolicy: restartPolicy{Name: "unless-stopped"},
		},
	}
	c.Labels[labelHostPorts] = string(ports)
	for _, p := range sp.Network.HostPorts {
		c.Cmd = append(c.Cmd, "--port", strconv.Itoa(p))
	}
	sidecarHardening(c)
	return c, nil
}

// relayPorts are the ports a relay was made with.
func relayPorts(in *inspect) ([]int, error) {
	var ports []int
	return ports, labelJSON(in, labelHostPorts, &ports)
}

// labelJSON reads a label of a container sbx made as JSON into v: what a
// sidecar was made with.
func labelJSON(in *inspect, label string, v any) error {
	if err := json.Unmarshal([]byte(in.Config.Labels[label]), v); err != nil {
		return fmt.Errorf("container %s has no readable %s label: %v", in.Name, label, err)
	}
	return nil
}

// setHostRelay makes sp's relay match network.hostPorts: kept when it
// has those ports (and runs, or the sandbox does not), else removed and,
// with ports, made again (makeSidecar).
func (d *Driver) setHostRelay(ctx context.Context, sp *spec.Spec) error {
	name := HostRelayName(sp.Name)
	sb, err := d.api.inspectContainer(ctx, ContainerName(sp.Name))
	if err != nil {
		return err
	}
	in, err := d.api.inspectContainer(ctx, name)
	if err != nil {
		return err
	}
	if in != nil {
		have, err := relayPorts(in)
		if err == nil && slices.Equal(have, sp.Network.HostPorts) && (in.State.Running || sb == nil || !sb.State.Running) {
			return nil
		}
		if err := d.api.removeContainer(ctx, in.ID); err != nil {
			return err
		}
	}
	if len(sp.Network.HostPorts) == 0 {
		return nil
	}
	return d.makeSidecar(ctx, sp, name, "starting the relay to the host's loopback", func(image string) (*containerSpec, error) {
		return relayContainer(sp, image)
	})
}

// relayCall is the call that makes the relay match the file, before the
// proxy gets the policy that names its ports.
func (d *Driver) relayCall(sp *spec.Spec) reconcile.Call {
	name := HostRelayName(sp.Name)
	desc := "remove " + name + " if there (Engine API)"
	if len(sp.Network.HostPorts) > 0 {
		desc = fmt.Sprintf("unless %s relays exactly ports %s: remove it, create it on the host's network (sbx-egress:<hash> %s), and start it if %s runs (Engine API)",
			name, strings.Join(reconcile.HostPortStrings(sp.Network.HostPorts), ", "), egress.HostRelayVerb, ContainerName(sp.Name))
	}
	return reconcile.Call{Desc: desc, Run: func(ctx context.Context) error { return d.setHostRelay(ctx, sp) }}
}

// observeHostPorts are the host ports a sandbox reaches: its proxy's
// policy's, while a relay with them runs (or the sandbox is stopped);
// none otherwise, so that the plan makes the relay again.
func observeHostPorts(pol []int, relay *inspect, sandboxRunning bool) ([]string, error) {
	if len(pol) == 0 {
		return nil, nil
	}
	if relay == nil || (sandboxRunning && !relay.State.Running) {
		return nil, nil
	}
	have, err := relayPorts(relay)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, p := range pol {
		if slices.Contains(have, p) {
			out = append(out, strconv.Itoa(p))
		}
	}
	return out, nil
}
