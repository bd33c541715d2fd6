package checkpoint

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/sbxhq/sbx/internal/fixture"
	"github.com/sbxhq/sbx/state"
)

func TestCatalog(t *testing.T) {
	c := Catalog{Dir: state.Dir(t.TempDir())}
	t0 := time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)
	a := Checkpoint{Name: "api-1", Driver: "docker", Sandbox: "api", Created: t0.Add(time.Minute), Kind: KindManual, Origin: OriginCreated, Image: Ref("api-1"), ID: "sha256:1"}
	b := Checkpoint{Name: "api-0", Driver: "docker", Sandbox: "api", Created: t0, Kind: KindLoop, Origin: OriginCreated, Image: Ref("api-0")}
	other := Checkpoint{Name: "api-1", Driver: "sbx", Created: t0, Kind: KindManual, Origin: OriginImported, Source: "/x/a.tar", Image: Ref("api-1")}
	for _, cp := range []Checkpoint{a, b, other} {
		if err := c.Put(cp); err != nil {
			t.Fatal(err)
		}
	}
	got, err := c.List("docker")
	if err != nil {
		t.Fatal(err)
	}
	a.FormatVersion, b.FormatVersion = FormatVersion, FormatVersion
	if diff := cmp.Diff([]Checkpoint{b, a}, got); diff != "" {
		t.Errorf("List, oldest first (-want +got):\n%s", diff)
	}
	if _, err := c.Get("docker", "nope"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Get of a missing checkpoint: %v", err)
	}
	if err := c.Delete("docker", "api-0"); err != nil {
		t.Fatal(err)
	}
	if err := c.Delete("docker", "api-0"); err != nil {
		t.Errorf("deleting twice: %v", err)
	}
	if got, _ := c.List("docker"); len(got) != 1 {
		t.Errorf("after delete: %v", got)
	}
	if runtime.GOOS != "windows" {
		fi, err := os.Stat(c.Dir.Checkpoint("docker", "api-1"))
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("record mode: %v %v", fi.Mode(), err)
		}
	}
	for _, bad := range []string{"../../key", "a/b", "", ".hidden", "x\x00"} {
		if err := c.Put(Checkpoint{Name: bad, Driver: "docker"}); err == nil {
			t.Errorf("Put accepted name %q", bad)
		}
		if _, err := c.Get("docker", bad); err == nil || errors.Is(err, ErrNotFound) {
			t.Errorf("Get of name %q: %v", bad, err)
		}
	}
	if _, err := c.Get("../x", "a"); err == nil {
		t.Error("Get accepted a driver name with a path in it")
	}
}

func TestCatalogRefusesForeignRecords(t *testing.T) {
	c := Catalog{Dir: state.Dir(t.TempDir())}
	dir := c.Dir.Checkpoints("docker")
	os.MkdirAll(dir, 0o700)
	os.WriteFile(filepath.Join(dir, "x.json"), []byte(`{"format_version":"1","name":"y","driver":"docker"}`), 0o600)
	if _, err := c.Get("docker", "x"); err == nil {
		t.Error("a record naming another checkpoint was accepted")
	}
}

func TestPrune(t *testing.T) {
	t0 := time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)
	cp := func(name, sandbox, kind string, min int) Checkpoint {
		return Checkpoint{Name: name, Sandbox: sandbox, Kind: kind, Created: t0.Add(time.Duration(min) * time.Minute)}
	}
	all := []Checkpoint{
		cp("l3", "api", KindLoop, 3), cp("l1", "api", KindLoop, 1), cp("m0", "api", KindManual, 0),
		cp("l2", "api", KindLoop, 2), cp("o1", "web", KindLoop, 0), cp("l4", "api", KindLoop, 4),
	}
	tests := []struct {
		keep int
		want []string
	}{
		{keep: 5, want: nil},
		{keep: 4, want: nil},
		{keep: 2, want: []string{"l1", "l2"}},
		{keep: 1, want: []string{"l1", "l2", "l3"}},
	}
	for _, tc := range tests {
		var got []string
		for _, c := range Prune(all, "api", tc.keep) {
			got = append(got, c.Name)
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("keep %d (-want +got):\n%s", tc.keep, diff)
		}
	}
}

func TestNames(t *testing.T) {
	now := time.Date(2026, 11, 24, 10, 15, 0, 0, time.FixedZone("x", 3600))
	if got := DefaultName("api", now); got != "api-20261124T091500Z" || ValidName(got) != nil {
		t.Errorf("DefaultName = %q", got)
	}
	if got := LoopName("api", "20261124T091500Z-ab12cd", "3"); ValidName(got) != nil {
		t.Errorf("LoopName %q is not a valid name", got)
	}
	if Ref("x") != "sbx-checkpoint:x" {
		t.Error(Ref("x"))
	}
}

// TestSweptRepository: the tests' sweep of checkpoints a killed run left
// looks in this package's repository.
func TestSweptRepository(t *testing.T) {
	if fixture.CheckpointRepository != Repository {
		t.Errorf("fixture.CheckpointRepository is %q, want %q", fixture.CheckpointRepository, Repository)
	}
}
