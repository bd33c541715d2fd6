package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/pflag"

	"github.com/sbxhq/sbx/internal/untrusted"
	"github.com/sbxhq/sbx/session"
	"github.com/sbxhq/sbx/spec"
)

func validateVerb() *verb {
	return &verb{
		name:    "validate",
		summary: "check sandbox files without touching any sandbox",
		usage:   "[flags] [FILE...]",
		help: `Checks each file against the schema and the rules the schema cannot
express (names, host patterns, CIDRs, sizes, durations, that referenced
files exist, that required variables are set) and reports every problem at
once as FILE:LINE:COL: field.path: message, sorted. Exit status 0 when all
files are valid, 1 otherwise.

A file with a top-level version key is a sandbox; a file without one is a
layer merged over the sandbox named before it. sandbox.local.yaml next to a
file is merged over it unless --no-local is given.`,
		setup: func(fs *pflag.FlagSet) runFunc {
			var files []string
			asJSON := fs.Bool("json", false, "print the result as JSON on stdout")
			offline := fs.Bool("offline", false, "report unset required variables as needed instead of failing")
			noLocal := fs.Bool("no-local", false, "do not merge sandbox.local.yaml")
			fs.StringArrayVarP(&files, "file", "f", nil, "sandbox file or layer (repeatable; default ./sandbox.yaml)")
			return func(ctx context.Context, a *app, args []string) int {
				// A pre-commit hook over 1,000 files spends a third less
				// CPU (bench/validate.sh), for a peak heap about a third
				// larger (spec.MaxFileSize bounds each file).
				batchGC()
				return a.validate(append(files, args...), *asJSON, spec.Options{Offline: *offline, NoLocal: *noLocal, NoOrigins: true})
			}
		},
	}
}

// validateReport is the --json output of validate (docs/validate-json.md).
type validateReport struct {
	FormatVersion string             `json:"format_version"`
	Valid         bool               `json:"valid"`
	Sandboxes     []validatedSandbox `json:"sandboxes"`
	Problems      spec.Diagnostics   `json:"problems"`
	Needed        spec.Diagnostics   `json:"needed"`
}

// validateFormat is the version of validate's JSON layout.
const validateFormat = "1"

type validatedSandbox struct {
	Name   string   `json:"name"`
	Agent  string   `json:"agent"`
	Driver string   `json:"driver"`
	Files  []string `json:"files"`
	// Local is the personal layer (sandbox.local.yaml) merged over Files'
	// base, when one was: it is also the last of Files.
	Local string `json:"local,omitempty"`
}

// localLayer is the personal layer merged into s, or "".
func localLayer(s *spec.Spec) string {
	if len(s.Files) < 2 {
		return ""
	}
	if local := spec.LocalPath(s.Files[0]); s.Files[len(s.Files)-1] == local {
		return local
	}
	return ""
}

func (a *app) validate(files []string, asJSON bool, opts spec.Options) int {
	res, err := a.load(files, opts)
	var problems spec.Diagnostics
	if err != nil && !errors.As(err, &problems) {
		return a.errorf("%v", err)
	}
	if len(problems) == 0 {
		problems = session.DriverProblems(a.driverEnv, res.Specs)
		if len(problems) > 0 && opts.NoOrigins {
			// Loaded without where each value came from, which only
			// these problems need: read again to place them.
			opts.NoOrigins = false
			if again, err := a.load(files, opts); err == nil {
				problems = session.DriverProblems(a.driverEnv, again.Specs)
			}
		}
	}
	if asJSON {
		rep := validateReport{FormatVersion: validateFormat, Valid: len(problems) == 0, Problems: problems, Needed: res.Needed}
		if rep.Problems == nil {
			rep.Problems = spec.Diagnostics{}
		}
		if rep.Needed == nil {
			rep.Needed = spec.Diagnostics{}
		}
		rep.Sandboxes = []validatedSandbox{}
		if rep.Valid {
			for _, s := range res.Specs {
				rep.Sandboxes = append(rep.Sandboxes, validatedSandbox{Name: s.Name, Agent: s.Agent, Driver: s.Driver, Files: s.Files, Local: localLayer(s)})
			}
		}
		enc := json.NewEncoder(untrusted.JSONWriter{W: a.stdout})
		enc.SetIndent("", "  ")
		enc.Encode(rep)
	} else {
		for _, d := range problems {
			a.diagnostic(d)
		}
		for _, d := range res.Needed {
			d.Message = "needed: " + d.Message
			a.diagnostic(d)
		}
		if len(problems) == 0 {
			// One write, not one per file.
			out := bufio.NewWriter(a.stdout)
			for _, s := range res.Specs {
				// Every layer merged, the personal one included: what
				// validate passed is their sum, not the base alone.
				fmt.Fprintf(out, "%s: valid (sandbox %q, agent %s)\n", strings.Join(s.Files, " + "), s.Name, s.Agent)
			}
			out.Flush()
		}
	}
	if len(problems) > 0 {
		return exitError
	}
	return exitOK
}

// load reads sandbox files for any verb; with no files it reads
// ./sandbox.yaml. A failure to read a file is reported as a diagnostic.
func (a *app) load(files []string, opts spec.Options) (*spec.Result, error) {
	return session.Load(session.Options{Files: files, NoLocal: opts.NoLocal, NoOrigins: opts.NoOrigins, Offline: opts.Offline, HostValue: a.hostValues.add}, a.lookupEnv)
}
