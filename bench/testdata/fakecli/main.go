// Command fakecli runs the fakes of Docker's CLIs outside tests, for the
// benchmarks: as "docker" it is the sandbox plugin, as anything else
// Docker's sbx. It lives under testdata so `go install ./...` (pre-commit's
// golang hook) never installs it.
package main

import (
	"os"
	"path/filepath"

	"github.com/sbxhq/sbx/internal/fakecli/fakedocker"
	"github.com/sbxhq/sbx/internal/fakecli/fakesbx"
)

func main() {
	if filepath.Base(os.Args[0]) == "docker" {
		os.Exit(fakedocker.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr, os.Getenv))
	}
	os.Exit(fakesbx.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr, os.Getenv))
}
