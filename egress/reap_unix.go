//go:build unix

package egress

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

// reap collects the orphans that every PID 1 inherits until ctx ends.
func reap(ctx context.Context) {
	chld := make(chan os.Signal, 8)
	signal.Notify(chld, syscall.SIGCHLD)
	defer signal.Stop(chld)
	for {
		select {
		case <-ctx.Done():
			return
		case <-chld:
			for {
				var ws syscall.WaitStatus
				pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
				if pid <= 0 || err != nil {
					break
				}
			}
		}
	}
}
