package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/spf13/pflag"

	"github.com/sbxhq/sbx/internal/untrusted"
	"github.com/sbxhq/sbx/reconcile"
	"github.com/sbxhq/sbx/session"
)

// lifecycleHelp is what stop and start say about the declared state.
const lifecycleHelp = `The declared state of a sandbox includes that it runs. Where sbx can start
a stopped sandbox (the docker driver), a stopped one is a difference from
sandbox.yaml: 'sbx plan' shows it as ~ status: "exited" → "running", and
'sbx apply' (or 'sbx start', or 'sbx loop', which applies first) starts it
again, as 'docker compose up' restarts what 'docker compose stop' stopped.
So a stop lasts until the next start or apply. Docker's sbx stops idle
sandboxes itself and starts them again for an exec, and the docker sandbox
plugin has no start command: on those a stopped sandbox is not a change.`

func stopVerb() *verb {
	return &verb{
		name:    "stop",
		summary: "stop the declared sandboxes without removing them",
		usage:   "[flags]",
		help: `Stops the sandboxes the files declare. docker: both containers (the
sandbox and its egress proxy), their filesystems kept, so what was
installed inside stays; sbx: sbx stop, and docker-sandbox: docker sandbox
stop, both keeping the VM's state; kubernetes: the Sandbox is suspended,
which deletes its pod and keeps its workspace volume, so the workspace
stays but what was installed outside it is lost. -v prints each backend
call as 'sbx plan' shows it.

` + lifecycleHelp + `

Docker's own form, 'sbx stop NAME...', runs Docker's sbx.`,
		dockerForm: positional("-f", "--file", "--driver", "--lock-timeout"),
		setup: func(fs *pflag.FlagSet) runFunc {
			t := &target{}
			t.register(fs)
			t.registerLock(fs)
			verbose := fs.BoolP("verbose", "v", false, "print each backend call before it runs")
			return func(ctx context.Context, a *app, args []string) int {
				return a.lifecycle(ctx, t, args, reconcile.StepStop, *verbose)
			}
		},
	}
}

func startVerb() *verb {
	return &verb{
		name:    "start",
		summary: "start the declared sandboxes that are stopped",
		usage:   "[flags]",
		help: `Starts the declared sandboxes that are stopped, as they were: nothing is
created or changed (run 'sbx apply' for that). docker: both containers;
sbx: sbx run -d --name NAME, which keeps it running from Docker's sbx 0.47.0
on (earlier releases stop an idle sandbox again; their exec starts it);
docker-sandbox: the plugin has no start command. -v prints each backend
call as 'sbx plan' shows it.

` + lifecycleHelp,
		setup: func(fs *pflag.FlagSet) runFunc {
			t := &target{}
			t.register(fs)
			t.registerLock(fs)
			verbose := fs.BoolP("verbose", "v", false, "print each backend call before it runs")
			return func(ctx context.Context, a *app, args []string) int {
				return a.lifecycle(ctx, t, args, reconcile.StepStart, *verbose)
			}
		},
	}
}

// lifecycle runs sbx stop or sbx start.
func (a *app) lifecycle(ctx context.Context, t *target, args []string, kind reconcile.StepKind, verbose bool) int {
	verb := kind.String()
	if len(args) > 0 {
		return a.errorf("%s takes no arguments; name files with -f", verb)
	}
	s, err := a.open(ctx, t, "sbx "+verb)
	if err != nil {
		return a.fail(err)
	}
	defer s.Release()
	lcs, err := s.Lifecycle(kind)
	if err != nil {
		return a.fail(err)
	}
	n, i := 0, 0
	for _, lc := range lcs {
		if lc.Skip == "" {
			n++
		}
	}
	var todo []*session.Lifecycle
	for _, lc := range lcs {
		if lc.Skip != "" {
			fmt.Fprintf(a.stdout, "Sandbox %q is %s.\n", lc.Sandbox, lc.Skip)
			continue
		}
		todo = append(todo, lc)
	}
	if len(todo) == 0 {
		return exitOK
	}
	last := ""
	err = s.RunLifecycle(ctx, todo, func(lc *session.Lifecycle, c reconcile.Call) {
		if lc.Sandbox != last {
			i++
			last = lc.Sandbox
			fmt.Fprintf(a.stdout, "[%d/%d] %s\n", i, n, lc.Step)
		}
		if verbose {
			for _, line := range strings.Split(c.Desc, "\n") {
				fmt.Fprintf(a.stdout, "      %s\n", line)
			}
		}
	})
	if err != nil {
		if ctx.Err() != nil {
			fmt.Fprintf(a.stderr, "sbx: %s interrupted: %v\n", verb, err)
			return exitInterrupted
		}
		return a.errorf("%v", err)
	}
	// What the backend's stop keeps (its capability table's StopKeeps).
	keeps := ""
	if k := s.Backend.Caps().StopKeeps; k != "" {
		keeps = "; " + k
	}
	for _, lc := range todo {
		switch {
		case kind == reconcile.StepStart:
			fmt.Fprintf(a.stdout, "Started sandbox %q.\n", lc.Sandbox)
		case s.StatusDeclared():
			fmt.Fprintf(a.stdout, "Stopped sandbox %q%s. 'sbx start' or 'sbx apply' starts it again (until then 'sbx plan' shows it as a change).\n", lc.Sandbox, keeps)
		default:
			fmt.Fprintf(a.stdout, "Stopped sandbox %q%s. The %s backend starts it again for the next 'sbx shell' or 'sbx loop'.\n", lc.Sandbox, keeps, s.Backend.Name())
		}
	}
	return exitOK
}

