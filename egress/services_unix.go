//go:build unix

package egress

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"sync"
	"syscall"

	"github.com/spf13/pflag"
)

// serviceSignals are the signals PID 1 of a service container passes on
// to the service's command.
var serviceSignals = []os.Signal{
	syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP,
	syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2,
}

// ServiceInitMain is `sbx __service-init --socket PATH -- COMMAND
// [ARGS...]`, PID 1 of a service container: it runs COMMAND (looked up in
// PATH, with the init's environment and standard streams), passes on to
// it SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1 and SIGUSR2, reaps every
// process that ends (orphans are PID 1's), keeps connections parked on
// the proxy's socket PATH for the service's ports (ParkPorts), serves the
// sandbox's proxy on 127.0.0.1:3128 over --proxy-socket when given
// (Bridge), and exits
// with COMMAND's exit status, or 128+N when signal N killed it. A COMMAND
// that cannot be started exits 127, a usage error 2.
//
// The init lives as long as COMMAND: the end of ctx (sbx's main ends it
// on SIGTERM and SIGINT, which are passed on anyway) stops nothing.
//
// COMMAND shares the init's process group: a signal sent to the group (^C
// on a terminal) reaches it both directly and passed on.
func ServiceInitMain(ctx context.Context, args []string, stderr io.Writer) int {
	fs := pflag.NewFlagSet("sbx "+ServiceInitVerb, pflag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.SetInterspersed(false) // COMMAND's own flags are COMMAND's
	socket := fs.String("socket", "", "the egress proxy's Unix socket, to park connections to the service's ports on")
	proxySocket := fs.String("proxy-socket", "", "the egress proxy's socket for the service's own requests, served on 127.0.0.1:3128 (services.NAME.egress)")
	if err := fs.Parse(args); err != nil {
		if !errors.Is(err, pflag.ErrHelp) {
			fmt.Fprintf(stderr, "sbx %s: %v\n", ServiceInitVerb, err)
		}
		return 2
	}
	command := fs.Args()
	if *socket == "" || len(command) == 0 {
		fmt.Fprintf(stderr, "usage: sbx %s --socket PATH -- COMMAND [ARGS...]\n", ServiceInitVerb)
		return 2
	}

	// Listen before COMMAND starts, so that no signal and no end of a
	// process is missed.
	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs, serviceSignals...)
	defer signal.Stop(sigs)
	chld := make(chan os.Signal, 1)
	signal.Notify(chld, syscall.SIGCHLD)
	defer signal.Stop(chld)
	// Processes that ended before the SIGCHLD handler was in place.
	reapChildren(0)

	cmd := exec.Command(command[0], command[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(stderr, "sbx %s: %v\n", ServiceInitVerb, err)
		return 127
	}
	// The child is waited for by reapChildren, never cmd.Wait: both
	// would compete for its status.
	defer cmd.Process.Release()
	pid := cmd.Process.Pid

	parkCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	var wg sync.WaitGroup
	wg.Go(func() { ParkPorts(parkCtx, *socket) })
	if *proxySocket != "" {
		// The service's way out, when the file gives it one: the
		// sandbox's proxy, as the sandbox reaches it.
		ln, err := ListenBridge(parkCtx, "127.0.0.1:3128")
		if err != nil {
			fmt.Fprintf(stderr, "sbx %s: %v\n", ServiceInitVerb, err)
		} else {
			wg.Go(func() { Bridge(parkCtx, ln, *proxySocket) })
		}
	}
	defer func() {
		cancel()
		wg.Wait()
	}()

	for {
		select {
		case s := <-sigs:
			// Once COMMAND has been reaped (and the loop is about to
			// end) this fails; on Linux the pidfd behind Process makes
			// sure no other process with a reused pid gets the signal.
			cmd.Process.Signal(s)
		case <-chld:
			if ws, ok := reapChildren(pid); ok {
				return serviceExitCode(ws)
			}
		}
	}
}

// reapChildren waits for every child that has ended, without blocking,
// and returns the wait status of pid if pid was among them.
func reapChildren(pid int) (syscall.WaitStatus, bool) {
	var status syscall.WaitStatus
	found := false
	for {
		var ws syscall.WaitStatus
		p, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if p <= 0 || err != nil {
			return status, found
		}
		// A stop is reported only for a traced child: not its end.
		if p == pid && (ws.Exited() || ws.Signaled()) {
			status, found = ws, true
		}
	}
}

// serviceExitCode is the shell's exit code of a process that ended with
// ws: its exit status, or 128+N when signal N killed it.
func serviceExitCode(ws syscall.WaitStatus) int {
	switch {
	case ws.Exited():
		return ws.ExitStatus()
	case ws.Signaled():
		return 128 + int(ws.Signal())
	}
	return 1
}
