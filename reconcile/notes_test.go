package reconcile

import (
	"bytes"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sbxhq/sbx/spec"
)

// TestPlanCopiesBackendNotes: notes a backend attaches to a sandbox,
// existing or not, reach the plan and its rendering.
func TestPlanCopiesBackendNotes(t *testing.T) {
	note := "Docker's global network policy also allows every sandbox default-ai-services (4 hosts)"
	tests := []struct {
		name string
		live *Live
		rec  bool
	}{
		{"create", &Live{Name: "api", Notes: []string{note}}, false},
		{"update", func() *Live {
			l := liveOf(baseSpec(), sbxCaps())
			l.Network.Allow = nil // an addition to plan
			l.Notes = []string{note}
			return l
		}(), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			records := map[string]*Record{}
			if tt.rec {
				records["api"] = recordOf(t, sbxCaps(), baseSpec())
			}
			p := Plan([]Desired{desiredOf(t, baseSpec())}, map[string]*Live{"api": tt.live}, records, sbxCaps(), Options{})
			if diff := cmp.Diff([]string{note}, p.Sandboxes[0].Notes); diff != "" {
				t.Fatalf("notes (-want +got):\n%s", diff)
			}
			var b bytes.Buffer
			if err := Render(&b, p, false); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(b.String(), "    note: "+note+"\n") {
				t.Errorf("rendered plan lacks the note:\n%s", b.String())
			}
		})
	}
}

// TestPlanRemovedEphemeralPort: a port applied without a host port has
// whatever port the OS picked when it is removed; that is no drift, and
// the unpublish says which port without guessing the host port.
func TestPlanRemovedEphemeralPort(t *testing.T) {
	applied := baseSpec()
	applied.Ports = []spec.Port{{ContainerPort: 3000, Protocol: "tcp"}}
	live := liveOf(applied, sbxCaps())
	live.Ports = []spec.Port{{HostPort: 49152, ContainerPort: 3000, Protocol: "tcp"}}
	p := Plan([]Desired{desiredOf(t, baseSpec())}, map[string]*Live{"api": live},
		map[string]*Record{"api": recordOf(t, sbxCaps(), applied)}, sbxCaps(), Options{})
	c := p.Sandboxes[0]
	if len(c.Drift) != 0 {
		t.Errorf("drift: %v", c.Drift)
	}
	var got []Diff
	var unpublish []spec.Port
	for _, d := range c.Changes {
		got = append(got, Diff{Op: d.Op, Path: d.Path, Before: d.Before})
	}
	for _, s := range c.Steps {
		if s.Ports != nil {
			unpublish = append(unpublish, s.Ports.Unpublish...)
		}
	}
	if diff := cmp.Diff([]Diff{{Op: Remove, Path: "ports", Before: "3000/tcp"}}, got); diff != "" {
		t.Errorf("changes (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]spec.Port{{ContainerPort: 3000, Protocol: "tcp"}}, unpublish); diff != "" {
		t.Errorf("unpublish (-want +got):\n%s", diff)
	}
}
