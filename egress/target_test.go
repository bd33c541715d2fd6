package egress

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestParseAuthority covers the parser on its own, including forms that
// net/http's URL parser would refuse before the proxy sees them.
func TestParseAuthority(t *testing.T) {
	type want struct {
		Host    string
		IP      bool
		Port    int
		HasPort bool
	}
	tests := []struct {
		in      string
		want    want
		wantErr string
	}{
		{"github.com:443", want{"github.com", false, 443, true}, ""},
		{"GitHub.COM", want{"github.com", false, 80, false}, ""},
		{"a_b-c.example", want{"a_b-c.example", false, 80, false}, ""},
		{"xn--bcher-kva.example", want{"xn--bcher-kva.example", false, 80, false}, ""},
		{"1.2.3.4:8080", want{"1.2.3.4", true, 8080, true}, ""},
		{"[2606:2800:21F:CB07::1]:443", want{"2606:2800:21f:cb07::1", true, 443, true}, ""},
		{"[::ffff:1.2.3.4]", want{"1.2.3.4", true, 80, false}, ""},
		{"[::ffff:102:304]:1", want{"1.2.3.4", true, 1, true}, ""},
		{"[::1.2.3.4]", want{"1.2.3.4", true, 80, false}, ""},
		{"[::1]", want{"::1", true, 80, false}, ""},
		{"[::]", want{"::", true, 80, false}, ""},
		{"[::2]", want{"0.0.0.2", true, 80, false}, ""},
		{"x.example:00443", want{"x.example", false, 443, true}, ""},
		{"x.example:65535", want{"x.example", false, 65535, true}, ""},

		{"", want{}, "empty host"},
		{":443", want{}, "empty host"},
		{"[]:443", want{}, "is not an IPv6 address"},
		{"[fe80::1%25eth0]:443", want{}, "zone identifiers are refused"},
		{"[fe80::1%eth0]", want{}, "zone identifiers are refused"},
		{"[fe80::1%2525eth0]", want{}, "zone identifiers are refused"},
		{"fe80::1%eth0", want{}, "percent-encoding is refused"},
		{"allowed%2etest", want{}, "percent-encoding is refused"},
		{"%31%32%37.0.0.1", want{}, "percent-encoding is refused"},
		{"user@x.example", want{}, "userinfo is refused"},
		{"x.example:443@y.example", want{}, "userinfo is refused"},
		{"[1.2.3.4]", want{}, "is not an IPv6 address"},
		{"[::1", want{}, "missing ]"},
		{"[::1]x", want{}, "bad target"},
		{"::1", want{}, "in brackets"},
		{"::1:443", want{}, "in brackets"},
		{"x.example:0", want{}, "not a number from 1 to 65535"},
		{"x.example:65536", want{}, "not a number from 1 to 65535"},
		{"x.example:+80", want{}, "not a number from 1 to 65535"},
		{"x.example:-1", want{}, "not a number from 1 to 65535"},
		{"x.example:", want{}, "not a number from 1 to 65535"},
		{"x.example:443443", want{}, "not a number from 1 to 65535"},
		{"x.example:８０", want{}, "not a number from 1 to 65535"},
		{"127.1", want{}, "dotted-decimal"},
		{"0x7f.1", want{}, "dotted-decimal"},
		{"0x7F000001", want{}, "dotted-decimal"},
		{"2130706433", want{}, "dotted-decimal"},
		{"0177.0.0.1", want{}, "dotted-decimal"},
		{"127.0.0.1.", want{}, "trailing dot"},
		{"x.example.", want{}, "trailing dot"},
		{"x.0x", want{}, "dotted-decimal"},
		{"x.0xg", want{"x.0xg", false, 80, false}, ""},
		{"x.1e", want{"x.1e", false, 80, false}, ""},
		{".x.example", want{}, "labels are 1 to 63"},
		{strings.Repeat("a", 64) + ".example", want{}, "labels are 1 to 63"},
		{strings.Repeat("a", 63) + ".example", want{strings.Repeat("a", 63) + ".example", false, 80, false}, ""},
		{strings.Repeat("a.", 126) + "a", want{strings.Repeat("a.", 126) + "a", false, 80, false}, ""},
		{strings.Repeat("a.", 126) + "aa", want{}, "longer than 253"},
		{"bücher.example", want{}, "punycode"},
		{"x example", want{}, "punycode"},
		{"x\x00.example", want{}, "punycode"},
	}
	for _, tt := range tests {
		d, err := parseAuthority(tt.in, 80)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("parseAuthority(%q) = %+v, %v; want an error containing %q", tt.in, d, err, tt.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("parseAuthority(%q): %v", tt.in, err)
			continue
		}
		got := want{d.host, d.ip.IsValid(), d.port, d.hasPort}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("parseAuthority(%q) (-want +got):\n%s", tt.in, diff)
		}
	}
}

func TestAuthority(t *testing.T) {
	for in, want := range map[string]string{
		"Example.COM":        "example.com",
		"example.com:8080":   "example.com:8080",
		"[::ffff:1.2.3.4]:8": "1.2.3.4:8",
		"[2001:DB8::1]":      "[2001:db8::1]",
		"[2001:db8::1]:443":  "[2001:db8::1]:443",
	} {
		d, err := parseAuthority(in, 80)
		if err != nil {
			t.Fatal(err)
		}
		if got := d.authority(); got != want {
			t.Errorf("authority of %q = %q, want %q", in, got, want)
		}
	}
}

func TestCanonical(t *testing.T) {
	for in, want := range map[string]string{
		"1.2.3.4":          "1.2.3.4",
		"::ffff:1.2.3.4":   "1.2.3.4",
		"::ffff:7f00:1":    "127.0.0.1",
		"::1.2.3.4":        "1.2.3.4",
		"::7f00:1":         "127.0.0.1",
		"::2":              "0.0.0.2",
		"::1":              "::1",
		"::":               "::",
		"::ffff:0:1.2.3.4": "::ffff:0:102:304", // IPv4-translated is not mapped
		"64:ff9b::1.2.3.4": "64:ff9b::102:304",
		"fe80::1%eth0":     "fe80::1%eth0",
		"2001:db8::1":      "2001:db8::1",
	} {
		if got := canonical(netip.MustParseAddr(in)).String(); got != want {
			t.Errorf("canonical(%s) = %s, want %s", in, got, want)
		}
	}
}

func TestClip(t *testing.T) {
	if got := clip("short"); got != "short" {
		t.Errorf("clip(short) = %q", got)
	}
	long := strings.Repeat("x", 5<<20)
	got := clip(long)
	if len(got) > maxLogString+32 || !strings.HasSuffix(got, "…(5242880 bytes)") {
		t.Errorf("clip of 5 MiB = %d bytes ending %q", len(got), got[len(got)-20:])
	}
}

func mustAddr(s string) netip.Addr { return netip.MustParseAddr(s) }
