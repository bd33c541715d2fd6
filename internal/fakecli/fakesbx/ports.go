package fakesbx

import (
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"

	"github.com/sbxhq/sbx/internal/fakecli/fakestate"
)

var protocols = []string{"tcp", "tcp4", "tcp6", "udp", "udp4", "udp6"}

// defaultProto is tcp4 since 0.42.0, tcp before (docker-sandboxes-cli.md
// §1.3 ports, §7).
func (a *app) defaultProto() string {
	if a.version.AtLeast("0.42.0") {
		return "tcp4"
	}
	return "tcp"
}

// splitProto cuts "/PROTOCOL" off spec and checks it.
func (a *app) splitProto(spec string) (string, string, error) {
	rest, proto, found := strings.Cut(spec, "/")
	if !found {
		return rest, a.defaultProto(), nil
	}
	if !slices.Contains(protocols, proto) {
		return "", "", &cliError{msg: fmt.Sprintf("invalid protocol %q in %q: supported protocols are tcp, tcp4, tcp6, udp, udp4, udp6", proto, spec), code: 1}
	}
	return rest, proto, nil
}

func loopback(proto string) string {
	if strings.HasSuffix(proto, "6") {
		return "::1"
	}
	return "127.0.0.1"
}

func parsePort(s, spec string) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > 65535 {
		return 0, &cliError{msg: fmt.Sprintf("invalid port %q in %q", s, spec), code: 1}
	}
	return n, nil
}

// splitHostIP cuts a leading HOST_IP (possibly a bracketed IPv6) off parts.
func splitFields(s string) []string {
	if strings.HasPrefix(s, "[") {
		if i := strings.Index(s, "]:"); i > 0 {
			return append([]string{s[1:i]}, strings.Split(s[i+2:], ":")...)
		}
	}
	return strings.Split(s, ":")
}

// parsePublish parses [[HOST_IP:]HOST_PORT:]SANDBOX_PORT[/PROTOCOL]
// (docker-sandboxes-cli.md §1.3 ports) and allocates an ephemeral host port
// when HOST_PORT is omitted. Duplicate host bindings are refused (wording
// UNCONFIRMED).
func (a *app) parsePublish(st *fakestate.State, spec string) (fakestate.Port, error) {
	rest, proto, err := a.splitProto(spec)
	if err != nil {
		return fakestate.Port{}, err
	}
	f := splitFields(rest)
	p := fakestate.Port{Protocol: proto, HostIP: loopback(proto)}
	switch len(f) {
	case 1:
	case 2:
		if p.HostPort, err = parsePort(f[0], spec); err != nil {
			return p, err
		}
	case 3:
		if net.ParseIP(f[0]) == nil {
			return p, &cliError{msg: fmt.Sprintf("invalid host IP %q in %q", f[0], spec), code: 1}
		}
		p.HostIP = f[0]
		if p.HostPort, err = parsePort(f[1], spec); err != nil {
			return p, err
		}
	default:
		return p, &cliError{msg: fmt.Sprintf("invalid port specification %q: want [[HOST_IP:]HOST_PORT:]SANDBOX_PORT[/PROTOCOL]", spec), code: 1}
	}
	if p.SandboxPort, err = parsePort(f[len(f)-1], spec); err != nil {
		return p, err
	}
	if p.HostPort == 0 {
		p.HostPort = st.AllocPort()
	}
	for _, sb := range st.Sandboxes {
		for _, q := range sb.Ports {
			if q.HostIP == p.HostIP && q.HostPort == p.HostPort && q.Protocol[:3] == p.Protocol[:3] {
				return p, &cliError{msg: fmt.Sprintf("port %s:%d is already published by sandbox '%s'", p.HostIP, p.HostPort, sb.Name), code: 1}
			}
		}
	}
	return p, nil
}

func (a *app) ports(args []string) error {
	fs := newFlags("ports")
	jsonFlag := fs.Bool("json", false, "Output in JSON format (for port listing)")
	publish := fs.StringArray("publish", nil, "Publish a port (can be repeated)")
	unpublish := fs.StringArray("unpublish", nil, "Unpublish a port")
	args, err := a.parse(fs, args)
	if err != nil {
		return err
	}
	if err := argsCheck(args, 1, 1); err != nil {
		return err
	}
	var ports []fakestate.Port
	err = a.store.Update(func(st *fakestate.State) error {
		sb, err := a.lookup(st, args[0])
		if err != nil {
			return err
		}
		for _, spec := range *unpublish {
			// [HOST_IP:]HOST_PORT:SANDBOX_PORT[/PROTOCOL]
			rest, proto, err := a.splitProto(spec)
			if err != nil {
				return err
			}
			f := splitFields(rest)
			if len(f) < 2 || len(f) > 3 {
				return &cliError{msg: fmt.Sprintf("invalid port specification %q: want [HOST_IP:]HOST_PORT:SANDBOX_PORT[/PROTOCOL]", spec), code: 1}
			}
			hostIP := ""
			if len(f) == 3 {
				hostIP, f = f[0], f[1:]
			}
			hp, err := parsePort(f[0], spec)
			if err != nil {
				return err
			}
			sp, err := parsePort(f[1], spec)
			if err != nil {
				return err
			}
			i := slices.IndexFunc(sb.Ports, func(p fakestate.Port) bool {
				return p.HostPort == hp && p.SandboxPort == sp && p.Protocol == proto && (hostIP == "" || hostIP == p.HostIP)
			})
			if i < 0 {
				return &cliError{msg: fmt.Sprintf("port %s is not published by sandbox '%s'", spec, sb.Name), code: 1}
			}
			sb.Ports = slices.Delete(sb.Ports, i, i+1)
		}
		for _, spec := range *publish {
			p, err := a.parsePublish(st, spec)
			if err != nil {
				return err
			}
			sb.Ports = append(sb.Ports, p)
			// "Publishing a local port starts a stopped sandbox" (§1.3).
			if sb.Status != "running" {
				sb.Status, sb.StartedAt = "running", a.now
			}
		}
		ports = sb.Ports
		return nil
	})
	if err != nil || len(*publish)+len(*unpublish) > 0 {
		return err
	}
	if *jsonFlag {
		// Format: entries as in docker-sandboxes-cli.md §2.6 ([3P] ls
		// ports); the top level (a bare array) is UNCONFIRMED (§9).
		return a.json(portEntries(ports))
	}
	// Listing format UNCONFIRMED: one binding per line in the PORTS column
	// form of §2.5.
	for _, p := range ports {
		fmt.Fprintln(a.stdout, portText(p))
	}
	return nil
}
