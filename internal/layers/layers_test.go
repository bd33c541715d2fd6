// Package layers holds the test that keeps sbx's dependency arrows
// pointing one way: shared vocabulary lives in packages both sides import,
// never in one side.
package layers

import (
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/sbxhq/sbx/"

// forbidden are the arrows that must not exist: a package (left) must not
// depend, directly or through others, on a package whose import path is
// or starts with the right side.
var forbidden = []struct{ from, to, why string }{
	{"egress", "driver", "the proxy is below the drivers; its log's types are netlog's"},
	{"driver/kubernetes", "driver/docker", "labels and the static-binary check are driver's"},
	{"loop", "driver/cliutil", "exec options are driver's"},
	{"driver", "driver/cliutil", "driver is the interface the CLI drivers implement"},
	{"netlog", "", "netlog is a leaf: it imports nothing of sbx"},
}

// TestArrows fails when a forbidden dependency comes back.
func TestArrows(t *testing.T) {
	for _, f := range forbidden {
		out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", module+f.from).CombinedOutput()
		if err != nil {
			t.Fatalf("go list %s: %v\n%s", f.from, err, out)
		}
		for _, dep := range strings.Fields(string(out)) {
			rel, ok := strings.CutPrefix(dep, module)
			if !ok || rel == f.from {
				continue
			}
			if f.to == "" || rel == f.to || strings.HasPrefix(rel, f.to+"/") {
				t.Errorf("%s depends on %s: %s", f.from, rel, f.why)
			}
		}
	}
}
