package main

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/pflag"
)

// version is set at link time (-ldflags "-X main.version=v1.2.3"); otherwise
// the module version from the build info is used.
var version = ""

func buildVersion() string {
	if version != "" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "(devel)"
}

func versionVerb() *verb {
	return &verb{
		name:    "version",
		summary: "print sbx's version",
		usage:   "[--json]",
		setup: func(fs *pflag.FlagSet) runFunc {
			asJSON := fs.Bool("json", false, "print as JSON")
			return func(ctx context.Context, a *app, args []string) int {
				v := buildVersion()
				if *asJSON {
					json.NewEncoder(a.stdout).Encode(map[string]string{"version": v, "go": runtime.Version(), "platform": runtime.GOOS + "/" + runtime.GOARCH})
					return exitOK
				}
				fmt.Fprintf(a.stdout, "sbx %s (%s %s/%s)\n", v, runtime.Version(), runtime.GOOS, runtime.GOARCH)
				return exitOK
			}
		},
	}
}
