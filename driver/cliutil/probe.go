package cliutil

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/sbxhq/sbx/driver/runner"
)

// Probe runs read-only backend commands for `sbx doctor --probe`, checks
// every output with the parser sbx itself uses for it, and writes a report
// a user can attach to a bug: each command, what it printed and whether
// sbx understood it, with this machine's values (sandbox names, paths,
// host names of the user's rules and logs) replaced by stable
// placeholders. It never runs a command that reads a secret. The report is
// a transcript in SBX_TRACE's format (runner), so either becomes a test
// fixture the same way (docs/backend-fixtures.md).
type Probe struct {
	cli     *CLI
	entries []probeEntry
	values  map[string]string // value of this machine → placeholder
	counts  map[string]int
	failed  int
}

type probeEntry struct {
	args           []string
	stdout, stderr string
	exit           int
	check          string
}

// Placeholder kinds for Redact.
const (
	Sandbox = "sandbox"
	Host    = "host"
	Path    = "path"
)

// NewProbe starts a probe of c's backend.
func NewProbe(c *CLI) *Probe {
	return &Probe{cli: c, values: map[string]string{}, counts: map[string]int{}}
}

// Run runs a read-only call and, when check is set, checks its output with
// it (check gets the exit status too: `policy check` exits 1 on a denial).
// It returns the output and whether the call and the check succeeded.
func (p *Probe) Run(ctx context.Context, check func(out []byte, exit int) error, args ...string) ([]byte, bool) {
	var stdout, stderr bytes.Buffer
	err := p.cli.Runner.Run(ctx, runner.Cmd{Args: p.cli.Cmd(args...), Stdout: &stdout, Stderr: &stderr})
	e := probeEntry{args: args, stdout: stdout.String(), stderr: stderr.String(), check: "not checked"}
	var re *runner.Error
	switch {
	case errors.As(err, &re) && re.ExitCode >= 0:
		e.exit = re.ExitCode
	case err != nil:
		e.exit, e.check = -1, "FAILED: "+err.Error()
	}
	if e.exit >= 0 && check != nil {
		e.check = "ok"
		if cerr := check(stdout.Bytes(), e.exit); cerr != nil {
			e.check = "FAILED: " + cerr.Error()
		}
	}
	if strings.HasPrefix(e.check, "FAILED") {
		p.failed++
	}
	p.entries = append(p.entries, e)
	return stdout.Bytes(), e.check == "ok" || check == nil && e.exit == 0
}

// Redact registers a value of this machine to be replaced in the report by
// a placeholder of its kind ("sandbox-1", "host-1.example",
// "/redacted/path-1"); the same value always gets the same placeholder.
func (p *Probe) Redact(kind, value string) {
	if value == "" || p.values[value] != "" {
		return
	}
	p.counts[kind]++
	n := p.counts[kind]
	switch kind {
	case Sandbox:
		p.values[value] = fmt.Sprintf("sandbox-%d", n)
	case Host:
		p.values[value] = fmt.Sprintf("host-%d.example", n)
	default:
		p.values[value] = fmt.Sprintf("/redacted/path-%d", n)
	}
}

// Err reports the checks that failed.
func (p *Probe) Err() error {
	if p.failed == 0 {
		return nil
	}
	return fmt.Errorf("%d of %d outputs of %s are not what sbx expects; see the report", p.failed, len(p.entries), p.cli.Name)
}

// Write writes the report: a header, then one transcript entry per call.
func (p *Probe) Write(w io.Writer, driver string) error {
	var b strings.Builder
	version := "version unknown"
	if p.cli.known {
		version = p.cli.version.String()
	}
	fmt.Fprintf(&b, "# sbx doctor --probe: driver %s, %s %s\n", driver, p.cli.Name, version)
	b.WriteString("# Values of this machine are replaced: sandbox names by sandbox-N, host names of\n" +
		"# your rules and logs by host-N.example, paths by /redacted/path-N. No secret was read.\n")
	for _, e := range p.entries {
		fmt.Fprintf(&b, "$ %s\n", p.redact(runner.Quote(append(strings.Fields(p.cli.Name), e.args...))))
		for _, part := range []struct{ name, text string }{{"stdout", e.stdout}, {"stderr", e.stderr}} {
			if part.text == "" {
				continue
			}
			fmt.Fprintf(&b, "# %s:\n", part.name)
			for _, line := range strings.Split(strings.TrimSuffix(p.redact(part.text), "\n"), "\n") {
				b.WriteString("| " + line + "\n")
			}
		}
		fmt.Fprintf(&b, "# exit %d\n# check: %s\n", e.exit, p.redact(e.check))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// redact replaces every registered value in s, longest first, where it
// stands on its own: not part of a longer name, host name or path
// component ("api" is replaced in "sandbox:api", not in "api.example.com").
func (p *Probe) redact(s string) string {
	values := make([]string, 0, len(p.values))
	for v := range p.values {
		values = append(values, v)
	}
	sort.Slice(values, func(i, j int) bool {
		if len(values[i]) != len(values[j]) {
			return len(values[i]) > len(values[j])
		}
		return values[i] < values[j]
	})
	var b strings.Builder
	for i := 0; i < len(s); {
		matched := false
		for _, v := range values {
			if strings.HasPrefix(s[i:], v) && (i == 0 || !nameByte(s[i-1])) &&
				(i+len(v) == len(s) || !nameByte(s[i+len(v)])) {
				b.WriteString(p.values[v])
				i += len(v)
				matched = true
				break
			}
		}
		if !matched {
			b.WriteByte(s[i])
			i++
		}
	}
	return b.String()
}

// nameByte reports whether c can be part of a sandbox name, host name or
// path component.
func nameByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '.' || c == '_'
}
