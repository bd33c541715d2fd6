package reconcile

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sbxhq/sbx/spec"
)

// TestPlanDefaultRuntime: a sandbox running the backend's default runtime
// (which the backend reports as "") matches a file that names no runtime
// and one that names the default (docker: {runtime: runc}); a file that
// names another runtime, or none for a sandbox on another runtime, is a
// change.
func TestPlanDefaultRuntime(t *testing.T) {
	replace := []StepKind{StepStop, StepRemove, StepCreate, StepSetNetwork, StepVerify, StepRecord}
	for _, tc := range []struct {
		name          string
		applied, want string // docker.runtime in the applied and the desired file
		live          string // the runtime the backend reports
		steps         []StepKind
	}{
		{name: "default named", applied: "runc", want: "runc", live: ""},
		{name: "default unnamed", applied: "", want: "", live: ""},
		{name: "default named after unnamed", applied: "", want: "runc", live: ""},
		{name: "other runtime asked", applied: "", want: "runsc", live: "", steps: replace},
		{name: "default asked on another runtime", applied: "runsc", want: "runc", live: "runsc", steps: replace},
		{name: "unnamed on another runtime", applied: "runsc", want: "", live: "runsc", steps: replace},
		{name: "other runtime kept", applied: "runsc", want: "runsc", live: "runsc"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			applied := changed(func(sb *spec.Spec) { sb.Name = "api"; sb.Docker.Runtime = tc.applied })
			want := changed(func(sb *spec.Spec) { sb.Name = "api"; sb.Docker.Runtime = tc.want })
			caps := dockerCaps()
			l := liveOf(applied, caps)
			l.Runtime, l.DefaultRuntime = tc.live, "runc"
			p := Plan([]Desired{desiredOf(t, want)}, map[string]*Live{"api": l},
				map[string]*Record{"api": recordOf(t, caps, applied)}, caps, Options{DriverVersion: "1.0.0"})
			if len(p.Errors) > 0 {
				t.Fatalf("plan errors: %v", p.Errors)
			}
			if diff := cmp.Diff(tc.steps, stepKinds(p), cmpEmpty); diff != "" {
				t.Errorf("steps (-want +got):\n%s", diff)
			}
		})
	}
}
