// Package inpod is the part of the kubernetes driver that runs inside the
// pods, as hidden verbs of sbx's own static binary (the same binary the
// sandbox pod's init container copies to /.sbx/sbx and the egress proxy
// pod runs). kubectl exec has no -e or -w, and the images sbx runs have no
// tools it can count on, so every exec goes through these:
//
//	__k8s-install-self DST   copy this binary to DST (the init container)
//	__k8s-exec -- ARGV       read a header line ({"env":…,"workdir":…}) from
//	                         stdin, then exec ARGV with the rest of stdin
//	__k8s-prepare …          write the proxy's address for the sandbox's
//	                         bridge, unpack the workspace from stdin, probe
//	                         that the network policy is enforced; a JSON
//	                         report on stdout
//	__k8s-tar DIR            write DIR as a tar stream (sbx pull)
//	__k8s-canary --listen A  accept and close connections on A: the port
//	                         the enforcement probe must not reach
//	__k8s-pin --allow A:P    pin the pod's egress to its proxy with nftables
//	                         rules in its own network namespace (the init
//	                         container with NET_ADMIN; see Pin)
//
// Secrets reach a command only in the header, over the exec stream:
// never in argv, the pod spec or any Kubernetes object.
package inpod

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/pflag"

	"github.com/sbxhq/sbx/internal/atomicfile"
	"github.com/sbxhq/sbx/internal/tarball"
)

// Verbs are the hidden verbs, by name, for cmd/sbx.
func Verbs() map[string]func(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	return map[string]func(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int{
		"__k8s-install-self": InstallSelf,
		"__k8s-exec":         Exec,
		"__k8s-prepare":      Prepare,
		"__k8s-tar":          Tar,
		"__k8s-canary":       Canary,
		"__k8s-pin":          Pin,
	}
}

// Header is what the client sends before an exec's stdin: the command's
// environment (secrets included) and working directory.
type Header struct {
	Env     map[string]string `json:"env,omitempty"`
	Workdir string            `json:"workdir,omitempty"`
}

// MaxHeader bounds the header line.
const MaxHeader = 1 << 20

// InstallSelf is __k8s-install-self DST: it copies this executable to DST,
// executable, and exits. The sandbox pod's init container runs it from
// sbx's helper image (FROM scratch, so there is no cp).
func InstallSelf(_ context.Context, args []string, _ io.Reader, _, stderr io.Writer) int {
	if len(args) != 1 {
		fmt.Fprintln(stderr, "usage: sbx __k8s-install-self DST")
		return 2
	}
	self, err := os.Executable()
	if err == nil {
		err = copyExecutable(self, args[0])
	}
	if err != nil {
		fmt.Fprintf(stderr, "sbx __k8s-install-self: %v\n", err)
		return 1
	}
	return 0
}

func copyExecutable(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	tmp := dst + ".tmp"
	out, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	if err := out.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, dst)
}

// readHeader reads the header line from r one byte at a time, so that
// nothing after it is consumed: the rest of r is the command's stdin.
func readHeader(r io.Reader) (Header, error) {
	var line []byte
	b := make([]byte, 1)
	for {
		n, err := r.Read(b)
		if n == 1 {
			if b[0] == '\n' {
				break
			}
			if len(line) >= MaxHeader {
				return Header{}, fmt.Errorf("exec header over %d bytes", MaxHeader)
			}
			line = append(line, b[0])
			continue
		}
		if err == io.EOF {
			return Header{}, errors.New("no exec header on stdin")
		}
		if err != nil {
			return Header{}, err
		}
	}
	var h Header
	if err := json.Unmarshal(line, &h); err != nil {
		return Header{}, fmt.Errorf("exec header: %v", err)
	}
	return h, nil
}

// Report is what __k8s-prepare prints.
type Report struct {
	// Unpacked is what the workspace received (with --untar).
	Unpacked *tarball.Stats `json:"unpacked,omitempty"`
	// Probe is the enforcement probe's result (with --probe-open).
	Probe *ProbeResult `json:"probe,omitempty"`
}

// ProbeResult says whether the sandbox reached its proxy and whether it
// could reach the canary port that its network policy forbids.
type ProbeResult struct {
	ProxyReached  bool   `json:"proxyReached"`
	CanaryReached bool   `json:"canaryReached"`
	Detail        string `json:"detail,omitempty"`
}

