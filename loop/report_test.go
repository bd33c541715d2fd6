package loop

import (
	"bytes"
	"encoding/json"
	"os"
	"testing"

	"github.com/sbxhq/sbx/state"
)

// TestReportRecordsBeforeFirstIteration: `sbx loop status --json` carries
// records, [] before the first iteration ends (docs/loop-status-json.md),
// then each record; status.json never does.
func TestReportRecordsBeforeFirstIteration(t *testing.T) {
	s := &Status{FormatVersion: "1", RunDir: t.TempDir()}
	r, err := s.Report()
	if err != nil {
		t.Fatal(err)
	}
	data, _ := json.Marshal(r)
	if !bytes.Contains(data, []byte(`"records":[]`)) {
		t.Errorf("before the first iteration: %s", data)
	}
	zero := 0
	rec, _ := json.Marshal(Record{Iteration: 1, Denials: &zero, UpstreamErrors: &zero})
	os.WriteFile(state.RunDir(s.RunDir).Records(), append(rec, '\n'), 0o600)
	if r, err = s.Report(); err != nil {
		t.Fatal(err)
	}
	data, _ = json.Marshal(r)
	if !bytes.Contains(data, []byte(`"records":[{"iteration":1,`)) || !bytes.Contains(data, []byte(`"denials":0,`)) {
		t.Errorf("after one: %s", data)
	}
	// status.json is a Status never given its records.
	if plain, _ := json.Marshal(&Status{FormatVersion: "1", RunDir: s.RunDir}); bytes.Contains(plain, []byte(`"records"`)) {
		t.Errorf("status.json holds records: %s", plain)
	}
}
