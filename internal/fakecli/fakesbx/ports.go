package fakesbx

import (
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/sbxhq/sbx/internal/fakecli"
	"github.com/sbxhq/sbx/internal/fakecli/fakestate"
)

// portEntry is one binding as `sbx ports --json` (a bare array) and `sbx
// ls --json` list it (evidence §1.3, [3P-measured v0.47.0]).
type portEntry struct {
	HostIP      string `json:"host_ip"`
	HostPort    int    `json:"host_port"`
	SandboxPort int    `json:"sandbox_port"`
	Protocol    string `json:"protocol"`
}

func portEntries(ps []fakestate.Port) []portEntry {
	out := []portEntry{}
	for _, p := range ps {
		out = append(out, portEntry(p))
	}
	return out
}

var protocols = []string{"tcp", "tcp4", "tcp6", "udp", "udp4", "udp6"}

// portSpec is a parsed [[HOST_IP:]HOST_PORT:]SANDBOX_PORT[/PROTOCOL].
type portSpec struct {
	hostIP             string
	hostPort, sbxPort  int
	proto              string
	protoSet, hostPSet bool
}

// parseSpec parses a --publish or --unpublish value (docker-sandboxes-cli.md
// §1.3 ports). An IPv6 HOST_IP is bracketed.
func parseSpec(spec string) (portSpec, error) {
	rest, proto, found := strings.Cut(spec, "/")
	ps := portSpec{proto: proto, protoSet: found}
	if found && !slices.Contains(protocols, proto) {
		return ps, errf("invalid protocol %q in %q: supported protocols are tcp, tcp4, tcp6, udp, udp4, udp6", proto, spec)
	}
	var f []string
	if strings.HasPrefix(rest, "[") {
		i := strings.Index(rest, "]:")
		if i < 0 {
			return ps, errf("invalid port specification %q", spec)
		}
		f = append([]string{rest[1:i]}, strings.Split(rest[i+2:], ":")...)
	} else {
		f = strings.Split(rest, ":")
	}
	num := func(s string) (int, error) {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > 65535 {
			return 0, errf("invalid port %q in %q", s, spec)
		}
		return n, nil
	}
	var err error
	switch len(f) {
	case 1:
	case 2:
		ps.hostPSet = true
		if ps.hostPort, err = num(f[0]); err != nil {
			return ps, err
		}
	case 3:
		if _, err := netip.ParseAddr(f[0]); err != nil {
			return ps, errf("invalid host IP %q in %q", f[0], spec)
		}
		ps.hostIP, ps.hostPSet = f[0], true
		if ps.hostPort, err = num(f[1]); err != nil {
			return ps, err
		}
	default:
		return ps, errf("invalid port specification %q: want [[HOST_IP:]HOST_PORT:]SANDBOX_PORT[/PROTOCOL]", spec)
	}
	ps.sbxPort, err = num(f[len(f)-1])
	return ps, err
}

// publish turns a --publish value into host bindings (the v0.47.0 help
// and capture, evidence §1.3, §3.7): no PROTOCOL is tcp4 on 127.0.0.1
// (tcp before 0.42.0); tcp/udp without HOST_IP bind 127.0.0.1 and ::1,
// each its own ephemeral port when HOST_PORT is omitted; tcp6/udp6 bind
// ::1.
func (a *app) publish(st *fakestate.State, spec string) ([]fakestate.Port, error) {
	ps, err := parseSpec(spec)
	if err != nil {
		return nil, err
	}
	if !ps.protoSet {
		ps.proto = "tcp"
		if a.Version.AtLeast(vJSON) {
			ps.proto = "tcp4"
			if addr, err := netip.ParseAddr(ps.hostIP); err == nil && addr.Is6() {
				ps.proto = "tcp6"
			}
		}
	}
	ips := []string{ps.hostIP}
	if ps.hostIP == "" {
		switch {
		case strings.HasSuffix(ps.proto, "4"):
			ips = []string{"127.0.0.1"}
		case strings.HasSuffix(ps.proto, "6"):
			ips = []string{"::1"}
		default:
			ips = []string{"127.0.0.1", "::1"}
		}
	}
	var out []fakestate.Port
	for _, ip := range ips {
		p := fakestate.Port{HostIP: ip, HostPort: ps.hostPort, SandboxPort: ps.sbxPort, Protocol: ps.proto}
		if p.HostPort == 0 {
			p.HostPort = st.AllocPort()
		}
		for _, sb := range st.Sandboxes {
			for _, q := range sb.Ports {
				if q.HostIP == p.HostIP && q.HostPort == p.HostPort && q.Protocol[:3] == p.Protocol[:3] {
					return nil, errf("port %s:%d is already published by sandbox '%s'", p.HostIP, p.HostPort, sb.Name) // UNCONFIRMED
				}
			}
		}
		out = append(out, p)
	}
	return out, nil
}

