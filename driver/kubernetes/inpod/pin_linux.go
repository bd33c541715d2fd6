//go:build linux

package inpod

import (
	"errors"
	"fmt"
	"net/netip"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
)

// pin writes the rules in the network namespace of this process.
func pin(to []netip.AddrPort) error {
	c, err := nftables.New()
	if err != nil {
		return err
	}
	return pinWith(c, to)
}

func unpin() error {
	c, err := nftables.New()
	if err != nil {
		return err
	}
	c.DelTable(&nftables.Table{Family: nftables.TableFamilyINet, Name: PinTable})
	return c.Flush()
}

// pinWith writes the table through c (a test's: another network
// namespace), replacing one there is, in one batch, then reads it back.
func pinWith(c *nftables.Conn, to []netip.AddrPort) error {
	tables, err := c.ListTablesOfFamily(nftables.TableFamilyINet)
	if err != nil {
		return fmt.Errorf("listing the nftables tables (the container needs NET_ADMIN): %w", err)
	}
	t := &nftables.Table{Family: nftables.TableFamilyINet, Name: PinTable}
	for _, old := range tables {
		if old.Name == PinTable {
			c.DelTable(t)
		}
	}
	c.AddTable(t)
	drop := nftables.ChainPolicyDrop
	out := c.AddChain(&nftables.Chain{Name: "output", Table: t, Type: nftables.ChainTypeFilter,
		Hooknum: nftables.ChainHookOutput, Priority: nftables.ChainPriorityFilter, Policy: &drop})
	in := c.AddChain(&nftables.Chain{Name: "input", Table: t, Type: nftables.ChainTypeFilter,
		Hooknum: nftables.ChainHookInput, Priority: nftables.ChainPriorityFilter, Policy: &drop})
	want := map[string]int{}
	add := func(ch *nftables.Chain, exprs ...expr.Any) {
		c.AddRule(&nftables.Rule{Table: t, Chain: ch, Exprs: append(exprs, &expr.Verdict{Kind: expr.VerdictAccept})})
		want[ch.Name]++
	}
	for _, r := range pinRules(to, true) {
		add(out, r...)
	}
	for _, r := range pinRules(nil, false) {
		add(in, r...)
	}
	if err := c.Flush(); err != nil {
		return fmt.Errorf("writing table inet %s (the container needs NET_ADMIN): %w", PinTable, err)
	}
	// Read back: the kernel holds the chains, their drop policy and
	// every rule.
	chains, err := c.ListChainsOfTableFamily(nftables.TableFamilyINet)
	if err != nil {
		return err
	}
	found := 0
	for _, ch := range chains {
		if ch.Table.Name != PinTable {
			continue
		}
		n, ok := want[ch.Name]
		if !ok {
			return fmt.Errorf("table inet %s has an unexpected chain %s", PinTable, ch.Name)
		}
		if ch.Policy == nil || *ch.Policy != nftables.ChainPolicyDrop {
			return fmt.Errorf("chain %s of table inet %s does not drop by default", ch.Name, PinTable)
		}
		rules, err := c.GetRules(t, ch)
		if err != nil {
			return err
		}
		if len(rules) != n {
			return fmt.Errorf("chain %s of table inet %s has %d rules, want %d", ch.Name, PinTable, len(rules), n)
		}
		found++
	}
	if found != len(want) {
		return errors.New("table inet " + PinTable + " is not in force after writing it")
	}
	return nil
}

// pinRules are the accept rules (without their verdict) of the output
// chain (out: loopback, replies, TCP to each of to, IPv6 neighbour
// discovery) or of the input chain (loopback, replies, neighbour
// discovery). Anything else meets the chain's drop policy.
func pinRules(to []netip.AddrPort, out bool) [][]expr.Any {
	ifKey := expr.MetaKeyIIFNAME
	nd := []byte{ndRouterAdvert, ndNeighborSolicit, ndNeighborAdvert}
	if out {
		ifKey = expr.MetaKeyOIFNAME
		nd = []byte{ndRouterSolicit, ndNeighborSolicit, ndNeighborAdvert}
	}
	rules := [][]expr.Any{
		// The interface is lo.
		{&expr.Meta{Key: ifKey, Register: 1}, &expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: ifname("lo")}},
		// ct state established,related.
		{
			&expr.Ct{Register: 1, Key: expr.CtKeySTATE},
			&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4,
				Mask: binaryutil.NativeEndian.PutUint32(expr.CtStateBitESTABLISHED | expr.CtStateBitRELATED),
				Xor:  binaryutil.NativeEndian.PutUint32(0)},
			&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: binaryutil.NativeEndian.PutUint32(0)},
		},
	}
	for _, ap := range to {
		proto, off, addr := byte(unix.NFPROTO_IPV4), uint32(16), ap.Addr().AsSlice()
		if ap.Addr().Is6() {
			proto, off = unix.NFPROTO_IPV6, 24
		}
		rules = append(rules, []expr.Any{
			&expr.Meta{Key: expr.MetaKeyNFPROTO, Register: 1},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{proto}},
			&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: off, Len: uint32(len(addr))},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: addr},
			&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{unix.IPPROTO_TCP}},
			&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: binaryutil.BigEndian.PutUint16(ap.Port())},
		})
	}
	// IPv6 needs neighbour discovery to reach anything on the link (its
	// gateway included); it carries no payload of the agent's.
	for _, typ := range nd {
		rules = append(rules, []expr.Any{
			&expr.Meta{Key: expr.MetaKeyNFPROTO, Register: 1},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{unix.NFPROTO_IPV6}},
			&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{unix.IPPROTO_ICMPV6}},
			&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 0, Len: 1},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{typ}},
		})
	}
	return rules
}

// ICMPv6 neighbour discovery types (RFC 4861 §4).
const (
	ndRouterSolicit   = 133
	ndRouterAdvert    = 134
	ndNeighborSolicit = 135
	ndNeighborAdvert  = 136
)

// ifname is an interface name as the kernel compares it (IFNAMSIZ bytes,
// NUL padded).
func ifname(n string) []byte {
	b := make([]byte, unix.IFNAMSIZ)
	copy(b, n)
	return b
}
