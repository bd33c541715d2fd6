package runner

import (
	"bytes"
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestTranscriptRoundTrip: what the runner traces reads back as the
// commands it ran, with their output and exit status.
func TestTranscriptRoundTrip(t *testing.T) {
	var trace bytes.Buffer
	r := &Runner{Trace: &trace}
	r.Redact("s3cret")
	ctx := context.Background()
	if _, err := r.Output(ctx, "sh", "-c", `printf 'a b\n\n{"x": "s3cret"}\n'; echo err >&2`, "it's"); err != nil {
		t.Fatal(err)
	}
	r.Output(ctx, "sh", "-c", "exit 3")
	entries, err := ReadTranscript(&trace)
	if err != nil {
		t.Fatal(err)
	}
	for i := range entries {
		entries[i].Line = 0
	}
	want := []Entry{
		{Args: []string{"sh", "-c", `printf 'a b\n\n{"x": "[redacted]"}\n'; echo err >&2`, "it's"}, Stdout: "a b\n\n{\"x\": \"[redacted]\"}\n", Stderr: "err\n"},
		{Args: []string{"sh", "-c", "exit 3"}, Exit: 3},
	}
	if diff := cmp.Diff(want, entries); diff != "" {
		t.Errorf("(-want +got):\n%s\ntrace:\n%s", diff, trace.String())
	}
}

func TestReadTranscriptErrors(t *testing.T) {
	for _, in := range []string{
		"stray text\n$ ls\n",
		"$ ls\n| out without a section\n",
		"$ echo 'unterminated\n",
		"$ ls\n# exit x\n",
		"$ ls\nplain line\n",
	} {
		if _, err := ReadTranscript(bytes.NewBufferString(in)); err == nil {
			t.Errorf("%q: no error", in)
		}
	}
}
