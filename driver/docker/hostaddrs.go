package docker

import (
	"context"
	"net"
	"net/netip"
	"net/url"
	"sort"
	"time"
)

// hostAddrs are the addresses of the machine the daemon runs on, which the
// egress proxy refuses whatever the policy says: the Docker host is never
// the sandbox's to reach, even where a user's blockCIDRs leave its range
// open. This machine's interface addresses are always included (the
// daemon runs here, or in Docker Desktop's VM whose host is this machine),
// and with DOCKER_HOST=tcp://NAME or ssh://NAME the addresses NAME
// resolves to. (The proxy also refuses its own addresses and gateways,
// which it finds itself.) Loopback is left out: the proxy refuses it
// anyway.
func (d *Driver) hostAddrs(ctx context.Context) []string {
	set := map[netip.Addr]bool{}
	add := func(a netip.Addr) {
		a = a.Unmap().WithZone("")
		if a.IsValid() && !a.IsLoopback() && !a.IsUnspecified() {
			set[a] = true
		}
	}
	if addrs, err := net.InterfaceAddrs(); err == nil {
		for _, a := range addrs {
			if p, err := netip.ParsePrefix(a.String()); err == nil {
				add(p.Addr())
			}
		}
	}
	if u, err := url.Parse(d.opts.Runner.Getenv("DOCKER_HOST")); err == nil && (u.Scheme == "tcp" || u.Scheme == "ssh") && u.Hostname() != "" {
		if a, err := netip.ParseAddr(u.Hostname()); err == nil {
			add(a)
		} else {
			rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			ips, _ := net.DefaultResolver.LookupNetIP(rctx, "ip", u.Hostname())
			cancel()
			for _, ip := range ips {
				add(ip)
			}
		}
	}
	out := make([]string, 0, len(set))
	for a := range set {
		out = append(out, a.String())
	}
	sort.Strings(out)
	return out
}
