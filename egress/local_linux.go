//go:build linux

package egress

import (
	"bufio"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
)

// localAddrs finds the addresses of the network namespace the proxy runs
// in: those of its interfaces, and the gateways of its IPv4 and IPv6
// routes (the Docker host's bridge address, among others). The proxy
// refuses them whatever its policy says.
func localAddrs() ([]netip.Addr, error) {
	ifaddrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil, fmt.Errorf("interface addresses: %v", err)
	}
	var out []netip.Addr
	for _, a := range ifaddrs {
		ipnet, ok := a.(*net.IPNet)
		if !ok {
			return nil, fmt.Errorf("interface address %v: unexpected type %T", a, a)
		}
		if ip, ok := netip.AddrFromSlice(ipnet.IP); ok {
			out = append(out, canonical(ip))
		}
	}
	for _, rt := range []struct {
		path     string
		optional bool // absent when the kernel has no IPv6
		parse    func(io.Reader) ([]netip.Addr, error)
	}{
		{"/proc/net/route", false, parseRoute},
		{"/proc/net/ipv6_route", true, parseIPv6Route},
	} {
		f, err := os.Open(rt.path)
		if rt.optional && errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		gws, err := rt.parse(f)
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("%s: %v", rt.path, err)
		}
		out = append(out, gws...)
	}
	return out, nil
}

// rtfGateway is RTF_GATEWAY of include/uapi/linux/route.h (also
// include/uapi/linux/ipv6_route.h): the route goes through a gateway.
const rtfGateway = 0x2

// routeHeader is the first line of /proc/net/route.
var routeHeader = []string{"Iface", "Destination", "Gateway", "Flags", "RefCnt", "Use", "Metric", "Mask", "MTU", "Window", "IRTT"}

// parseRoute returns the gateways of /proc/net/route. The kernel writes
// it in net/ipv4/fib_trie.c, fib_route_seq_show: a header line, then per
// route "%s\t%08X\t%08X\t%04X\t%d\t%u\t%d\t%08X\t%d\t%u\t%u" of the
// interface, destination, gateway, flags, refcount, use, metric, mask,
// MTU, window and IRTT, padded with spaces to 127 characters. The
// addresses are __be32 values printed as integers: their bytes in
// memory order are the address, so they are read in the machine's own
// byte order.
func parseRoute(r io.Reader) ([]netip.Addr, error) {
	sc := bufio.NewScanner(r)
	if !sc.Scan() {
		if err := sc.Err(); err != nil {
			return nil, err
		}
		return nil, errors.New("empty, expected a header line")
	}
	if h := strings.Fields(sc.Text()); !slices.Equal(h, routeHeader) {
		return nil, fmt.Errorf("unknown header %q", sc.Text())
	}
	var out []netip.Addr
	for n := 2; sc.Scan(); n++ {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		if len(f) != len(routeHeader) || len(f[2]) != 8 || len(f[3]) != 4 {
			return nil, fmt.Errorf("line %d: unknown shape %q", n, sc.Text())
		}
		gw, err1 := strconv.ParseUint(f[2], 16, 32)
		flags, err2 := strconv.ParseUint(f[3], 16, 16)
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("line %d: unknown shape %q", n, sc.Text())
		}
		if flags&rtfGateway == 0 || gw == 0 {
			continue
		}
		var b [4]byte
		binary.NativeEndian.PutUint32(b[:], uint32(gw))
		out = append(out, netip.AddrFrom4(b))
	}
	return out, sc.Err()
}

// parseIPv6Route returns the gateways of /proc/net/ipv6_route. The
// kernel writes it in net/ipv6/ip6_fib.c, ipv6_route_native_seq_show:
// per route, no header, "%pi6 %02x %pi6 %02x %pi6 %08x %08x %08x %08x
// %8s" of the destination and its prefix length, the source and its
// prefix length, the next hop (32 hex digits in network order, zero when
// there is none), metric, refcount, use, flags and interface.
func parseIPv6Route(r io.Reader) ([]netip.Addr, error) {
	sc := bufio.NewScanner(r)
	var out []netip.Addr
	for n := 1; sc.Scan(); n++ {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		if len(f) != 10 || len(f[4]) != 32 || len(f[8]) != 8 {
			return nil, fmt.Errorf("line %d: unknown shape %q", n, sc.Text())
		}
		var b [16]byte
		_, err1 := hex.Decode(b[:], []byte(f[4]))
		flags, err2 := strconv.ParseUint(f[8], 16, 32)
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("line %d: unknown shape %q", n, sc.Text())
		}
		gw := netip.AddrFrom16(b)
		if flags&rtfGateway == 0 || gw.IsUnspecified() {
			continue
		}
		out = append(out, canonical(gw))
	}
	return out, sc.Err()
}
