package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"

	"github.com/spf13/pflag"

	"github.com/sbxhq/sbx/driver"
	"github.com/sbxhq/sbx/internal/untrusted"
	"github.com/sbxhq/sbx/netlog"
	"github.com/sbxhq/sbx/session"
	"github.com/sbxhq/sbx/spec"
)

// defaultShell opens bash when the template has it, else sh.
var defaultShell = []string{"sh", "-c", "if command -v bash >/dev/null 2>&1; then exec bash -l; else exec sh -l; fi"}

func shellVerb() *verb {
	return &verb{
		name:    "shell",
		summary: "open a shell (or run a command) inside the sandbox, with its secrets",
		usage:   "[flags] [-- COMMAND [ARG...]]",
		help: `Runs COMMAND (default: a login shell) inside the declared sandbox. Secrets
are read on the host and passed as -e NAME with the value only in the
environment of the backend's CLI, never in argv or the sandbox's
configuration. The exit status is the command's.`,
		setup: func(fs *pflag.FlagSet) runFunc {
			t := &target{}
			t.register(fs)
			return func(ctx context.Context, a *app, args []string) int {
				return a.shell(ctx, t, args)
			}
		},
	}
}

// one opens the session of a verb that works on exactly one sandbox,
// which must exist.
func (a *app) one(ctx context.Context, t *target) (*session.Session, *spec.Spec, error) {
	s, err := a.open(ctx, t, "")
	if err != nil {
		return nil, nil, err
	}
	sp, err := s.One()
	return s, sp, err
}

func (a *app) shell(ctx context.Context, t *target, argv []string) int {
	s, sp, err := a.one(ctx, t)
	if err == nil {
		err = s.Runnable(sp)
	}
	if err != nil {
		return a.fail(err)
	}
	if _, ok := s.Backend.(driver.Execer); !ok {
		return a.errorf("the %s driver cannot run commands in a sandbox", s.Backend.Name())
	}
	secrets, err := s.Secrets(ctx, sp)
	if err != nil {
		return a.errorf("%v", err)
	}
	if len(argv) == 0 {
		argv = defaultShell
	}
	code, err := s.Exec(ctx, sp, argv, driver.ExecOptions{
		Interactive: true,
		TTY:         isTerminal(a.stdin) && isTerminal(a.stdout),
		Env:         s.ExecEnv(sp, secrets),
		Stdin:       a.stdin,
		Stdout:      a.stdout,
		Stderr:      a.stderr,
	})
	if err != nil {
		return a.errorf("%v", err)
	}
	return code
}

func netlogVerb() *verb {
	return &verb{
		name:    "netlog",
		summary: "show the sandbox's network log: what egress allowed and denied",
		usage:   "[flags]",
		setup: func(fs *pflag.FlagSet) runFunc {
			t := &target{}
			t.register(fs)
			asJSON := fs.Bool("json", false, "one JSON object per entry, per line (docs/netlog-json.md)")
			follow := fs.Bool("follow", false, "keep printing new entries (docker driver)")
			return func(ctx context.Context, a *app, args []string) int {
				if len(args) > 0 {
					return a.errorf("netlog takes no arguments; name files with -f")
				}
				s, sp, err := a.one(ctx, t)
				if err != nil {
					return a.fail(err)
				}
				nl, ok := s.Backend.(driver.NetLogger)
				if !ok {
					return a.errorf("the %s driver has no network log", s.Backend.Name())
				}
				var stopped *session.StoppedError
				if err := s.Runnable(sp); errors.As(err, &stopped) {
					if *follow {
						return a.errorf("%v", err)
					}
					// The log up to the stop is still there to read.
					fmt.Fprintf(a.stderr, "sbx: %v; its log up to then follows\n", err)
				}
				err = nl.NetLog(ctx, sp.Name, *follow, netlogPrinter(a.stdout, *asJSON))
				if *follow && ctx.Err() != nil {
					// Ctrl-C or SIGTERM is how --follow ends: whatever
					// read was in flight failing then is no error.
					return exitOK
				}
				if err != nil && !errors.Is(err, context.Canceled) {
					return a.errorf("%v", err)
				}
				return exitOK
			}
		},
	}
}

// NetlogFormat is the format_version of each line of `sbx netlog --json`
// (docs/netlog-json.md).
const NetlogFormat = "1"

// netlogLine is one line of `sbx netlog --json`.
type netlogLine struct {
	FormatVersion string `json:"format_version"`
	netlog.Entry
}

// netlogPrinter writes entries as JSON lines or as one readable line each,
// what the agent chose (host, method, reason, rule) escaped so that no
// control sequence or bidirectional override of its making reaches the
// terminal.
func netlogPrinter(w io.Writer, asJSON bool) func(netlog.Entry) error {
	if asJSON {
		// encoding/json leaves bidirectional overrides and C1 controls
		// as they are: escaped, they reach no terminal.
		enc := json.NewEncoder(untrusted.JSONWriter{W: w})
		return func(e netlog.Entry) error { return enc.Encode(netlogLine{FormatVersion: NetlogFormat, Entry: e}) }
	}
	return func(e netlog.Entry) error {
		target := untrusted.Text(e.Host)
		if e.Port != 0 {
			target = net.JoinHostPort(target, strconv.Itoa(e.Port))
		}
		line := fmt.Sprintf("%s %-5s", untrusted.Text(e.Time), untrusted.Text(e.Decision))
		if e.Method != "" {
			line += " " + untrusted.Text(e.Method)
		}
		line += " " + target
		var why []string
		if e.Reason != "" {
			why = append(why, untrusted.Text(e.Reason))
		}
		if e.Rule != "" {
			why = append(why, "rule "+untrusted.Text(e.Rule))
		}
		if e.Count > 0 {
			n := fmt.Sprintf("%d requests", e.Count)
			if e.Count == 1 {
				n = "1 request"
			}
			if e.Since != "" {
				n += " since " + untrusted.Text(e.Since)
			}
			why = append(why, n)
		}
		if len(why) > 0 {
			line += " (" + strings.Join(why, "; ") + ")"
		}
		_, err := fmt.Fprintln(w, line)
		return err
	}
}
