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

// forbidden are the arrows that must not exist: a package (from) must not
// depend on a package whose import path is or starts with to ("": any of
// sbx's but except), through others too unless direct says only its own
// imports count.
var forbidden = []struct {
	from, to, except string
	direct           bool
	why              string
}{
	{from: "egress", to: "driver", why: "the proxy is below the drivers; its log's types are netlog's"},
	{from: "driver/kubernetes", to: "driver/docker", why: "labels and the static-binary check are driver's"},
	{from: "loop", to: "driver/cliutil", why: "exec options are driver's"},
	{from: "driver", to: "driver/cliutil", why: "driver is the interface the CLI drivers implement"},
	{from: "loop", to: "reconcile", direct: true, why: "the loop's locks and files are state's"},
	{from: "netlog", why: "netlog is a leaf"},
	{from: "state", except: "internal/atomicfile", why: "state is below every package that keeps state"},
}

// TestArrows fails when a forbidden dependency comes back.
func TestArrows(t *testing.T) {
	for _, f := range forbidden {
		args := []string{"list", "-deps", "-f", "{{.ImportPath}}", module + f.from}
		if f.direct {
			args = []string{"list", "-f", `{{join .Imports "\n"}}`, module + f.from}
		}
		out, err := exec.Command("go", args...).CombinedOutput()
		if err != nil {
			t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		for _, dep := range strings.Fields(string(out)) {
			rel, ok := strings.CutPrefix(dep, module)
			if !ok || rel == f.from || rel == f.except {
				continue
			}
			if f.to == "" || rel == f.to || strings.HasPrefix(rel, f.to+"/") {
				t.Errorf("%s depends on %s: %s", f.from, rel, f.why)
			}
		}
	}
}
