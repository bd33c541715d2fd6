package sbx

import (
	"context"
	"io"
	"os"

	"github.com/sbxhq/sbx/driver/cliutil"
)

// Probe runs the read-only commands whose output the driver parses,
// checks each with the driver's own parser, and writes the redacted report
// of `sbx doctor --probe` to w (cliutil.Probe). It reads one existing
// sandbox's rules, ports and log when there is one, and never a secret.
// The error says how many outputs the driver does not understand.
func (d *Driver) Probe(ctx context.Context, w io.Writer) error {
	p := cliutil.NewProbe(d.cli)
	if home, err := os.UserHomeDir(); err == nil {
		p.Redact(cliutil.Path, home)
	}
	p.Run(ctx, func(out []byte, exit int) error {
		if exit != 0 {
			return exitErr(exit)
		}
		_, err := d.cli.ReadVersion(out)
		return err
	}, "version")
	p.Run(ctx, func(out []byte, exit int) error {
		if exit != 0 {
			return exitErr(exit)
		}
		_, err := parseHelp(d.cli.Source(ctx, "--help"), out)
		return err
	}, "--help")
	var sandboxes []sandbox
	p.Run(ctx, func(out []byte, exit int) error {
		if exit != 0 {
			return exitErr(exit)
		}
		var err error
		sandboxes, err = parseList(d.cli.Source(ctx, "ls", "--json"), out, func(string) bool { return true })
		for _, s := range sandboxes {
			p.Redact(cliutil.Sandbox, s.Name)
			for _, w := range s.Workspaces {
				ws, _ := cliutil.Workspaces([]string{w})
				p.Redact(cliutil.Path, ws.Path)
			}
		}
		return err
	}, "ls", "--json")
	rulesCheck := func(args ...string) func([]byte, int) error {
		return func(out []byte, exit int) error {
			if exit != 0 {
				return exitErr(exit)
			}
			rules, err := parsePolicy(d.cli.Source(ctx, args...), out)
			for _, r := range rules {
				// Docker's presets are public lists; every other rule's
				// hosts are the user's.
				if r.CreatedVia != "default" {
					for _, res := range r.Resources {
						p.Redact(cliutil.Host, hostOf(res))
					}
				}
			}
			return err
		}
	}
	p.Run(ctx, rulesCheck("policy", "ls", "--json"), "policy", "ls", "--json")
	logArgs := []string{"policy", "log", "--json"}
	checkArgs := []string{"policy", "check", "network", probeHost, "--json"}
	if len(sandboxes) > 0 {
		name := sandboxes[0].Name
		p.Run(ctx, rulesCheck("policy", "ls", name, "--json"), "policy", "ls", name, "--json")
		p.Run(ctx, func(out []byte, exit int) error {
			if exit != 0 {
				return exitErr(exit)
			}
			_, err := parsePorts(d.cli.Source(ctx, "ports", name, "--json"), out)
			return err
		}, "ports", name, "--json")
		logArgs = []string{"policy", "log", name, "--json"}
		checkArgs = []string{"policy", "check", "network", "--sandbox", name, probeHost, "--json"}
	}
	p.Run(ctx, func(out []byte, exit int) error {
		if exit != 0 {
			return exitErr(exit)
		}
		entries, err := parseLog(d.cli.Source(ctx, logArgs...), out)
		for _, e := range entries {
			p.Redact(cliutil.Host, hostOf(e.Host))
			p.Redact(cliutil.Sandbox, e.VMName)
		}
		return err
	}, logArgs...)
	p.Run(ctx, func(out []byte, exit int) error {
		if exit > 1 {
			return exitErr(exit)
		}
		_, err := parseCheck(d.cli.Source(ctx, checkArgs...), out)
		return err
	}, checkArgs...)
	if err := p.Write(w, d.Name()); err != nil {
		return err
	}
	return p.Err()
}
