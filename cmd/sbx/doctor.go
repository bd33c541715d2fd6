package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/pflag"

	"github.com/sbxhq/sbx/driver"
	"github.com/sbxhq/sbx/session"
)

func doctorVerb() *verb {
	return &verb{
		name:    "doctor",
		summary: "check which backends are usable and that sbx is set up right",
		usage:   "",
		help: `Reports each driver (usable, with its version, or why not), whether Docker's
own sbx shadows this one on PATH, the state directory's permissions, and
for the docker driver whether the daemon has gVisor's runsc runtime, for
the kubernetes driver whether kubectl's current context answers and has
agent-sandbox's resources and the permissions the driver needs. Exit
status 0 when at least one driver is usable.

With --probe, runs read-only commands of Docker's sbx and of the docker
sandbox plugin, checks each output with the parser sbx uses for it, and
prints a report with sandbox names, paths and the hosts of your rules
replaced; no secret is read. Attach it to a bug, or turn it into a test
fixture (docs/backend-fixtures.md). Exit status 1 when an output is not
what sbx expects.`,
		setup: func(fs *pflag.FlagSet) runFunc {
			probe := fs.Bool("probe", false, "check the output formats of Docker's sandbox CLIs and print a redacted report")
			return func(ctx context.Context, a *app, args []string) int {
				if len(args) > 0 {
					return a.errorf("doctor takes no arguments")
				}
				if *probe {
					return a.doctorProbe(ctx)
				}
				return a.doctor(ctx)
			}
		},
	}
}

func (a *app) doctor(ctx context.Context) int {
	usable := 0
	fmt.Fprintln(a.stdout, "Drivers:")
	for _, d := range session.Drivers {
		name := d.Name
		b, err := d.New(a.driverEnv())
		var id driver.Identity
		if err == nil {
			id, err = b.Identify(ctx)
		}
		if err != nil {
			fmt.Fprintf(a.stdout, "  %-15s not usable: %v\n", name, oneLine(err))
			continue
		}
		usable++
		legacy := ""
		if d.Legacy != "" {
			legacy = "; legacy: not picked by driver: auto"
		}
		fmt.Fprintf(a.stdout, "  %-15s usable (%s%s)\n", name, id.Version, legacy)
		if rc, ok := b.(driver.RuntimeChecker); ok {
			ok, detail := rc.RuntimeCheck(ctx)
			mark := "ok"
			if !ok {
				mark = "missing"
			}
			fmt.Fprintf(a.stdout, "  %-15s gVisor runtime (runsc): %s\n%s", "", mark, indent(detail, "    "))
		}
		if dc, ok := b.(driver.Doctor); ok {
			for _, c := range dc.Checks(ctx) {
				mark := "ok"
				switch {
				case c.Info:
					mark = "note"
				case c.Warn:
					mark = "warning"
				case !c.OK:
					mark = "PROBLEM"
				}
				fmt.Fprintf(a.stdout, "  %-15s %s: %s: %s\n", "", c.Name, mark, c.Detail)
			}
		}
	}

	fmt.Fprintln(a.stdout, "PATH:")
	a.doctorPath()

	a.doctorFile(ctx)

	fmt.Fprintln(a.stdout, "State:")
	dir, err := a.stateDir()
	if err != nil {
		fmt.Fprintf(a.stdout, "  %v\n", err)
	} else if !dir.Exists() {
		fmt.Fprintf(a.stdout, "  %s does not exist yet (created on first apply)\n", dir)
	} else if err := dir.Check(); err != nil {
		fmt.Fprintf(a.stdout, "  %s: %v\n", dir, err)
	} else {
		fmt.Fprintf(a.stdout, "  %s: permissions ok (0700 directories, 0600 files)\n", dir)
	}
	if usable == 0 {
		fmt.Fprintln(a.stderr, "sbx: no usable driver; install Docker's sbx, Docker Desktop's sandbox plugin, or Docker Engine")
		return exitError
	}
	return exitOK
}

