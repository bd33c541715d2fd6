package runner

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
)

// LookPath finds a program as the commands' environment would: a name with
// a path separator as it is, else in the PATH of Env (or sbx's own PATH
// when Env is nil). Backend commands see only the environment sbx was
// given, their PATH included.
func (r *Runner) LookPath(name string) (string, error) {
	if strings.ContainsAny(name, `/\`) {
		fi, err := os.Stat(name)
		if err != nil {
			return "", err
		}
		if fi.IsDir() || !IsExecutable(fi) {
			return "", fmt.Errorf("%s is not an executable file", name)
		}
		return name, nil
	}
	for _, dir := range filepath.SplitList(r.Getenv("PATH")) {
		if dir == "" {
			dir = "."
		}
		for _, n := range ExecutableNames(name) {
			p := filepath.Join(dir, n)
			if fi, err := os.Stat(p); err == nil && !fi.IsDir() && IsExecutable(fi) {
				return p, nil
			}
		}
	}
	return "", fmt.Errorf("%s: %w", name, errNotFound)
}

var errNotFound = errors.New("executable file not found in $PATH")

// ExecutableNames are the file names a program may have: name, and on
// Windows name.exe (and the other PATHEXT extensions of cmd.exe).
func ExecutableNames(name string) []string {
	if runtime.GOOS != "windows" || filepath.Ext(name) != "" {
		return []string{name}
	}
	return []string{name + ".exe", name + ".bat", name + ".cmd", name}
}

// IsExecutable reports whether a file may be run: an execute bit on Unix;
// on Windows, which has none, any file.
func IsExecutable(fi fs.FileInfo) bool {
	return runtime.GOOS == "windows" || fi.Mode()&0o111 != 0
}
