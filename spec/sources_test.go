package spec_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/sbxhq/sbx/spec"
)

// TestLoadSources loads a revision's files from memory: layers group as
// on disk, positions name each file as given, and with NoHostFiles the
// host paths a file names are not looked at (a pull request's mount of a
// host path that does not exist here is not an error, and whether one
// exists is not revealed).
func TestLoadSources(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "no-such-dir")
	srcs := []spec.Source{
		{Name: "svc/sandbox.yaml", Dir: dir, Data: []byte("version: 1\nname: api\nagent: shell\nmounts: [\"" + missing + ":/m\"]\n")},
		{Name: "svc/layer.yaml", Dir: dir, Data: []byte("env: {A: b}\n")},
	}
	res, err := spec.LoadSources(srcs, spec.Options{Schema: compile(t), NoHostFiles: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Specs) != 1 || res.Specs[0].Env["A"] != "b" || len(res.Specs[0].Mounts) != 1 {
		t.Fatalf("specs: %+v", res.Specs)
	}
	if o, ok := res.Specs[0].OriginOf("env.A"); !ok || o.String() != "svc/layer.yaml:1:10" {
		t.Errorf("origin of env.A: %v %v", o, ok)
	}
	_, err = spec.LoadSources(srcs, spec.Options{Schema: compile(t)})
	if err == nil || !strings.Contains(err.Error(), "mount source "+missing+" does not exist") {
		t.Errorf("without NoHostFiles: %v, want the missing mount source", err)
	}
}