func lsVerb() *verb {
	return &verb{
		name:    "ls",
		summary: "list your sandboxes sbx manages on this machine, on every backend",
		usage:   "[flags]",
		help: `Lists the sandboxes sbx manages: those it has a record of in its state
directory, on every backend that answers, and those a backend marks as
sbx's itself (the docker driver's labels). For each: its name, driver,
status, the file it was applied from, and whether it still matches that
file (as 'sbx status' says: in sync, changes pending, drifted, absent;
undeclared when the file no longer declares it; unknown when the file or
backend cannot be read). Nothing is changed and no host command runs.

Only your sandboxes are listed (those sbx applied as your user, or has a
record of in your state directory); those of the workspace you run it in
are marked *. On a Docker daemon others share, --all also lists the other
users' sandboxes, by name, status, user and workspace only, as the
backend's listing labels them: sbx reads nothing of theirs.

--json prints a versioned document (docs/ls-json.md). Docker's own forms,
'sbx ls -q' and 'sbx ls --format F', run Docker's sbx.`,
		dockerForm: hasFlag("-q", "--quiet", "--format"),
		setup: func(fs *pflag.FlagSet) runFunc {
			driver := fs.String("driver", "", "list only this driver's sandboxes: "+strings.Join(session.DriverNames(), ", "))
			asJSON := fs.Bool("json", false, "print as a versioned JSON document (docs/ls-json.md)")
			all := fs.Bool("all", false, "also list other users' sandboxes (name, status, user and workspace only)")
			return func(ctx context.Context, a *app, args []string) int {
				if len(args) > 0 {
					return a.errorf("ls takes no arguments")
				}
				dir, err := a.stateDir()
				if err != nil {
					return a.errorf("%v", err)
				}
				// The workspace ls runs in, as plan would find it; none
				// is no error here.
				here := ""
				if f, err := session.Find("."); err == nil {
					here = filepath.Dir(f)
				}
				l, err := session.List(ctx, session.ListOptions{Env: a.driverEnv(), StateDir: dir, Driver: *driver, HostValue: a.hostValues.add, All: *all, Here: here})
				if err != nil {
					return a.fail(err)
				}
				if *asJSON {
					return a.writeJSON(l)
				}
				tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "NAME\tDRIVER\tSTATUS\tSTATE\tFILE")
				var others []session.Listed
				marked := false
				for _, r := range l.Sandboxes {
					if r.State == "other-user" {
						others = append(others, r)
						continue
					}
					name := untrusted.Text(r.Name)
					if r.Here {
						name, marked = name+" *", true
					}
					status := r.Status
					if !r.Exists {
						status = "-"
					}
					state := strings.ReplaceAll(r.State, "-", " ")
					if r.Pending > 0 && r.State == "changes-pending" {
						state += fmt.Sprintf(" (%d)", r.Pending)
					}
					file := r.File
					if file == "" {
						file = "-"
					}
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", name, r.Driver, untrusted.Text(status), state, untrusted.Text(file))
				}
				tw.Flush()
				if marked {
					fmt.Fprintf(a.stdout, "* belongs to this workspace (%s)\n", untrusted.Text(here))
				}
				if len(others) > 0 {
					// What the backend's listing labels them with, and
					// nothing else: they are other users'.
					fmt.Fprintln(a.stdout, "\nOther users' sandboxes:")
					tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
					fmt.Fprintln(tw, "NAME\tDRIVER\tSTATUS\tUSER\tWORKSPACE")
					for _, r := range others {
						user, ws := r.User, r.Workspace
						if user == "" {
							user, ws = "(unknown)", "(applied by an earlier sbx)"
						}
						fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", untrusted.Text(r.Name), r.Driver, untrusted.Text(r.Status), untrusted.Text(user), untrusted.Text(ws))
					}
					tw.Flush()
				}
				if l.Others > 0 {
					fmt.Fprintf(a.stdout, "%d sandboxes of other users are not listed; 'sbx ls --all' lists them.\n", l.Others)
				}
				for _, r := range l.Sandboxes {
					if r.Detail != "" {
						fmt.Fprintf(a.stdout, "%s (%s): %s\n", untrusted.Text(r.Name), r.Driver, untrusted.Line(r.Detail))
					}
				}
				for _, e := range l.Errors {
					fmt.Fprintf(a.stderr, "sbx: %s\n", untrusted.Visible(e))
				}
				if len(l.Sandboxes) == 0 && l.Others == 0 {
					fmt.Fprintln(a.stdout, "No sandboxes managed by sbx.")
				}
				return exitOK
			}
		},
	}
}

// positional is a dockerForm that holds when args have a word that is
// neither a flag nor the value of one of valueFlags (Docker's `sbx stop
// NAME...`, where ours takes files, not names).
func positional(valueFlags ...string) func([]string) bool {
	return func(args []string) bool {
		for i := 0; i < len(args); i++ {
			a := args[i]
			switch {
			case a == "--":
				return i+1 < len(args)
			case strings.HasPrefix(a, "-"):
				if !strings.Contains(a, "=") && contains(valueFlags, a) {
					i++
				}
			default:
				return true
			}
		}
		return false
	}
}

// hasFlag is a dockerForm that holds when args use one of Docker's flags
// that ours does not have.
func hasFlag(flags ...string) func([]string) bool {
	return func(args []string) bool {
		for _, a := range args {
			name, _, _ := strings.Cut(a, "=")
			if contains(flags, name) {
				return true
			}
		}
		return false
	}
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}
