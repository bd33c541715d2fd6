// Package crossbuild holds one test: sbx builds, and its tests compile, for
// every OS it is released for. CI runs on Linux; this is how it notices a
// Unix-only call (a lock, a signal, a process group) leaking into code
// that macOS or Windows users run.
package crossbuild

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
)

func TestCrossCompile(t *testing.T) {
	if testing.Short() {
		t.Skip("cross-compiling takes a while; skipped with -short")
	}
	goTool := filepath.Join(runtime.GOROOT(), "bin", "go")
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	build := []string{"build", "-o", os.DevNull, "./cmd/sbx"}
	vet := []string{"vet", "./..."} // type-checks the tests too
	for _, target := range []struct {
		goos, goarch string
		steps        [][]string
	}{
		{"darwin", "arm64", [][]string{build, vet}},
		{"darwin", "amd64", [][]string{build}},
		{"windows", "amd64", [][]string{build, vet}},
		{"linux", "arm64", [][]string{build}},
	} {
		t.Run(target.goos+"/"+target.goarch, func(t *testing.T) {
			for _, args := range target.steps {
				cmd := exec.Command(goTool, args...)
				cmd.Dir = root
				cmd.Env = append(os.Environ(), "GOOS="+target.goos, "GOARCH="+target.goarch, "CGO_ENABLED=0")
				if out, err := cmd.CombinedOutput(); err != nil {
					t.Errorf("go %v for %s/%s: %v\n%s", args, target.goos, target.goarch, err, out)
				}
			}
		})
	}
}
