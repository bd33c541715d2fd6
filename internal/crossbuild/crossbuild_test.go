// Package crossbuild holds one test: sbx and its tests type-check for
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

// TestCrossCompile runs go vet over every package, tests included, once
// per OS other than Linux: vet type-checks each package for that OS (and
// compiles what it imports), which is what an OS-only call breaks; the
// link of a build would find nothing more (sbx has no cgo, no assembly).
// One architecture per OS: sbx has no architecture-specific file, so a
// second one would compile the same code again.
func TestCrossCompile(t *testing.T) {
	if testing.Short() {
		t.Skip("cross-compiling takes a while; skipped with -short")
	}
	goTool := filepath.Join(runtime.GOROOT(), "bin", "go")
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	for _, target := range []struct{ goos, goarch string }{
		{"darwin", "arm64"},
		{"windows", "amd64"},
	} {
		t.Run(target.goos+"/"+target.goarch, func(t *testing.T) {
			cmd := exec.Command(goTool, "vet", "./...")
			cmd.Dir = root
			cmd.Env = append(os.Environ(), "GOOS="+target.goos, "GOARCH="+target.goarch, "CGO_ENABLED=0")
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Errorf("go vet ./... for %s/%s: %v\n%s", target.goos, target.goarch, err, out)
			}
		})
	}
}
