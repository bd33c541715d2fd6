// Package cliutil is the shared base of the drivers of Docker's sandbox
// CLIs (driver/sbx for Docker's sbx, driver/dockersandbox for the legacy
// `docker sandbox` plugin): running the CLI (CLI), strict parsing of its
// JSON that fails loudly on a shape it does not know (Doc), the mapping of
// listed workspaces, the read-only probe behind `sbx doctor --probe`
// (Probe) with its redacted report, and what every sbx driver shares with
// them (exec options, env files, versions).
package cliutil

import (
	"errors"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"

	"github.com/sbxhq/sbx/driver"
	"github.com/sbxhq/sbx/driver/runner"
)

// Version is a dotted release number.
type Version [3]int

// ParseVersion reads "v0.53.0", "0.53.0" or "v0.7.1-rc2" (the suffix is
// ignored).
func ParseVersion(s string) (Version, error) {
	s = strings.TrimPrefix(strings.TrimSpace(s), "v")
	if i := strings.IndexAny(s, "-+ "); i >= 0 {
		s = s[:i]
	}
	parts := strings.Split(s, ".")
	if len(parts) < 2 || len(parts) > 3 {
		return Version{}, fmt.Errorf("not a version: %q", s)
	}
	var v Version
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 {
			return Version{}, fmt.Errorf("not a version: %q", s)
		}
		v[i] = n
	}
	return v, nil
}

// Less reports whether v is older than w.
func (v Version) Less(w Version) bool {
	for i := range v {
		if v[i] != w[i] {
			return v[i] < w[i]
		}
	}
	return false
}

func (v Version) String() string { return fmt.Sprintf("%d.%d.%d", v[0], v[1], v[2]) }

// ErrNotFound is returned (wrapped) when a backend says a sandbox does not
// exist.
var ErrNotFound = errors.New("sandbox not found")

// ExecArgs builds the flags docker-style exec commands share (`sbx exec`
// and `docker sandbox exec`, docker-sandboxes-cli.md §1.2, §1.3) and the
// environment that carries the -e values.
func ExecArgs(o driver.ExecOptions) (flags, env []string) {
	if o.Interactive {
		flags = append(flags, "-i")
	}
	if o.TTY {
		flags = append(flags, "-t")
	}
	if o.Workdir != "" {
		flags = append(flags, "-w", o.Workdir)
	}
	if o.User != "" {
		flags = append(flags, "-u", o.User)
	}
	for _, k := range SortedKeys(o.Env) {
		flags = append(flags, "-e", k)
		env = append(env, k+"="+o.Env[k])
	}
	return flags, env
}

// ExitCode turns a finished command's error into its exit status; an error
// that is not an exit status is returned.
func ExitCode(err error) (int, error) {
	var re *runner.Error
	if errors.As(err, &re) && re.ExitCode >= 0 {
		return re.ExitCode, nil
	}
	if err != nil {
		return -1, err
	}
	return 0, nil
}

// SortedKeys returns m's keys in order.
func SortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// EnvFile writes env to a new 0600 file in the --env-file format docker
// and sbx read, so values stay out of argv and ps. The caller removes it.
func EnvFile(env map[string]string) (string, error) {
	f, err := os.CreateTemp("", "sbx-env-*")
	if err != nil {
		return "", err
	}
	for _, k := range SortedKeys(env) {
		if strings.ContainsAny(env[k], "\n") {
			f.Close()
			os.Remove(f.Name())
			return "", fmt.Errorf("env.%s: a value with a newline cannot go in an env file", k)
		}
		fmt.Fprintf(f, "%s=%s\n", k, env[k])
	}
	return f.Name(), f.Close()
}
