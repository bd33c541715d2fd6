package kubernetes

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"io"
	"strings"
	"time"

	"github.com/sbxhq/sbx/driver"
	"github.com/sbxhq/sbx/driver/cliutil"
	"github.com/sbxhq/sbx/driver/kubernetes/inpod"
	"github.com/sbxhq/sbx/driver/runner"
	"github.com/sbxhq/sbx/egress"
	"github.com/sbxhq/sbx/netlog"
)

// target is the pod an exec for a sandbox goes to: its own, or the warm
// sandbox claimed for it.
func (d *Driver) target(name string) (place, string) {
	d.mu.Lock()
	c := d.claims[name]
	d.mu.Unlock()
	if c != nil {
		return c.place, c.pod
	}
	return d.where(name), SandboxPodName(name)
}

// proxyOf is the proxy pod of a sandbox: its own, or its pool's while a
// warm sandbox is claimed for it.
func (d *Driver) proxyOf(name string) (place, string) {
	d.mu.Lock()
	c := d.claims[name]
	d.mu.Unlock()
	if c != nil {
		return c.place, poolProxyName(name)
	}
	return d.where(name), EgressPodName(name)
}

// Exec runs argv in the sandbox through pods/exec. kubectl exec has no -e
// or -w, so the command runs under sbx's helper (__k8s-exec), which reads
// its environment (the secrets among it) and directory from a header line
// sent first on the exec's stdin: values travel only in the exec stream,
// never in argv, the pod or any object. A TTY cannot carry the header
// (the terminal would echo it), so a TTY exec sends it in an exec of its
// own first, into a 0600 file in the sandbox's in-memory /.sbx-run,
// which the second reads and removes.
func (d *Driver) Exec(ctx context.Context, name string, argv []string, o driver.ExecOptions) (int, error) {
	p, pod := d.target(name)
	h, err := json.Marshal(inpod.Header{Env: o.Env, Workdir: o.Workdir})
	if err != nil {
		return -1, err
	}
	h = append(h, '\n')
	exec := func(tty bool, helper []string, stdin io.Reader, stdout, stderr io.Writer) (int, error) {
		args := []string{"exec", "-i"}
		if tty {
			args = append(args, "-t")
		}
		args = append(append(args, pod, "-c", AgentContainer, "--", helperPath, "__k8s-exec"), helper...)
		args = append(append(args, "--"), argv...)
		en := &exitNoise{w: stderr}
		err := d.opts.Runner.Run(ctx, runner.Cmd{Args: d.kubectl(p, args...), Stdin: stdin, Stdout: stdout, Stderr: en})
		en.flush()
		return cliutil.ExitCode(err)
	}
	if !o.TTY {
		var stdin io.Reader = bytes.NewReader(h)
		if o.Stdin != nil {
			stdin = io.MultiReader(stdin, o.Stdin)
		}
		return exec(false, nil, stdin, o.Stdout, o.Stderr)
	}
	b := make([]byte, 8)
	rand.Read(b)
	file := runDir + "/exec-" + hex.EncodeToString(b)
	save := d.kubectl(p, "exec", "-i", pod, "-c", AgentContainer, "--", helperPath, "__k8s-exec", "--save-header", file)
	if err := d.opts.Runner.Run(ctx, runner.Cmd{Args: save, Stdin: bytes.NewReader(h)}); err != nil {
		return -1, err
	}
	return exec(true, []string{"--header-file", file}, o.Stdin, o.Stdout, o.Stderr)
}

// exitNoise passes an exec's stderr through but for the line kubectl adds
// when the remote command fails ("command terminated with exit code N"):
// the exit status says it, as docker exec's does.
type exitNoise struct {
	w       io.Writer
	pending []byte
}

const exitLine = "command terminated with exit code "

func (e *exitNoise) Write(b []byte) (int, error) {
	if e.w == nil {
		return len(b), nil
	}
	e.pending = append(e.pending, b...)
	for {
		i := bytes.IndexByte(e.pending, '\n')
		if i < 0 {
			break
		}
		line := e.pending[:i+1]
		if !strings.HasPrefix(string(line), exitLine) {
			if _, err := e.w.Write(line); err != nil {
				return len(b), err
			}
		}
		e.pending = e.pending[i+1:]
	}
	// A partial line that cannot be kubectl's goes on at once (a prompt).
	if len(e.pending) > 0 && !strings.HasPrefix(exitLine, string(e.pending[:min(len(e.pending), len(exitLine))])) {
		if _, err := e.w.Write(e.pending); err != nil {
			return len(b), err
		}
		e.pending = nil
	}
	return len(b), nil
}

// flush writes what is held back, unless it is kubectl's line.
func (e *exitNoise) flush() {
	if e.w != nil && len(e.pending) > 0 && !strings.HasPrefix(string(e.pending), exitLine) {
		e.w.Write(e.pending)
	}
	e.pending = nil
}

// readLog returns the proxy's decision lines (its container log; the
// proxy writes decisions to stderr), those since a time when since is not
// zero.
func (d *Driver) readLog(ctx context.Context, name string, since time.Time) ([]string, error) {
	p, pod := d.proxyOf(name)
	args := []string{"logs", "pod/" + pod, "-c", proxyName}
	if !since.IsZero() {
		args = append(args, "--since-time", since.UTC().Format(time.RFC3339))
	}
	out, err := d.run(ctx, p, args...)
	if err != nil {
		return nil, err
	}
	return egress.DecisionLines(string(out)), nil
}

// NetLog reads the proxy's decisions (see egress.FollowLog).
func (d *Driver) NetLog(ctx context.Context, name string, follow bool, emit func(netlog.Entry) error) error {
	return egress.FollowLog(ctx, func(ctx context.Context) ([]string, error) { return d.readLog(ctx, name, time.Time{}) }, follow, emit)
}

// EgressCount counts what the proxy denied, and what failed upstream,
// in [since, until].
func (d *Driver) EgressCount(ctx context.Context, name string, since, until time.Time, max int) (netlog.Count, error) {
	var c netlog.Count
	// kubectl logs --since-time has whole seconds: read from the second
	// before, and let the times decide.
	lines, err := d.readLog(ctx, name, since.Add(-time.Second))
	if err != nil {
		return c, err
	}
	for _, l := range lines {
		if p, ok := egress.Problem([]byte(l), since, until); ok {
			c.Add(p, max)
		}
	}
	return c, nil
}
