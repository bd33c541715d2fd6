//go:build linux

package egress

import (
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// routeTable is /proc/net/route as Linux writes it (lines padded with
// spaces to 127 characters; on a little-endian machine 192.0.2.1 reads
// 010200C0): a default route via 192.0.2.1, a host route via
// 198.51.100.7 and two directly connected networks.
var routeTable = "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT                                                       \n" +
	"eth0\t00000000\t" + be32("192.0.2.1") + "\t0003\t0\t0\t0\t00000000\t0\t0\t0                                                                               \n" +
	"docker0\t" + be32("172.17.0.0") + "\t00000000\t0001\t0\t0\t0\t" + be32("255.255.0.0") + "\t0\t0\t0                                                                            \n" +
	"eth0\t" + be32("192.0.2.0") + "\t00000000\t0001\t0\t0\t0\t" + be32("255.255.255.0") + "\t0\t0\t0                                                                               \n" +
	"eth1\t" + be32("10.10.10.10") + "\t" + be32("198.51.100.7") + "\t0007\t0\t0\t0\tFFFFFFFF\t0\t0\t0                                                                               \n"

// be32 prints an IPv4 address as the kernel prints a __be32 with %08X.
func be32(s string) string {
	b := netip.MustParseAddr(s).As4()
	return fmt.Sprintf("%08X", binary.NativeEndian.Uint32(b[:]))
}

// ipv6RouteTable is /proc/net/ipv6_route: a default route via fd00::1,
// a link-local gateway on another route, and routes with no gateway.
const ipv6RouteTable = `fd000000000000000000000000000000 40 00000000000000000000000000000000 00 00000000000000000000000000000000 00000100 00000001 00000000 00000001     eth0
fe800000000000000000000000000000 40 00000000000000000000000000000000 00 00000000000000000000000000000000 00000100 00000001 00000000 00000001  docker0
00000000000000000000000000000000 00 00000000000000000000000000000000 00 fd000000000000000000000000000001 00000400 00000002 00000000 00000003     eth0
20010db8000000000000000000000000 30 00000000000000000000000000000000 00 fe800000000000000000000000000001 00000400 00000002 00000000 00000003     eth1
00000000000000000000000000000001 80 00000000000000000000000000000000 00 00000000000000000000000000000000 00000000 00000002 00000000 80200001       lo
`

func TestParseRoute(t *testing.T) {
	got, err := parseRoute(strings.NewReader(routeTable))
	if err != nil {
		t.Fatal(err)
	}
	want := []netip.Addr{netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("198.51.100.7")}
	if diff := cmp.Diff(want, got, cmp.Comparer(func(a, b netip.Addr) bool { return a == b })); diff != "" {
		t.Errorf("gateways (-want +got):\n%s", diff)
	}
	for name, in := range map[string]string{
		"empty":          "",
		"unknown header": "Iface\tDest\tGateway\n",
		"short line":     strings.SplitAfter(routeTable, "\n")[0] + "eth0\t00000000\t010200C0\n",
		"bad gateway":    strings.SplitAfter(routeTable, "\n")[0] + "eth0\t00000000\t0102Z0C0\t0003\t0\t0\t0\t00000000\t0\t0\t0\n",
		"IPv6 gateway":   strings.SplitAfter(routeTable, "\n")[0] + "eth0\t00000000\tfd000000000000000000000000000001\t0003\t0\t0\t0\t00000000\t0\t0\t0\n",
	} {
		if _, err := parseRoute(strings.NewReader(in)); err == nil {
			t.Errorf("%s: parsed", name)
		}
	}
}

func TestParseIPv6Route(t *testing.T) {
	got, err := parseIPv6Route(strings.NewReader(ipv6RouteTable))
	if err != nil {
		t.Fatal(err)
	}
	want := []netip.Addr{netip.MustParseAddr("fd00::1"), netip.MustParseAddr("fe80::1")}
	if diff := cmp.Diff(want, got, cmp.Comparer(func(a, b netip.Addr) bool { return a == b })); diff != "" {
		t.Errorf("gateways (-want +got):\n%s", diff)
	}
	for name, in := range map[string]string{
		"short line":  "00000000000000000000000000000000 00 00000000000000000000000000000000 00 fd000000000000000000000000000001 00000400\n",
		"bad hex":     "00000000000000000000000000000000 00 00000000000000000000000000000000 00 fd00000000000000000000000000000g 00000400 00000002 00000000 00000003     eth0\n",
		"short addr":  "00000000000000000000000000000000 00 00000000000000000000000000000000 00 fd00::1 00000400 00000002 00000000 00000003     eth0\n",
		"IPv4 format": strings.SplitAfter(routeTable, "\n")[1],
	} {
		if _, err := parseIPv6Route(strings.NewReader(in)); err == nil {
			t.Errorf("%s: parsed", name)
		}
	}
}

// TestLocalAddrs reads this machine's own tables: every interface
// address is there, loopback included.
func TestLocalAddrs(t *testing.T) {
	got, err := localAddrs()
	if err != nil {
		t.Fatal(err)
	}
	have := map[netip.Addr]bool{}
	for _, a := range got {
		have[a] = true
	}
	ifaddrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range ifaddrs {
		ip, _ := netip.AddrFromSlice(a.(*net.IPNet).IP)
		if !have[ip.Unmap()] {
			t.Errorf("interface address %v missing from %v", a, got)
		}
	}
	if !have[netip.MustParseAddr("127.0.0.1")] {
		t.Errorf("127.0.0.1 missing from %v", got)
	}
}
