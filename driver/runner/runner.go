// Package runner runs backend commands (docker, Docker's sbx) for the
// drivers: every command with a context, its failure as an error that shows
// the command and its stderr, and, when tracing, a transcript with secret
// values redacted (SBX_TRACE) that can become a test fixture.
package runner

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/sbxhq/sbx/internal/redact"
)

// Runner runs commands. The zero value runs them untraced.
type Runner struct {
	// Trace, when set, receives one entry per command: its argv, exit code
	// and output, with Redact values replaced.
	Trace io.Writer
	// Env, when set, is the environment commands run with (os/exec's
	// Cmd.Env); nil inherits sbx's own.
	Env []string

	mu      sync.Mutex
	secrets redact.Set
}

// Redact registers values (secrets) that must never appear in a trace or an
// error message, in any of their common encodings.
func (r *Runner) Redact(values ...string) {
	r.secrets.Add(values...)
}

// Cmd describes one command.
type Cmd struct {
	Args   []string // Args[0] is the program
	Dir    string   // working directory; "" is sbx's own
	Stdin  io.Reader
	Env    []string // extra NAME=VALUE entries on top of the runner's
	Stdout io.Writer
	Stderr io.Writer
	// StreamStdout marks stdout as a data stream (an archive): it goes
	// to Stdout only, not into the trace, which says how many bytes it
	// was.
	StreamStdout bool
}

// Error is a failed command: what ran, how it ended and what it said.
type Error struct {
	Args     []string
	ExitCode int // -1 when it did not start or was killed
	Stderr   string
	Err      error
}

// Error is short: the command (whole when it is short, else the program
// and its verb), how it ended, and the first line of what it said. A long
// command line (a docker create carries kilobytes of labels) and the rest
// of the output are in SBX_TRACE's transcript.
func (e *Error) Error() string {
	msg := e.Command()
	if len(e.Args) > 0 {
		if q := Quote(append([]string{filepath.Base(e.Args[0])}, e.Args[1:]...)); len(q) <= maxCommand {
			msg = q
		} else {
			msg += " …"
		}
	}
	if e.ExitCode >= 0 {
		msg += fmt.Sprintf(": exit status %d", e.ExitCode)
	} else if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	if s := FirstLine(e.Stderr); s != "" {
		msg += ": " + s
	}
	return msg
}

// Command names the command for a message: the program's base name and
// the words of its verb ("docker create", "sbx policy allow network"),
// leaving out leading flags, arguments after the first flag, and anything
// past four words.
func (e *Error) Command() string {
	if len(e.Args) == 0 {
		return "(no command)"
	}
	words := []string{filepath.Base(e.Args[0])}
	rest := e.Args[1:]
	for len(rest) > 0 && strings.HasPrefix(rest[0], "-") {
		rest = rest[1:]
	}
	for _, a := range rest {
		if len(words) == 5 || !isWord(a) {
			break
		}
		words = append(words, a)
	}
	return strings.Join(words, " ")
}

