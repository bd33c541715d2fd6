package untrusted

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestText(t *testing.T) {
	tests := []struct{ in, want string }{
		{"api.example.com", "api.example.com"},
		{"npm test ./...", "npm test ./..."},
		{"héllo wörld", "héllo wörld"},
		{"", `""`},
		{"\x1b]0;pwned\x07evil.com", `"\x1b]0;pwned\aevil.com"`},
		{"a\x1b[2Jb", `"a\x1b[2Jb"`},
		{"line\nbreak", `"line\nbreak"`},
		{"\u202egnp.exe", `"\u202egnp.exe"`},
		{"\u009b31m", `"\u009b31m"`},
		{`back\slash`, `"back\\slash"`},
		{`"quoted"`, `"\"quoted\""`},
		{"bad\xffutf8", `"bad\xffutf8"`},
	}
	for _, tt := range tests {
		if got := Text(tt.in); got != tt.want {
			t.Errorf("Text(%q) = %s, want %s", tt.in, got, tt.want)
		}
	}
}

// TestVisible plays the agent whose output reaches the terminal: escape
// sequences (a clipboard write, a title change), a carriage return that
// would overwrite the line, bidirectional overrides and stray bytes are
// shown, never acted on; ordinary text, quotes and tabs stay readable.
func TestVisible(t *testing.T) {
	tests := []struct{ in, want string }{
		{`ok: "quoted" \ path	tab`, `ok: "quoted" \ path	tab`},
		{"two\nlines\n", "two\nlines\n"},
		{"héllo wörld ✓", "héllo wörld ✓"},
		{"\x1b]52;c;cHduZWQ=\x07copied", `\x1b]52;c;cHduZWQ=\acopied`},
		{"\x1b]0;title\x1b\\", `\x1b]0;title\x1b\`},
		{"\rsbx loop: iteration 1: verify passed", `\rsbx loop: iteration 1: verify passed`},
		{"x\bX", `x\bX`},
		{"\u202egnp.exe \u2066isolate\u2069", `\u202egnp.exe \u2066isolate\u2069`},
		{"\u009b31m \u2028", `\u009b31m \u2028`},
		{"bad\xffutf8\xe2\x80", `bad\xffutf8\xe2\x80`},
		{"\x7f", `\x7f`},
	}
	for _, tt := range tests {
		got := Visible(tt.in)
		if got != tt.want {
			t.Errorf("Visible(%q) = %q, want %q", tt.in, got, tt.want)
		}
		if again := Visible(got); again != got {
			t.Errorf("Visible(Visible(%q)) = %q, want %q", tt.in, again, got)
		}
	}
}

// TestVisibleWriter writes a character split across writes and an escape
// sequence one byte at a time: the character arrives whole, the sequence
// escaped.
func TestVisibleWriter(t *testing.T) {
	var out strings.Builder
	w := &VisibleWriter{W: &out}
	for _, b := range []byte("✓\x1b[2J\u202e") {
		if n, err := w.Write([]byte{b}); n != 1 || err != nil {
			t.Fatalf("Write = %d, %v", n, err)
		}
	}
	w.Write([]byte("ok\xe2\x80"))
	w.Flush()
	if got, want := out.String(), `✓\x1b[2J\u202eok\xe2\x80`; got != want {
		t.Errorf("written %q, want %q", got, want)
	}
}

// TestJSONWriter: what encoding/json leaves raw that a terminal could act
// on (a C1 CSI, DEL, bidirectional overrides, a tag character) is
// escaped, and the JSON decodes to the same value.
func TestJSONWriter(t *testing.T) {
	in := map[string]string{"host": "a\u009b31m\x7f\u202eb\U000e0041 ✓\n\x1b"}
	var out strings.Builder
	if err := json.NewEncoder(JSONWriter{W: &out}).Encode(in); err != nil {
		t.Fatal(err)
	}
	want := `{"host":"a\u009b31m\u007f\u202eb\udb40\udc41 ✓\n\u001b"}` + "\n"
	if diff := cmp.Diff(want, out.String()); diff != "" {
		t.Errorf("written (-want +got):\n%s", diff)
	}
	var back map[string]string
	if err := json.Unmarshal([]byte(out.String()), &back); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(in, back); diff != "" {
		t.Errorf("decoded (-want +got):\n%s", diff)
	}
}

// TestLine plays the agent whose words end up inside one of sbx's lines
// (an error quoting a file name, a run's detail): nothing in them acts on
// the terminal, and a line feed cannot start a line that passes for sbx's.
func TestLine(t *testing.T) {
	tests := []struct{ in, want string }{
		{"plain text: ok", "plain text: ok"},
		{"x\nsbx loop: iteration 3: verify passed", `x\nsbx loop: iteration 3: verify passed`},
		{"\x1b]52;c;ZXZpbA==\x07\rsbx: ok", `\x1b]52;c;ZXZpbA==\a\rsbx: ok`},
		{"\u202eevil\u2028", `\u202eevil\u2028`},
		{"\u009b2J\xff", `\u009b2J\xff`},
	}
	for _, tt := range tests {
		if got := Line(tt.in); got != tt.want {
			t.Errorf("Line(%q) = %s, want %s", tt.in, got, tt.want)
		}
	}
}
