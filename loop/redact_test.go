package loop

import (
	"bytes"
	"encoding/base64"
	"strings"
	"testing"
)

// TestRedactorStream: an agent that prints a secret (or its base64) split
// across writes, with or without line ends, never gets it into the log,
// and one that prints megabytes without a newline does not make the
// redactor hold them.
func TestRedactorStream(t *testing.T) {
	const secret = "sk-ant-Secret-Value-0123456789"
	var out bytes.Buffer
	r := newRedactor(&out, []string{secret})
	enc := base64.StdEncoding.EncodeToString([]byte("user:" + secret))
	text := "a\n" + secret + " and " + enc + "\n" + strings.Repeat("x", 200<<10) + secret + strings.Repeat("y", 100<<10) + secret
	for i := 0; i < len(text); i += 7 {
		r.Write([]byte(text[i:min(i+7, len(text))]))
		if len(r.buf) > maxPending+len(secret)*2 {
			t.Fatalf("redactor holds %d bytes", len(r.buf))
		}
	}
	r.Flush()
	got := out.String()
	if strings.Contains(got, secret) || strings.Contains(got, "U2VjcmV0LVZhbHVl") {
		t.Errorf("secret in the redacted stream")
	}
	if n := strings.Count(got, "[redacted]"); n != 4 {
		t.Errorf("%d secrets masked, want 4", n)
	}
	if want := len(text) - 3*len(secret) - (len(enc) - len("dXNlcjpz")); len(got) < want {
		t.Errorf("redacted stream lost text: %d bytes, want at least %d", len(got), want)
	}
}
