//go:build linux

package inpod

import (
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"

	"github.com/google/nftables"
	"golang.org/x/sys/unix"
)

// TestPinRules writes the pin table into a network namespace of the
// test's own (root only), twice (an init container run again replaces
// it), and has nft, an independent reader, print it: the drop policies
// and exactly the accept rules the doc of Pin promises.
func TestPinRules(t *testing.T) {
	if os.Geteuid() != 0 {
		if os.Getenv("SBX_E2E") == "1" {
			t.Fatal("SBX_E2E=1 but not root: a network namespace cannot be made")
		}
		t.Skip("needs root (a network namespace of its own); set SBX_E2E=1 to make this a failure")
	}
	nft, err := exec.LookPath("nft")
	if err != nil {
		t.Fatalf("nft (Debian's nftables) reads the table back: %v", err)
	}
	// A thread of its own in a new network namespace, kept until the
	// test ends; the rest of the test reaches it by its /proc path.
	nsPath := make(chan string)
	release := make(chan struct{})
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the namespace
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			nsPath <- "error: " + err.Error()
			return
		}
		nsPath <- fmt.Sprintf("/proc/%d/task/%d/ns/net", os.Getpid(), unix.Gettid())
		<-release
	}()
	ns := <-nsPath
	t.Cleanup(func() { close(release) })
	if strings.HasPrefix(ns, "error: ") {
		t.Fatal(ns)
	}
	f, err := os.Open(ns)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	c, err := nftables.New(nftables.WithNetNSFd(int(f.Fd())))
	if err != nil {
		t.Fatal(err)
	}
	to := []netip.AddrPort{netip.MustParseAddrPort("192.0.2.7:3128"), netip.MustParseAddrPort("[2001:db8::7]:3128")}
	for i := range 2 {
		if err := pinWith(c, to); err != nil {
			t.Fatalf("pin, time %d: %v", i+1, err)
		}
	}
	out, err := exec.Command("nsenter", "--net="+ns, nft, "list", "table", "inet", PinTable).CombinedOutput()
	if err != nil {
		t.Fatalf("nft list: %v: %s", err, out)
	}
	var got []string
	for _, l := range strings.Split(string(out), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			got = append(got, l)
		}
	}
	want := []string{
		"table inet sbx-pin {",
		"chain output {",
		"type filter hook output priority filter; policy drop;",
		`oifname "lo" accept`,
		"ct state established,related accept",
		"ip daddr 192.0.2.7 tcp dport 3128 accept",
		"ip6 daddr 2001:db8::7 tcp dport 3128 accept",
		"icmpv6 type nd-router-solicit accept",
		"icmpv6 type nd-neighbor-solicit accept",
		"icmpv6 type nd-neighbor-advert accept",
		"}",
		"chain input {",
		"type filter hook input priority filter; policy drop;",
		`iifname "lo" accept`,
		"ct state established,related accept",
		"icmpv6 type nd-router-advert accept",
		"icmpv6 type nd-neighbor-solicit accept",
		"icmpv6 type nd-neighbor-advert accept",
		"}",
		"}",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("nft list table inet %s:\n%s\nwant:\n%s", PinTable, strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestPinArgs: what is not an address and port is refused before any
// rule is written.
func TestPinArgs(t *testing.T) {
	for _, a := range [][]string{nil, {"--allow", "proxy:3128"}, {"--allow", "10.0.0.1"}, {"--allow", "0.0.0.0:3128"}, {"--allow", "10.0.0.1:0"}, {"--allow", "[fe80::1%eth0]:3128"}} {
		var out, errOut strings.Builder
		if code := Pin(t.Context(), a, nil, &out, &errOut); code != 2 {
			t.Errorf("Pin %q: exit %d, want 2 (%s)", a, code, errOut.String())
		}
	}
}
