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

func TestTraceRequestRedacts(t *testing.T) {
	var trace bytes.Buffer
	r := &Runner{Trace: &trace}
	r.Redact("hunter2")
	r.TraceRequest("docker engine API GET /x", 200, 0, `{"v":"hunter2"}`, nil)
	r.TraceRequest("docker engine API GET /y", 0, 0, "", errors.New("dial: hunter2"))
	want := "$ docker engine API GET /x\n# stdout:\n| {\"v\":\"[redacted]\"}\n# status 200 (0s)\n" +
		"$ docker engine API GET /y\n# error: dial: [redacted]\n# status 0 (0s)\n"
	if trace.String() != want {
		t.Errorf("trace =\n%s\nwant\n%s", trace.String(), want)
	}
}

func TestGetenv(t *testing.T) {
	t.Setenv("SBX_RUNNER_TEST", "own")
	if got := (&Runner{}).Getenv("SBX_RUNNER_TEST"); got != "own" {
		t.Errorf("without Env: %q, want sbx's own value", got)
	}
	r := &Runner{Env: []string{"SBX_RUNNER_TEST=first", "OTHER=x", "SBX_RUNNER_TEST=last"}}
	if got := r.Getenv("SBX_RUNNER_TEST"); got != "last" {
		t.Errorf("with Env: %q, want the last entry, as os/exec uses", got)
	}
	if got := (&Runner{Env: []string{}}).Getenv("SBX_RUNNER_TEST"); got != "" {
		t.Errorf("with an empty Env: %q, want unset", got)
	}
}