// unpublish removes the bindings an --unpublish value names: HOST_PORT is
// required ([HOST_IP:]HOST_PORT:SANDBOX_PORT[/PROTOCOL]); without HOST_IP
// it names the binding on every address, and without PROTOCOL it "removes
// the mapping whether it was published with that same default or as
// dual-stack tcp" (evidence §1.3). Error wordings are UNCONFIRMED.
func unpublish(sb *fakestate.Sandbox, spec string) error {
	ps, err := parseSpec(spec)
	if err != nil {
		return err
	}
	if !ps.hostPSet {
		return errf("invalid port specification %q: HOST_PORT is required ([HOST_IP:]HOST_PORT:SANDBOX_PORT[/PROTOCOL])", spec)
	}
	n := len(sb.Ports)
	sb.Ports = slices.DeleteFunc(sb.Ports, func(p fakestate.Port) bool {
		protoOK := p.Protocol == ps.proto || !ps.protoSet && (p.Protocol == "tcp4" || p.Protocol == "tcp")
		return p.HostPort == ps.hostPort && p.SandboxPort == ps.sbxPort && protoOK && (ps.hostIP == "" || ps.hostIP == p.HostIP)
	})
	if len(sb.Ports) == n {
		return errf("port %s is not published by sandbox '%s'", spec, sb.Name)
	}
	return nil
}

// ports is `sbx ports SANDBOX [--publish P]... [--unpublish P]... [--json]`.
// "Publishing a local port starts a stopped sandbox" (§1.3); it then
// settles as auto-stop leaves it. The listing is the v0.47.0 capture's
// table, or a bare JSON array.
func (a *app) ports(args []string) error {
	fs := fakecli.Flags("ports")
	jsonFlag := fs.Bool("json", false, "Output in JSON format (for port listing)")
	pub := fs.StringArray("publish", nil, "Publish a port (can be repeated)")
	unpub := fs.StringArray("unpublish", nil, "Unpublish a port")
	args, err := a.parse(fs, args)
	if err != nil {
		return err
	}
	if err := argsCheck(args, 1, 1); err != nil {
		return err
	}
	var ports []fakestate.Port
	err = a.Store.Update(func(st *fakestate.State) error {
		sb, err := a.lookup(st, args[0])
		if err != nil {
			return err
		}
		for _, spec := range *unpub {
			if err := unpublish(sb, spec); err != nil {
				return err
			}
		}
		for _, spec := range *pub {
			ps, err := a.publish(st, spec)
			if err != nil {
				return err
			}
			for _, p := range ps {
				// One line per binding (v0.47.0 capture, evidence §1.3).
				host := p.HostIP
				if strings.Contains(host, ":") {
					host = "[" + host + "]"
				}
				fmt.Fprintf(a.Stdout, "Published %s:%d -> %d/%s\n", host, p.HostPort, p.SandboxPort, p.Protocol)
			}
			a.start(sb)
			sb.Ports = append(sb.Ports, ps...)
			a.settle(sb)
		}
		ports = sb.Ports
		return nil
	})
	if err != nil || len(*pub)+len(*unpub) > 0 {
		return err
	}
	if *jsonFlag {
		return a.JSON(portEntries(ports))
	}
	rows := [][]string{{"HOST IP", "HOST PORT", "SANDBOX PORT", "PROTOCOL"}}
	for _, p := range ports {
		rows = append(rows, []string{p.HostIP, strconv.Itoa(p.HostPort), strconv.Itoa(p.SandboxPort), p.Protocol})
	}
	return fakecli.Table(a.Stdout, rows)
}
