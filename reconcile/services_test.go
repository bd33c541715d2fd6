package reconcile

import (
	"strings"
	"testing"

	"github.com/sbxhq/sbx/spec"
)

// TestServicesPlan: services are compared with the record (no backend
// reads a service's env back): what each runs is shown, a sensitive env
// value only by the fact that it changed; any change replaces the
// sandbox on the docker driver.
func TestServicesPlan(t *testing.T) {
	caps := withServices(dockerCaps())
	withDB := func(image, password string) *spec.Spec {
		sb := baseSpec()
		sb.Services = map[string]spec.Service{"db": {Image: image, Env: map[string]string{"POSTGRES_PASSWORD": password, "PGDATA": "/data"}, Ports: []int{5432},
			Ready: &spec.Ready{Command: []string{"pg_isready"}, Timeout: spec.DefaultReadyTimeout}}}
		sb.Sensitive["services.db.env.POSTGRES_PASSWORD"] = true
		return sb
	}
	applied := withDB("postgres:16", "s3cret-one")
	plan := func(want *spec.Spec) *SandboxChange {
		t.Helper()
		p := Plan([]Desired{desiredOf(t, want)}, map[string]*Live{"api": liveOf(applied, caps)},
			map[string]*Record{"api": recordOf(t, caps, applied)}, caps, Options{})
		if len(p.Errors) > 0 || len(p.Sandboxes) != 1 {
			t.Fatalf("plan: %+v", p)
		}
		return p.Sandboxes[0]
	}
	if c := plan(withDB("postgres:16", "s3cret-one")); c.Action != ActionNoOp {
		t.Errorf("unchanged services: %s %+v", c.Action, c.Changes)
	}
	for _, tc := range []struct {
		name string
		want *spec.Spec
		diff Diff
	}{
		{"a sensitive value", withDB("postgres:16", "s3cret-two"), Diff{Op: Change, Field: FieldServices, Path: "services.db",
			Before: "image postgres:16, ports 5432, ready when pg_isready succeeds (within 1m0s), env PGDATA POSTGRES_PASSWORD",
			After:  "image postgres:16, ports 5432, ready when pg_isready succeeds (within 1m0s), env PGDATA POSTGRES_PASSWORD"}},
		{"the image", withDB("postgres:17", "s3cret-one"), Diff{Op: Change, Field: FieldServices, Path: "services.db",
			Before: "image postgres:16, ports 5432, ready when pg_isready succeeds (within 1m0s), env PGDATA POSTGRES_PASSWORD",
			After:  "image postgres:17, ports 5432, ready when pg_isready succeeds (within 1m0s), env PGDATA POSTGRES_PASSWORD"}},
	} {
		c := plan(tc.want)
		if c.Action != ActionReplace || len(c.Changes) != 1 {
			t.Fatalf("%s: %s %+v", tc.name, c.Action, c.Changes)
		}
		got := c.Changes[0]
		if got.Op != tc.diff.Op || got.Field != tc.diff.Field || got.Path != tc.diff.Path || got.Before != tc.diff.Before || got.After != tc.diff.After {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.diff)
		}
		if strings.Contains(got.String(), "s3cret") {
			t.Errorf("%s: the diff shows the value: %s", tc.name, got)
		}
	}
	// A service added and one removed.
	want := withDB("postgres:16", "s3cret-one")
	want.Services["cache"] = spec.Service{Image: "redis:7", Ports: []int{6379}}
	if c := plan(want); c.Action != ActionReplace || len(c.Changes) != 1 || c.Changes[0].Op != Add || c.Changes[0].After != "image redis:7, ports 6379" {
		t.Errorf("a service added: %s %+v", c.Action, c.Changes)
	}
	if c := plan(baseSpec()); c.Action != ActionReplace || len(c.Changes) != 1 || c.Changes[0].Op != Remove || c.Changes[0].Path != "services.db" {
		t.Errorf("a service removed: %s %+v", c.Action, c.Changes)
	}
	// Another driver says it cannot.
	if ps := Check(want, sbxCaps()); len(ps) != 2 || ps[0].Path != "services.cache" {
		t.Errorf("sbx's problems: %+v", ps)
	}
}
