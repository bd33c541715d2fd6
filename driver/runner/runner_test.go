package runner

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
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

// TestRunKeepsBoundedCopy: an output that goes to the caller's writer
// reaches it whole, while the copy the runner keeps for the trace and the
// error stops at maxKept (an agent's output through sbx loop has no end).
func TestRunKeepsBoundedCopy(t *testing.T) {
	var trace bytes.Buffer
	r := &Runner{Trace: &trace}
	const size = 3 * maxKept
	var out, errOut countingWriter
	out.w, errOut.w = io.Discard, io.Discard
	script := fmt.Sprintf("head -c %d /dev/zero | tr '\\0' o; head -c %d /dev/zero | tr '\\0' e >&2; exit 1", size, size)
	err := r.Run(context.Background(), Cmd{Args: []string{"sh", "-c", script}, Stdout: &out, Stderr: &errOut})
	var e *Error
	if !errors.As(err, &e) || e.ExitCode != 1 {
		t.Fatalf("err = %v, want exit 1", err)
	}
	if out.n != size || errOut.n != size {
		t.Errorf("the caller got %d and %d bytes, want %d each", out.n, errOut.n, size)
	}
	note := fmt.Sprintf("(%d bytes more, not kept)", size-maxKept)
	if len(e.Stderr) > maxKept+100 || !strings.HasSuffix(e.Stderr, note+"\n") {
		t.Errorf("the error keeps %d bytes of stderr, ending %q", len(e.Stderr), e.Stderr[max(len(e.Stderr)-60, 0):])
	}
	if trace.Len() > 3*maxKept || strings.Count(trace.String(), note) != 2 {
		t.Errorf("the trace is %d bytes, with %d notes", trace.Len(), strings.Count(trace.String(), note))
	}
}