// doctorFile checks, for the nearest sandbox.yaml, what its sandboxes
// need from the backend before an apply: their driver and template image.
func (a *app) doctorFile(ctx context.Context) {
	file, err := session.Find(".")
	if err != nil {
		return
	}
	if wd, err := os.Getwd(); err == nil {
		if rel, err := filepath.Rel(wd, file); err == nil {
			file = rel
		}
	}
	fmt.Fprintf(a.stdout, "Sandbox file %s:\n", file)
	res, err := session.Load(session.Options{Files: []string{file}, Offline: true, HostValue: a.hostValues.add}, a.lookupEnv)
	if err != nil {
		fmt.Fprintf(a.stdout, "  not valid: %s (run 'sbx validate')\n", oneLine(err))
		return
	}
	dir, err := a.stateDir()
	if err != nil {
		fmt.Fprintf(a.stdout, "  %v\n", err)
		return
	}
	for _, sp := range res.Specs {
		c, err := session.Choose(ctx, a.driverEnv(), dir, sp.Driver)
		if err != nil {
			fmt.Fprintf(a.stdout, "  sandbox %q: %s\n", sp.Name, oneLine(err))
			continue
		}
		line := fmt.Sprintf("  sandbox %q: driver %s", sp.Name, c.Entry.Name)
		tc, ok := c.Backend.(driver.TemplateChecker)
		switch {
		case sp.Template.Build != nil:
			line += "; its template is built by apply"
		case ok && sp.Template.Image != "":
			present, err := tc.TemplatePresent(ctx, sp.Template.Image)
			switch {
			case err != nil:
				line += fmt.Sprintf("; template %s: %s", sp.Template.Image, oneLine(err))
			case present:
				line += fmt.Sprintf("; template %s is on this machine", sp.Template.Image)
			default:
				line += fmt.Sprintf("; problem: template %s is not on this machine: apply pulls it, which fails where no registry answers (docker pull or build it first)", sp.Template.Image)
			}
		}
		fmt.Fprintln(a.stdout, line)
	}
}

// doctorProbe writes the probe report of every usable CLI backend.
func (a *app) doctorProbe(ctx context.Context) int {
	probed, failed := 0, 0
	for _, d := range session.Drivers {
		name := d.Name
		b, err := d.New(a.driverEnv())
		if err == nil {
			_, err = b.Identify(ctx)
		}
		pr, ok := b.(driver.Prober)
		if err == nil && !ok {
			continue // nothing of this backend is parsed from a CLI's output
		}
		if err != nil {
			fmt.Fprintf(a.stderr, "sbx: doctor --probe: driver %s not probed: %v\n", name, err)
			continue
		}
		probed++
		if err := pr.Probe(ctx, a.stdout); err != nil {
			a.errorf("doctor --probe: driver %s: %v", name, err)
			failed++
		}
	}
	if probed == 0 {
		return a.errorf("doctor --probe: neither Docker's sbx nor the docker sandbox plugin is usable")
	}
	if failed > 0 {
		return exitError
	}
	return exitOK
}

// doctorPath explains which sbx a bare "sbx" runs.
func (a *app) doctorPath() {
	self, _ := os.Executable()
	self, _ = filepath.EvalSymlinks(self)
	var first string
	for _, dir := range filepath.SplitList(a.getenv("PATH")) {
		p := filepath.Join(dir, "sbx")
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
			first = p
			break
		}
	}
	docker, derr := session.DockerSbx(a.driverEnv())
	switch real, _ := filepath.EvalSymlinks(first); {
	case first == "":
		fmt.Fprintf(a.stdout, "  this sbx (%s) is not on PATH; add its directory to PATH\n", self)
	case real == self:
		fmt.Fprintf(a.stdout, "  sbx on PATH is this one (%s)\n", first)
	default:
		fmt.Fprintf(a.stdout, "  problem: %s comes before this sbx (%s) on PATH, so typing sbx runs it\n"+
			"  (Docker's CLI has the same name); put %s earlier in PATH\n", first, self, filepath.Dir(self))
	}
	if derr == nil {
		fmt.Fprintf(a.stdout, "  Docker's sbx: %s (its verbs pass through: sbx login, sbx ls, ...)\n", docker)
	} else {
		fmt.Fprintf(a.stdout, "  Docker's sbx: not found\n")
	}
}

func indent(s, prefix string) string {
	if s == "" {
		return ""
	}
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return prefix + strings.Join(lines, "\n"+prefix) + "\n"
}

// oneLine keeps an error's first line, so the table stays a table.
func oneLine(err error) string {
	s, _, _ := strings.Cut(strings.TrimSpace(err.Error()), "\n")
	return s
}
