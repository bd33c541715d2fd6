package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/spf13/pflag"

	"github.com/sbxhq/sbx/checkpoint"
	"github.com/sbxhq/sbx/reconcile"
	"github.com/sbxhq/sbx/session"
	"github.com/sbxhq/sbx/spec"
)

func checkpointVerb() *verb {
	return &verb{
		name:    "checkpoint",
		summary: "save a sandbox's filesystem as a checkpoint; list, remove, export, import them",
		usage:   "create [NAME] [-o FILE] | ls [--json] | rm NAME... | export NAME -o FILE | import FILE NAME",
		help: `A checkpoint is the declared sandbox's filesystem, saved under a name: what
the agent installed and wrote inside it, not the workspace (which lives on
the host) and not its secrets (which only ever reach an exec).

  sbx checkpoint create [NAME]     save the sandbox (default name SANDBOX-TIME);
                                   -o FILE also writes its archive
  sbx checkpoint ls [--json]       the checkpoints sbx has on the backend
  sbx checkpoint rm NAME...        remove them (not one a sandbox was made from)
  sbx checkpoint export NAME -o FILE   write its archive (docker save's layout)
  sbx checkpoint import FILE NAME  load an archive as checkpoint NAME

Restore one by naming it in sandbox.yaml and applying:

  template: {checkpoint: NAME}

'sbx plan' then shows "must be replaced from checkpoint NAME" and where the
checkpoint came from; switching a sandbox to a checkpoint is a widening
that needs approval, as any other template is. Everything else (env,
mounts, network, limits) comes from sandbox.yaml, never from the
checkpoint.

docker: docker commit of the sandbox container (paused meanwhile); sbx:
sbx template save, which needs the sandbox stopped (sbx stops it and starts
it again where Docker's sbx can keep it running), and restore with
sbx create --pull never -t. An imported archive is checked and rewritten
first: only its image is kept, every dev.sbx.* label is replaced by sbx's
own, sizes are bounded (--max-size). The ls/--json format is in
docs/checkpoint-json.md.`,
		setup: func(fs *pflag.FlagSet) runFunc {
			t := &target{}
			t.register(fs)
			t.registerLock(fs)
			output := fs.StringP("output", "o", "", "create, export: write the checkpoint's archive to FILE")
			asJSON := fs.Bool("json", false, "ls: print as a versioned JSON document")
			maxSize := fs.String("max-size", "32g", "import: refuse an archive larger than this")
			verbose := fs.BoolP("verbose", "v", false, "create: print each backend call before it runs")
			fs.SetInterspersed(true)
			return func(ctx context.Context, a *app, args []string) int {
				if len(args) == 0 {
					return a.errorf("checkpoint needs a subcommand: create, ls, rm, export or import")
				}
				sub, rest := args[0], args[1:]
				switch sub {
				case "create":
					return a.checkpointCreate(ctx, t, rest, *output, *verbose)
				case "ls":
					return a.checkpointList(ctx, t, rest, *asJSON)
				case "rm":
					return a.checkpointRemove(ctx, t, rest)
				case "export":
					return a.checkpointExport(ctx, t, rest, *output)
				case "import":
					return a.checkpointImport(ctx, t, rest, *maxSize)
				}
				return a.errorf("checkpoint: unknown subcommand %q (create, ls, rm, export or import)", sub)
			}
		},
	}
}

func (a *app) checkpointCreate(ctx context.Context, t *target, args []string, output string, verbose bool) int {
	if len(args) > 1 {
		return a.errorf("checkpoint create takes at most one name")
	}
	name := ""
	if len(args) == 1 {
		name = args[0]
		if err := checkpoint.ValidName(name); err != nil {
			return a.errorf("%v", err)
		}
	}
	s, err := a.open(ctx, t, "sbx checkpoint create")
	if err != nil {
		return a.fail(err)
	}
	defer s.Release()
	sp, err := s.One()
	if err != nil {
		return a.fail(err)
	}
	if err := s.Checkpoints().Supported(); err != nil {
		return a.checkpointFail(err)
	}
	fmt.Fprintf(a.stdout, "Saving sandbox %q as a checkpoint (driver: %s)\n", sp.Name, s.Backend.Name())
	cp, err := s.Checkpoint(ctx, sp, session.CreateOptions{Name: name, Output: output, Before: func(c reconcile.Call) {
		if verbose {
			for _, line := range strings.Split(c.Desc, "\n") {
				fmt.Fprintf(a.stdout, "      %s\n", line)
			}
		}
	}})
	if err != nil {
		return a.checkpointFail(err)
	}
	fmt.Fprintf(a.stdout, "Saved checkpoint %q of sandbox %q (%s %s).\n", cp.Name, sp.Name, cp.Image, shortID(cp.ID))
	if output != "" {
		fmt.Fprintf(a.stdout, "Wrote its archive to %s.\n", output)
	}
	fmt.Fprintf(a.stdout, "Restore it with template: {checkpoint: %s} in %s, then 'sbx apply'.\n", cp.Name, sp.Files[0])
	return exitOK
}

