package spec_test

import (
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/sbxhq/sbx/spec"
)

// TestDefaultBlockCIDRsDocumented: the schema's first example of
// network.blockCIDRs and sandbox.yaml.example both show the default list,
// as they say they do, so that copying either never drops a range.
func TestDefaultBlockCIDRsDocumented(t *testing.T) {
	sch := compile(t)
	var ex any = sch.Raw()
	for _, key := range []string{"properties", "network", "properties", "blockCIDRs", "examples"} {
		m, _ := ex.(map[string]any)
		ex = m[key]
	}
	list, _ := ex.([]any)
	if len(list) == 0 {
		t.Fatal("network.blockCIDRs has no examples")
	}
	var first []string
	for _, v := range list[0].([]any) {
		first = append(first, v.(string))
	}
	if diff := cmp.Diff(spec.DefaultBlockCIDRs, first); diff != "" {
		t.Errorf("schema example (-default +example):\n%s", diff)
	}
	res, err := spec.Load([]string{"../sandbox.yaml.example"}, spec.Options{Schema: sch, LookupEnv: env(nil)})
	if err != nil {
		t.Fatal(err)
	}
	var want, got []netip.Prefix
	for _, s := range spec.DefaultBlockCIDRs {
		want = append(want, netip.MustParsePrefix(s))
	}
	got = res.Specs[0].Network.BlockCIDRs
	if diff := cmp.Diff(want, got, cmp.Comparer(func(a, b netip.Prefix) bool { return a == b })); diff != "" {
		t.Errorf("sandbox.yaml.example (-default +example):\n%s", diff)
	}
}

// TestLoopCompletionAndBackoff: one completion rule — a loop section
// without completion waits for the promise COMPLETE, as the README, init's
// prompt and the schema's default say; a section names a promise, verify
// commands or both — and the pause between failing iterations.
func TestLoopCompletionAndBackoff(t *testing.T) {
	sch := compile(t)
	for _, tc := range []struct {
		name, loop string
		want       spec.Completion
		backoff    spec.Backoff
	}{
		{"no completion", "", spec.Completion{Promise: "COMPLETE"}, spec.Backoff{Initial: 10 * time.Second, Max: 5 * time.Minute}},
		{"promise", "  completion: {promise: DONE}\n", spec.Completion{Promise: "DONE"}, spec.Backoff{Initial: 10 * time.Second, Max: 5 * time.Minute}},
		{"verify only", "  completion: {verify: [make test]}\n", spec.Completion{Verify: []string{"make test"}}, spec.Backoff{Initial: 10 * time.Second, Max: 5 * time.Minute}},
		{"backoff", "  backoff: {initial: 2s, max: 1m}\n", spec.Completion{Promise: "COMPLETE"}, spec.Backoff{Initial: 2 * time.Second, Max: time.Minute}},
		{"backoff off", "  backoff: {initial: 0s}\n", spec.Completion{Promise: "COMPLETE"}, spec.Backoff{Max: 5 * time.Minute}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			os.WriteFile(filepath.Join(dir, "PROMPT.md"), []byte("x"), 0o644)
			doc := "version: 1\nagent: claude\nloop:\n  prompt: PROMPT.md\n  maxIterations: 3\n" + tc.loop
			res, err := spec.Parse("sandbox.yaml", dir, []byte(doc), spec.Options{Schema: sch, Offline: true})
			if err != nil {
				t.Fatal(err)
			}
			l := res.Specs[0].Loop
			if diff := cmp.Diff(tc.want, l.Completion); diff != "" {
				t.Errorf("completion (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.backoff, l.Backoff); diff != "" {
				t.Errorf("backoff (-want +got):\n%s", diff)
			}
		})
	}
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "PROMPT.md"), []byte("x"), 0o644)
	_, err := spec.Parse("sandbox.yaml", dir, []byte("version: 1\nagent: claude\nloop:\n  prompt: PROMPT.md\n  maxIterations: 3\n  backoff: {max: 0s}\n"), spec.Options{Schema: sch, Offline: true})
	if err == nil || !strings.Contains(err.Error(), "loop.backoff.max: must be greater than zero") {
		t.Errorf("backoff.max 0s: %v", err)
	}
}

// TestBackoffPause: the pause doubles per failure in a row, up to max.
func TestBackoffPause(t *testing.T) {
	b := spec.Backoff{Initial: 10 * time.Second, Max: time.Minute}
	var got []time.Duration
	for n := 0; n <= 5; n++ {
		got = append(got, b.Pause(n))
	}
	want := []time.Duration{0, 10 * time.Second, 20 * time.Second, 40 * time.Second, time.Minute, time.Minute}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("pauses (-want +got):\n%s", diff)
	}
	if p := (spec.Backoff{Max: time.Minute}).Pause(3); p != 0 {
		t.Errorf("initial 0 pauses %s", p)
	}
}