// Prepare is __k8s-prepare: with --upstream it writes the proxy's address
// to --upstream-file for the sandbox's bridge (sbx __sandbox-init); with
// --untar DIR it unpacks the tar stream on stdin into DIR; with
// --probe-open and --probe-closed it checks, for up to --probe-for, that
// the first address answers (the proxy) and the second (the canary beside
// it, which the network policy does not allow) does not: a cluster
// enforcing NetworkPolicy may program it some moments after the pod
// starts, so an answer from the canary is retried until then.
func Prepare(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := pflag.NewFlagSet("sbx __k8s-prepare", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	upstream := fs.String("upstream", "", "the egress proxy's address (host:port)")
	upstreamFile := fs.String("upstream-file", "", "where the sandbox's bridge reads it")
	untar := fs.String("untar", "", "unpack the tar stream on stdin into this directory")
	open := fs.String("probe-open", "", "an address the sandbox must reach (its proxy)")
	closed := fs.String("probe-closed", "", "an address the network policy must keep it from (the canary)")
	window := fs.Duration("probe-for", 20*time.Second, "how long the policy may take to be in force")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	fail := func(err error) int {
		fmt.Fprintf(stderr, "sbx __k8s-prepare: %v\n", err)
		return 1
	}
	var rep Report
	if *upstream != "" {
		if *upstreamFile == "" {
			return fail(errors.New("--upstream needs --upstream-file"))
		}
		if err := atomicfile.ReplaceBytes(*upstreamFile, []byte(*upstream+"\n"), 0o644); err != nil {
			return fail(err)
		}
	}
	if *untar != "" {
		if err := os.MkdirAll(*untar, 0o755); err != nil {
			return fail(err)
		}
		root, err := os.OpenRoot(*untar)
		if err != nil {
			return fail(err)
		}
		// The stream is the host's workspace (sbx push, create): its
		// .git comes whole, so that git in the sandbox works as on the
		// host.
		st, err := tarball.Extract(ctx, stdin, root, tarball.ExtractOptions{Limits: tarball.DefaultLimits, HostGit: true})
		root.Close()
		if err != nil {
			return fail(err)
		}
		rep.Unpacked = st
	}
	if *open != "" || *closed != "" {
		if *open == "" || *closed == "" {
			return fail(errors.New("--probe-open and --probe-closed go together"))
		}
		rep.Probe = probe(ctx, *open, *closed, *window)
	}
	if err := json.NewEncoder(stdout).Encode(rep); err != nil {
		return fail(err)
	}
	return 0
}

// probe dials open until it answers (the proxy may be starting), then
// closed until it stops answering or the window ends.
func probe(ctx context.Context, open, closed string, window time.Duration) *ProbeResult {
	deadline := time.Now().Add(window)
	dial := func(addr string) error {
		d := net.Dialer{Timeout: 2 * time.Second}
		c, err := d.DialContext(ctx, "tcp", addr)
		if err == nil {
			c.Close()
		}
		return err
	}
	r := &ProbeResult{}
	for {
		err := dial(open)
		if err == nil {
			r.ProxyReached = true
			break
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			r.Detail = fmt.Sprintf("cannot reach the egress proxy at %s: %v", open, err)
			return r
		}
		time.Sleep(200 * time.Millisecond)
	}
	for {
		err := dial(closed)
		if err != nil {
			r.Detail = fmt.Sprintf("%s (not allowed by the network policy) did not answer: %v", closed, err)
			return r
		}
		r.CanaryReached = true
		if time.Now().After(deadline) || ctx.Err() != nil {
			r.Detail = fmt.Sprintf("%s answered although the network policy allows only the proxy's port", closed)
			return r
		}
		time.Sleep(500 * time.Millisecond)
		r.CanaryReached = false
	}
}

// Tar is __k8s-tar DIR: DIR as a tar stream on stdout (see
// tarball.Write: no link followed, nothing but directories, files and
// links).
func Tar(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) int {
	if len(args) != 1 || !filepath.IsAbs(args[0]) {
		fmt.Fprintln(stderr, "usage: sbx __k8s-tar /ABSOLUTE/DIR")
		return 2
	}
	root, err := os.OpenRoot(args[0])
	if err != nil {
		fmt.Fprintf(stderr, "sbx __k8s-tar: %v\n", err)
		return 1
	}
	defer root.Close()
	if _, err := tarball.Write(ctx, root, stdout, tarball.DefaultLimits); err != nil {
		fmt.Fprintf(stderr, "sbx __k8s-tar: %v\n", err)
		return 1
	}
	return 0
}

// Canary is __k8s-canary --listen ADDR: it accepts connections and closes
// them, so that a probe can tell a port it reached from one it did not.
func Canary(ctx context.Context, args []string, _ io.Reader, _, stderr io.Writer) int {
	fs := pflag.NewFlagSet("sbx __k8s-canary", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	listen := fs.String("listen", "", "host:port")
	if err := fs.Parse(args); err != nil || *listen == "" {
		fmt.Fprintln(stderr, "usage: sbx __k8s-canary --listen HOST:PORT")
		return 2
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		fmt.Fprintf(stderr, "sbx __k8s-canary: %v\n", err)
		return 1
	}
	go func() {
		<-ctx.Done()
		ln.Close()
	}()
	for {
		c, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return 0
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			fmt.Fprintf(stderr, "sbx __k8s-canary: %v\n", err)
			return 1
		}
		c.Close()
	}
}