// checkpoints opens the checkpoints of the driver t names: --driver, else
// the driver of the files (read offline: no variable needs to be set).
func (a *app) checkpoints(ctx context.Context, t *target) (*session.Checkpoints, error) {
	dir, err := a.stateDir()
	if err != nil {
		return nil, err
	}
	name := t.driver
	if name == "" {
		res, err := session.Load(session.Options{Files: t.files, NoLocal: t.noLocal, Offline: true, HostValue: a.hostValues.add}, a.lookupEnv)
		if err != nil {
			var nf *session.NoFileError
			if errors.As(err, &nf) {
				return nil, fmt.Errorf("%v; or name the driver with --driver", err)
			}
			return nil, err
		}
		drivers := map[string]bool{}
		for _, sp := range res.Specs {
			drivers[sp.Driver] = true
			name = sp.Driver
		}
		if len(drivers) != 1 {
			return nil, errors.New("the files name different drivers; name one with --driver")
		}
	}
	return session.OpenCheckpoints(ctx, a.driverEnv(), dir, name)
}

// CheckpointsDoc is the document of sbx checkpoint ls --json
// (docs/checkpoint-json.md).
type checkpointsDoc struct {
	FormatVersion string                    `json:"format_version"`
	Driver        string                    `json:"driver"`
	Checkpoints   []session.SavedCheckpoint `json:"checkpoints"`
}

func (a *app) checkpointList(ctx context.Context, t *target, args []string, asJSON bool) int {
	if len(args) > 0 {
		return a.errorf("checkpoint ls takes no arguments")
	}
	c, err := a.checkpoints(ctx, t)
	if err != nil {
		return a.checkpointFail(err)
	}
	list, err := c.List(ctx)
	if err != nil {
		return a.checkpointFail(err)
	}
	if asJSON {
		return a.writeJSON(checkpointsDoc{FormatVersion: checkpoint.FormatVersion, Driver: c.Backend.Name(), Checkpoints: list})
	}
	if len(list) == 0 {
		fmt.Fprintf(a.stdout, "No checkpoints on the %s backend.\n", c.Backend.Name())
		return exitOK
	}
	tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tSANDBOX\tKIND\tCREATED\tORIGIN\tPRESENT\tSIZE")
	for _, cp := range list {
		sandbox, origin, present, size := cp.Sandbox, cp.Origin, "yes", "-"
		if sandbox == "" {
			sandbox = "-"
		}
		if cp.Origin == checkpoint.OriginImported {
			origin = "imported from " + cp.Source
		}
		if !cp.Present {
			present = "no (gone from the backend)"
		}
		if cp.Size > 0 {
			size = spec.HumanSize(cp.Size)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", cp.Name, sandbox, cp.Kind, cp.Created.UTC().Format("2006-01-02 15:04:05"), origin, present, size)
	}
	tw.Flush()
	return exitOK
}

func (a *app) checkpointRemove(ctx context.Context, t *target, args []string) int {
	if len(args) == 0 {
		return a.errorf("checkpoint rm needs the names of the checkpoints to remove")
	}
	for _, n := range args {
		if err := checkpoint.ValidName(n); err != nil {
			return a.errorf("%v", err)
		}
	}
	c, err := a.checkpoints(ctx, t)
	if err != nil {
		return a.checkpointFail(err)
	}
	code := exitOK
	for _, n := range args {
		if err := c.Remove(ctx, n); err != nil {
			code = a.checkpointFail(err)
			continue
		}
		fmt.Fprintf(a.stdout, "Removed checkpoint %q.\n", n)
	}
	return code
}

func (a *app) checkpointExport(ctx context.Context, t *target, args []string, output string) int {
	if len(args) != 1 || output == "" {
		return a.errorf("usage: sbx checkpoint export NAME -o FILE")
	}
	if err := checkpoint.ValidName(args[0]); err != nil {
		return a.errorf("%v", err)
	}
	c, err := a.checkpoints(ctx, t)
	if err != nil {
		return a.checkpointFail(err)
	}
	if err := c.Export(ctx, args[0], output); err != nil {
		return a.checkpointFail(err)
	}
	fmt.Fprintf(a.stdout, "Exported checkpoint %q to %s.\n", args[0], output)
	return exitOK
}

func (a *app) checkpointImport(ctx context.Context, t *target, args []string, maxSize string) int {
	if len(args) != 2 {
		return a.errorf("usage: sbx checkpoint import FILE NAME")
	}
	if err := checkpoint.ValidName(args[1]); err != nil {
		return a.errorf("%v", err)
	}
	max, err := spec.ParseSize(maxSize)
	if err != nil || max <= 0 {
		return a.errorf("--max-size %q: give a size such as 20g or 512m", maxSize)
	}
	c, err := a.checkpoints(ctx, t)
	if err != nil {
		return a.checkpointFail(err)
	}
	cp, err := c.Import(ctx, args[1], args[0], checkpoint.Limits{MaxSize: max})
	if err != nil {
		return a.checkpointFail(err)
	}
	fmt.Fprintf(a.stdout, "Imported checkpoint %q from %s (%s %s).\n", cp.Name, args[0], cp.Image, shortID(cp.ID))
	fmt.Fprintf(a.stdout, "Restore it with template: {checkpoint: %s} in sandbox.yaml, then 'sbx apply'; the plan says it was imported.\n", cp.Name)
	return exitOK
}

// checkpointFail prints a checkpoint error.
func (a *app) checkpointFail(err error) int {
	if errors.Is(err, checkpoint.ErrNotFound) {
		return a.errorf("%v ('sbx checkpoint ls' lists them)", err)
	}
	return a.fail(err)
}

func shortID(id string) string {
	id = strings.TrimPrefix(id, "sha256:")
	if len(id) > 12 {
		id = id[:12]
	}
	return id
}
