//go:build !linux

package egress

import "net/netip"

// localAddrs finds nothing outside Linux: the proxy runs in a Linux
// container; elsewhere it runs only in tests and benchmarks.
func localAddrs() ([]netip.Addr, error) { return nil, nil }