func isWord(s string) bool {
	if s == "" || s[0] < 'a' || s[0] > 'z' {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// maxCommand is the longest command line an error repeats whole.
const maxCommand = 160

// maxLine bounds the output a message repeats.
const maxLine = 300

// FirstLine is the first non-blank line of a command's output, without
// the "Error: " its CLI puts before it, cut to a few hundred characters.
func FirstLine(out string) string {
	for _, line := range strings.Split(out, "\n") {
		line = strings.TrimSpace(line)
		for _, p := range []string{"Error: ", "error: ", "ERROR: "} {
			line = strings.TrimPrefix(line, p)
		}
		if line == "" {
			continue
		}
		if r := []rune(line); len(r) > maxLine {
			line = string(r[:maxLine]) + "…"
		}
		return line
	}
	return ""
}

func (e *Error) Unwrap() error { return e.Err }

// Output runs a command and returns its standard output. A non-zero exit is
// an *Error carrying stderr.
func (r *Runner) Output(ctx context.Context, args ...string) ([]byte, error) {
	return r.run(ctx, Cmd{Args: args})
}

// Run runs c. Output goes to c.Stdout/c.Stderr when set (streaming, for
// interactive commands) and is captured for the trace and the error.
func (r *Runner) Run(ctx context.Context, c Cmd) error {
	_, err := r.run(ctx, c)
	return err
}

// run is Run, returning the standard output it captured. The capture is
// the only copy of what c.Stdout does not take (kubectl's listing of 500
// sandboxes is 15 MB).
func (r *Runner) run(ctx context.Context, c Cmd) ([]byte, error) {
	if len(c.Args) == 0 {
		return nil, errors.New("runner: empty command")
	}
	prog := c.Args[0]
	if r.Env != nil {
		// Found in the PATH of the environment sbx was given, not its own.
		if p, err := r.LookPath(prog); err == nil {
			prog = p
		}
	}
	cmd := exec.CommandContext(ctx, prog, c.Args[1:]...)
	cmd.Stdin = c.Stdin
	cmd.Dir = c.Dir
	// A killed command whose children still hold its output open must not
	// hang sbx: stop waiting for the output a little after it ends.
	cmd.WaitDelay = 2 * time.Second
	if r.Env != nil || c.Env != nil {
		env := r.Env
		if env == nil {
			env = cmd.Environ()
		}
		cmd.Env = append(append([]string(nil), env...), c.Env...)
	}
	var stdout, stderr bytes.Buffer
	keptOut, keptErr := &kept{buf: &stdout}, &kept{buf: &stderr}
	cmd.Stdout = tee(keptOut, c.Stdout)
	var streamed *countingWriter
	if c.StreamStdout && c.Stdout != nil {
		streamed = &countingWriter{w: c.Stdout}
		cmd.Stdout = streamed
	}
	cmd.Stderr = tee(keptErr, c.Stderr)
	start := time.Now()
	err := cmd.Run()
	if streamed != nil {
		fmt.Fprintf(&stdout, "(%d bytes streamed)\n", streamed.n)
	}
	keptOut.note()
	keptErr.note()
	code := -1
	if ps := cmd.ProcessState; ps != nil {
		code = ps.ExitCode()
		// Killed by a signal: report it as a shell would, 128+signal.
		if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			code = 128 + int(ws.Signal())
		}
	}
	if r.Trace != nil {
		r.trace(Quote(c.Args), fmt.Sprintf("exit %d", code), code < 0, time.Since(start), stdout.String(), stderr.String(), err)
	}
	if err != nil {
		return stdout.Bytes(), &Error{Args: r.scrubAll(c.Args), ExitCode: code, Stderr: r.scrub(stderr.String()), Err: err}
	}
	return stdout.Bytes(), nil
}

// countingWriter counts what passes through it.
type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(b []byte) (int, error) {
	n, err := c.w.Write(b)
	c.n += int64(n)
	return n, err
}

// tee is where a command's output goes: all of it into the runner's copy
// when the caller takes none (Output returns it), else to the caller's
// writer, with the first maxKept bytes kept for the trace and the error.
func tee(k *kept, w io.Writer) io.Writer {
	if w == nil {
		return k.buf
	}
	return io.MultiWriter(k, w)
}

// maxKept bounds the copy the runner keeps of an output it hands on to
// the caller's writer, for the trace and the error. That output is the
// caller's to bound: an agent's, through sbx loop, may not end for hours,
// and must not grow sbx's memory on the side.
const maxKept = 1 << 20

// kept is the first maxKept bytes of an output, and how many more there
// were.
type kept struct {
	buf     *bytes.Buffer
	dropped int64
}

func (k *kept) Write(p []byte) (int, error) {
	room := max(maxKept-k.buf.Len(), 0)
	if len(p) > room {
		k.dropped += int64(len(p) - room)
	}
	k.buf.Write(p[:min(len(p), room)])
	return len(p), nil
}

// note says, after the output, how much of it was not kept.
func (k *kept) note() {
	if k.dropped > 0 {
		fmt.Fprintf(k.buf, "\n(%d bytes more, not kept)\n", k.dropped)
	}
}

// trace records one call: what ran, its output, how it ended (showErr: the
// error too, when the ending alone does not say what went wrong).
func (r *Runner) trace(what, ending string, showErr bool, d time.Duration, stdout, stderr string, err error) {
	if r.Trace == nil {
		return
	}
	var b strings.Builder
	fmt.Fprintf(&b, "$ %s\n", r.scrub(what))
	for _, part := range []struct{ name, text string }{{"stdout", stdout}, {"stderr", stderr}} {
		if part.text == "" {
			continue
		}
		fmt.Fprintf(&b, "# %s:\n", part.name)
		for _, line := range strings.SplitAfter(strings.TrimSuffix(r.scrub(part.text), "\n"), "\n") {
			b.WriteString("| " + line)
		}
		b.WriteString("\n")
	}
	if err != nil && showErr {
		fmt.Fprintf(&b, "# error: %s\n", r.scrub(err.Error()))
	}
	fmt.Fprintf(&b, "# %s (%s)\n", ending, d.Round(time.Millisecond))
	r.mu.Lock()
	defer r.mu.Unlock()
	io.WriteString(r.Trace, b.String())
}

func (r *Runner) scrub(s string) string {
	return r.secrets.String(s)
}

func (r *Runner) scrubAll(args []string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = r.scrub(a)
	}
	return out
}

// Quote joins argv as a POSIX shell would need it typed.
func Quote(args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		if a != "" && strings.Trim(a, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./:=,@%+") == "" {
			q[i] = a
		} else {
			q[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
	}
	return strings.Join(q, " ")
}

// Getenv is the value of an environment variable as the runner's commands
// see it: from Env when set, else sbx's own.
func (r *Runner) Getenv(name string) string {
	v, _ := r.LookupEnv(name)
	return v
}

// LookupEnv reads the environment commands get, as os.LookupEnv does.
func (r *Runner) LookupEnv(name string) (string, bool) {
	if r.Env == nil {
		return os.LookupEnv(name)
	}
	v, found := "", false
	for _, kv := range r.Env {
		if k, val, ok := strings.Cut(kv, "="); ok && k == name {
			v, found = val, true // the last one wins, as in os/exec
		}
	}
	return v, found
}

// TraceRequest records a request that is not a command (one to the Docker
// Engine API) in the trace: what was asked, the HTTP status (0 when there
// was no answer) and the answer's body.
func (r *Runner) TraceRequest(what string, status int, d time.Duration, body string, err error) {
	r.trace(what, fmt.Sprintf("status %d", status), err != nil, d, body, "", err)
}
