package untrusted

import "testing"

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
