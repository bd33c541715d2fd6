package docker

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"sort"

	"github.com/sbxhq/sbx/egress"
	"github.com/sbxhq/sbx/reconcile"
	"github.com/sbxhq/sbx/spec"
)

// defaultBridge is the name of Docker's default bridge network in a
// container's inspection (NetworkSettings.Networks): the network a
// container without --network is on.
const defaultBridge = "bridge"

// networkInfo is the part of a network's inspection (GET /networks/{id},
// Engine API v1.41 "Network": Name, Id, IPAM.Config[].Subnet and
// .Gateway) the driver reads.
type networkInfo struct {
	Name string
	ID   string `json:"Id"`
	IPAM struct {
		Config []struct {
			Subnet  string
			Gateway string
		}
	}
}

// inspectNetwork returns a network's details; nil when the daemon has no
// network of that name. The daemon also finds a network by ID or ID
// prefix: only one whose name is name counts, so that a network named
// after a hex prefix is never taken for another's.
func (e *engine) inspectNetwork(ctx context.Context, name string) (*networkInfo, error) {
	data, err := e.do(ctx, http.MethodGet, "/networks/"+url.PathEscape(name), nil, nil, "")
	if notFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var n networkInfo
	if err := json.Unmarshal(data, &n); err != nil {
		return nil, fmt.Errorf("inspecting network %s: %v", name, err)
	}
	if n.Name != name {
		return nil, nil
	}
	return &n, nil
}

// connectNetwork connects a container to a network (POST
// /networks/{id}/connect, Engine API v1.41 "NetworkConnect": {"Container":
// ID}), as docker network connect does.
func (e *engine) connectNetwork(ctx context.Context, network, container string) error {
	body := map[string]string{"Container": container}
	_, err := e.doJSON(ctx, http.MethodPost, "/networks/"+url.PathEscape(network)+"/connect", nil, body)
	return err
}

// missingNetwork is the message for a docker.networks entry the daemon
// does not have.
func missingNetwork(name string) string {
	return fmt.Sprintf("there is no Docker network %q on this daemon (docker network ls lists them; docker network create %s makes one)", name, name)
}

// Configure learns each sandbox's docker.networks: Observe gets only
// names, and checks that the networks exist, so that a plan fails on a
// missing one before apply does. It keeps the specs too, for protect's
// neighbours.
func (d *Driver) Configure(specs []*spec.Spec) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.networks == nil {
		d.networks = map[string][]string{}
	}
	for _, sp := range specs {
		d.networks[sp.Name] = sp.Docker.Networks
	}
	d.specs = specs
	return nil
}

// neighbours are the sandboxes Configure was given other than name.
func (d *Driver) neighbours(name string) []*spec.Spec {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []*spec.Spec
	for _, sp := range d.specs {
		if sp.Name != name {
			out = append(out, sp)
		}
	}
	return out
}

// configured is the spec Configure was given for sandbox name, nil for
// none.
func (d *Driver) configured(name string) *spec.Spec {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, sp := range d.specs {
		if sp.Name == name {
			return sp
		}
	}
	return nil
}

// declaredNetworks is what Configure learnt of a sandbox.
func (d *Driver) declaredNetworks(name string) []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.networks[name]
}

// networkProblems asks the daemon for each network a sandbox declares
// and reports those it does not have.
func (d *Driver) networkProblems(ctx context.Context, name string) ([]reconcile.Problem, error) {
	var ps []reconcile.Problem
	for _, n := range d.declaredNetworks(name) {
		info, err := d.api.inspectNetwork(ctx, n)
		if err != nil {
			return nil, err
		}
		if info == nil {
			ps = append(ps, reconcile.Problem{Path: "docker.networks", Message: missingNetwork(n)})
		}
	}
	return ps, nil
}

// joined are the user-defined networks a proxy's container is on, sorted
// (its inspection's NetworkSettings.Networks, by name).
func joined(eg *inspect) []string {
	var out []string
	for n := range eg.NetworkSettings.Networks {
		if n != defaultBridge {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}

// policy is the proxy's policy for a sandbox: the file's rules, the
// Docker host's addresses, and each network of docker.networks with its
// subnets and gateways as the daemon has them. A network the daemon does
// not have is an error.
func (d *Driver) policy(ctx context.Context, sp *spec.Spec) (egress.Policy, error) {
	pol := egress.PolicyOf(sp, d.hostAddrs(ctx))
	for _, name := range sp.Docker.Networks {
		info, err := d.api.inspectNetwork(ctx, name)
		if err != nil {
			return egress.Policy{}, err
		}
		if info == nil {
			return egress.Policy{}, fmt.Errorf("docker.networks: %s", missingNetwork(name))
		}
		n, err := rangesOf(info)
		if err != nil {
			return egress.Policy{}, err
		}
		pol.Networks = append(pol.Networks, n)
	}
	return pol, nil
}

// rangesOf turns a network's IPAM configuration into the proxy's terms:
// each subnet, and each gateway. A subnet whose gateway the inspection
// leaves out gets its first address refused as one: that is the address
// Docker's default IPAM gives a bridge network's gateway (the host), and
// refusing one address too many is the safe mistake.
func rangesOf(info *networkInfo) (egress.Network, error) {
	n := egress.Network{Name: info.Name, Subnets: []string{}}
	for _, c := range info.IPAM.Config {
		pfx, err := netip.ParsePrefix(c.Subnet)
		if err != nil {
			return egress.Network{}, fmt.Errorf("network %s: subnet %q: %v", info.Name, c.Subnet, err)
		}
		pfx = pfx.Masked()
		n.Subnets = append(n.Subnets, pfx.String())
		gw, err := netip.ParseAddr(c.Gateway)
		if err != nil {
			gw = pfx.Addr().Next()
		}
		if !slices.Contains(n.Gateways, gw.String()) {
			n.Gateways = append(n.Gateways, gw.String())
		}
	}
	if len(n.Subnets) == 0 {
		return egress.Network{}, fmt.Errorf("network %s has no subnet the proxy could reach (IPAM config is empty)", info.Name)
	}
	return n, nil
}

// joinCalls put a sandbox's proxy on the networks of docker.networks by
// making its container again on them: a container made on the default
// bridge and connected later may not get Docker's embedded DNS (the
// resolver at 127.0.0.11 that knows the networks' container names), one
// made on a user-defined network always does. The sandbox runs on; its
// bridge dials the proxy's socket per connection, and waits briefly for
// one starting.
func (d *Driver) joinCalls(sp *spec.Spec) []reconcile.Call {
	n := EgressName(sp.Name)
	on := " on the default bridge only"
	if len(sp.Docker.Networks) > 0 {
		on = onNetworks(sp)[1:]
	}
	return []reconcile.Call{{
		Desc: "remove " + n + ", then create it" + on + " with the policy of sandbox.yaml, and start it (Engine API)",
		Run: func(ctx context.Context) error {
			image, err := d.egressImage(ctx)
			if err != nil {
				return err
			}
			// The policy is read first: a missing network fails the
			// step before the proxy is removed.
			pol, err := d.policy(ctx, sp)
			if err != nil {
				return err
			}
			if err := d.api.removeContainer(ctx, n); err != nil {
				return err
			}
			return d.startEgress(ctx, sp, image, pol, true)
		},
	}}
}
