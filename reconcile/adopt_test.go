package reconcile

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// TestPlanAdoptReplace: adopting a sandbox the backend cannot read back
// (a plain container on the docker driver) replaces it, and the plan says
// it adopts, in its JSON (docs/plan-json.md) and its text; destroying one
// with --adopt says so too.
func TestPlanAdoptReplace(t *testing.T) {
	tc := planCase{caps: dockerCaps(), adopt: true, live: func(l *Live) *Live {
		return &Live{Name: l.Name, Exists: true, Status: "running", Template: l.Template}
	}}
	d, l, _ := tc.inputs(t, "api")
	live := map[string]*Live{"api": l}
	p := Plan([]Desired{d}, live, nil, tc.caps, Options{Adopt: true})
	if err := p.Err(); err != nil {
		t.Fatal(err)
	}
	if len(p.Sandboxes) != 1 || p.Sandboxes[0].Action != ActionReplace {
		t.Fatalf("want one replace, got %+v", p.Sandboxes)
	}
	var js bytes.Buffer
	if err := WriteJSON(&js, p); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Sandboxes []map[string]any `json:"sandboxes"`
	}
	if err := json.Unmarshal(js.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Sandboxes[0]["adopt"] != true {
		t.Errorf("plan --adopt --json has no \"adopt\": true: %s", js.String())
	}
	var text bytes.Buffer
	if err := Render(&text, p, false); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text.String(), "will be adopted") {
		t.Errorf("the plan does not say it adopts:\n%s", text.String())
	}

	dp := PlanDestroy([]string{"api"}, live, nil, tc.caps, Options{Adopt: true})
	if err := dp.Err(); err != nil {
		t.Fatal(err)
	}
	if len(dp.Sandboxes) != 1 || !dp.Sandboxes[0].Adopt {
		t.Errorf("destroy --adopt does not say it adopts: %+v", dp.Sandboxes)
	}
}
