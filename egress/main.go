package egress

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/pflag"
)

// ProxyMain is `sbx __egress-proxy`: serve the policy on --listen
// (unix:/path or host:port), log decisions to --log, reload on SIGHUP, and
// with --control answer control requests on stdin (see ServeControl).
func ProxyMain(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	return proxyMain(ctx, args, stdin, stdout, stderr, Options{})
}

// proxyMain is ProxyMain with the proxy's seams (resolver, dialer, local
// addresses) set by the caller; the flags set the rest.
func proxyMain(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, opts Options) int {
	fs := pflag.NewFlagSet("sbx __egress-proxy", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	policy := fs.String("policy", "", "policy file (JSON)")
	listen := fs.String("listen", "", "unix:/path/to/socket or host:port")
	logPath := fs.String("log", "", "decision log, JSON lines (default stderr)")
	ready := fs.String("ready-file", "", "file to create once listening")
	initPolicy := fs.String("init-policy", "", "policy JSON to write to --policy when that file does not exist yet")
	control := fs.Bool("control", false, "answer control requests (JSON lines) on stdin, replies on stdout")
	hostRelay := fs.String("host-relay", "", "the Unix socket of the relay to the host's loopback (network.hostPorts)")
	services := fs.String("services", "", "the directory of the services' sockets (NAME/service.sock)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *policy == "" || *listen == "" {
		fmt.Fprintln(stderr, "sbx __egress-proxy: --policy and --listen are required")
		return 2
	}
	if *initPolicy != "" {
		if err := writeIfAbsent(*policy, []byte(*initPolicy)); err != nil {
			fmt.Fprintf(stderr, "sbx __egress-proxy: %v\n", err)
			return 1
		}
	}
	var logw io.Writer = stderr
	if *logPath != "" {
		f, err := os.OpenFile(*logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
		if err != nil {
			fmt.Fprintf(stderr, "sbx __egress-proxy: %v\n", err)
			return 1
		}
		defer f.Close()
		logw = f
	}
	opts.PolicyPath, opts.Log, opts.HostRelay = *policy, logw, *hostRelay
	p, err := New(opts)
	if err != nil {
		fmt.Fprintf(stderr, "sbx __egress-proxy: %v\n", err)
		return 1
	}
	ln, err := listenOn(*listen)
	if err != nil {
		fmt.Fprintf(stderr, "sbx __egress-proxy: %v\n", err)
		return 1
	}
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	go func() {
		for range hup {
			p.Reload()
		}
	}()
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGTERM, os.Interrupt)
	defer stop()
	if *services != "" {
		if err := p.ServeServiceSockets(ctx, *services); err != nil {
			fmt.Fprintf(stderr, "sbx __egress-proxy: %v\n", err)
			return 1
		}
	}
	if *control {
		go func() {
			if err := p.ServeControl(stdin, stdout); err != nil {
				fmt.Fprintf(stderr, "sbx __egress-proxy: control: %v\n", err)
			}
		}()
	}
	if *ready != "" {
		os.WriteFile(*ready, []byte("ready\n"), 0o644)
	}
	if err := p.Serve(ctx, ln); err != nil {
		fmt.Fprintf(stderr, "sbx __egress-proxy: %v\n", err)
		return 1
	}
	return 0
}

// listenOn listens on unix:/path (removing a stale socket, and letting any
// user of the sandbox connect) or on a TCP address.
func listenOn(addr string) (net.Listener, error) {
	if path, ok := strings.CutPrefix(addr, "unix:"); ok {
		os.Remove(path)
		ln, err := net.Listen("unix", path)
		if err != nil {
			return nil, err
		}
		if err := os.Chmod(path, 0o666); err != nil {
			ln.Close()
			return nil, err
		}
		return ln, nil
	}
	return net.Listen("tcp", strings.TrimPrefix(addr, "tcp:"))
}

// BridgeMain is `sbx __egress-bridge`: listen on --listen (default
// 127.0.0.1:3128) and carry each connection to the proxy's --socket.
func BridgeMain(ctx context.Context, args []string, stderr io.Writer) int {
	fs := pflag.NewFlagSet("sbx __egress-bridge", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	listen := fs.String("listen", "127.0.0.1:3128", "address the sandbox's HTTP(S)_PROXY points at")
	socket := fs.String("socket", "", "the egress proxy's Unix socket")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *socket == "" {
		fmt.Fprintln(stderr, "sbx __egress-bridge: --socket is required")
		return 2
	}
	ln, err := ListenBridge(ctx, *listen)
	if err != nil {
		fmt.Fprintf(stderr, "sbx __egress-bridge: %v\n", err)
		return 1
	}
	if err := Bridge(ctx, ln, *socket); err != nil {
		fmt.Fprintf(stderr, "sbx __egress-bridge: %v\n", err)
		return 1
	}
	return 0
}

// writeIfAbsent creates path with data unless it exists, atomically, so a
// proxy restarting on its volume keeps the policy written since.
func writeIfAbsent(path string, data []byte) error {
	if _, err := os.Stat(path); err == nil {
		return nil
	}
	tmp := path + ".init"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	if err := os.Link(tmp, path); err != nil && !os.IsExist(err) {
		os.Remove(tmp)
		return err
	}
	return os.Remove(tmp)
}
