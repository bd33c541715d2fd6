//go:build !linux

package inpod

import (
	"errors"
	"net/netip"
)

var errNotLinux = errors.New("sbx __k8s-pin writes nftables rules inside a Linux pod, not on this OS")

func pin([]netip.AddrPort) error { return errNotLinux }

func unpin() error { return errNotLinux }
