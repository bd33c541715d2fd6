package fakecli

import (
	"bufio"
	"fmt"
	"os"
	"sort"
	"strings"
)

// Env is an ordered set of environment variables where a later Set wins.
type Env struct {
	m map[string]string
}

// Set sets key to value.
func (e *Env) Set(key, value string) {
	if e.m == nil {
		e.m = map[string]string{}
	}
	e.m[key] = value
}

// Map returns the variables as a map (never nil).
func (e *Env) Map() map[string]string {
	out := map[string]string{}
	for k, v := range e.m {
		out[k] = v
	}
	return out
}

// List returns KEY=VALUE strings sorted by key.
func (e *Env) List() []string {
	keys := make([]string, 0, len(e.m))
	for k := range e.m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]string, 0, len(keys))
	for _, k := range keys {
		out = append(out, k+"="+e.m[k])
	}
	return out
}

// AddSpec applies one `-e` value with docker's semantics: KEY=VALUE sets the
// value; a bare KEY takes it from getenv and is skipped when that is empty
// (getenv cannot tell unset from empty).
func (e *Env) AddSpec(spec string, getenv func(string) string) error {
	key, value, found := strings.Cut(spec, "=")
	if key == "" || strings.ContainsAny(key, " \t") {
		return fmt.Errorf("invalid environment variable: %s", spec)
	}
	if !found {
		v := getenv(key)
		if v == "" {
			return nil
		}
		value = v
	}
	e.Set(key, value)
	return nil
}

// AddFile applies an env file with docker's --env-file format: KEY=VALUE or
// bare KEY lines, blank lines and lines starting with # ignored.
func (e *Env) AddFile(path string, getenv func(string) string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("open %s: no such file or directory", path)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimLeft(sc.Text(), " \t")
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if err := e.AddSpec(line, getenv); err != nil {
			return err
		}
	}
	return sc.Err()
}
