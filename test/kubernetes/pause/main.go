//go:build linux

// Command pause is the pod sandbox ("infra") container of sbx's test
// cluster: containerd's CRI starts it first in every pod to hold the pod's
// namespaces. Like registry.k8s.io/pause (which cannot be pulled here: no
// registry) it sleeps until SIGTERM or SIGINT, then exits 0, and as PID 1 of
// a pod sharing its PID namespace it reaps orphaned children.
// test/kubernetes/cluster builds it statically into an image FROM scratch.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sig := make(chan os.Signal, 8)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
	for s := range sig {
		if s != syscall.SIGCHLD {
			os.Exit(0)
		}
		reap()
	}
}

// reap collects every exited child without blocking; one SIGCHLD may stand
// for several exits.
func reap() {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		if err == syscall.EINTR {
			continue
		}
		if pid <= 0 || err != nil {
			return
		}
	}
}
