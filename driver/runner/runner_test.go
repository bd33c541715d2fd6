package runner

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
)

func TestRunTraceRedacts(t *testing.T) {
	var trace bytes.Buffer
	r := &Runner{Trace: &trace}
	r.Redact("hunter2")
	out, err := r.Output(context.Background(), "sh", "-c", "echo value=hunter2; echo oops hunter2 >&2; exit 3")
	var e *Error
	if !errors.As(err, &e) || e.ExitCode != 3 {
		t.Fatalf("err = %v, want exit 3", err)
	}
	if string(out) != "value=hunter2\n" {
		t.Errorf("stdout = %q (the caller gets the real output)", out)
	}
	if strings.Contains(trace.String(), "hunter2") || strings.Contains(err.Error(), "hunter2") {
		t.Errorf("secret leaked:\ntrace: %s\nerror: %v", trace.String(), err)
	}
	want := "$ sh -c 'echo value=[redacted]; echo oops [redacted] >&2; exit 3'\n# stdout:\n| value=[redacted]\n# stderr:\n| oops [redacted]\n# exit 3 ("
	if !strings.HasPrefix(trace.String(), want) {
		t.Errorf("trace =\n%s\nwant prefix\n%s", trace.String(), want)
	}
	if got := err.Error(); got != "sh -c 'echo value=[redacted]; echo oops [redacted] >&2; exit 3': exit status 3: oops [redacted]" {
		t.Errorf("error = %q", got)
	}
}

func TestQuote(t *testing.T) {
	got := Quote([]string{"docker", "run", "--label", "a=b c", "it's", ""})
	if want := `docker run --label 'a=b c' 'it'\''s' ''`; got != want {
		t.Errorf("Quote = %s, want %s", got, want)
	}
}
