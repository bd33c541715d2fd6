package spec

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseHost(t *testing.T) {
	tests := []struct {
		in, want, err string
	}{
		{in: "GitHub.com", want: "github.com"},
		{in: "github.com.", want: "github.com"},
		{in: "*.npmjs.org", want: "*.npmjs.org"},
		{in: "github.com:443", want: "github.com:443"},
		{in: "10.1.2.3", want: "10.1.2.3"},
		{in: "10.1.2.3:8080", want: "10.1.2.3:8080"},
		{in: "::1", want: "::1"},
		{in: "[2001:db8::1]:443", want: "[2001:db8::1]:443"},
		{in: "*", err: `invalid host pattern "*": a bare * matches everything; set network.policy: allow instead`},
		{in: "*.com", err: `invalid host pattern "*.com": a wildcard needs at least two labels after it, as in *.example.com`},
		{in: "a.*.com", err: `invalid host pattern "a.*.com": * may only stand alone as the first label, as in *.example.com`},
		{in: "https://x.io/a", err: `invalid host pattern "https://x.io/a": write a host name, not a URL (did you mean "x.io"?)`},
		{in: "x.io:0", err: `invalid host pattern "x.io:0": port "0" is not a number from 1 to 65535`},
		{in: "under_score.io", err: `invalid host pattern "under_score.io": "under_score" is not a valid DNS label (letters, digits and inner hyphens, at most 63)`},
		{in: "1.2.3.999", err: `invalid host pattern "1.2.3.999": not a valid IP address or host name`},
		{in: "[::1", err: `invalid host pattern "[::1": missing ]`},
	}
	for _, tt := range tests {
		h, err := ParseHost(tt.in)
		if tt.err != "" {
			if err == nil || err.Error() != tt.err {
				t.Errorf("ParseHost(%q) error = %v, want %s", tt.in, err, tt.err)
			}
			continue
		}
		if err != nil || h.String() != tt.want {
			t.Errorf("ParseHost(%q) = %q, %v; want %q", tt.in, h, err, tt.want)
		}
	}
}

func TestHostMatches(t *testing.T) {
	tests := []struct {
		pattern, host string
		port          int
		want          bool
	}{
		{"github.com", "github.com", 443, true},
		{"github.com", "GITHUB.com", 80, true},
		{"github.com", "api.github.com", 443, false},
		{"*.github.com", "api.github.com", 443, true},
		{"*.github.com", "a.b.github.com", 443, false},
		{"*.github.com", "github.com", 443, false},
		{"github.com:443", "github.com", 443, true},
		{"github.com:443", "github.com", 80, false},
		{"10.0.0.1", "10.0.0.1", 80, true},
		{"10.0.0.1", "::ffff:10.0.0.1", 80, true},
		{"[::1]:8080", "::1", 8080, true},
	}
	for _, tt := range tests {
		h, err := ParseHost(tt.pattern)
		if err != nil {
			t.Fatal(err)
		}
		if got := h.Matches(tt.host, tt.port); got != tt.want {
			t.Errorf("%q.Matches(%q, %d) = %v, want %v", tt.pattern, tt.host, tt.port, got, tt.want)
		}
	}
}

func TestParseSize(t *testing.T) {
	tests := []struct {
		in   string
		want int64
		err  bool
	}{
		{in: "512m", want: 512 << 20},
		{in: "8g", want: 8 << 30},
		{in: "8G", want: 8 << 30},
		{in: "1.5g", want: 3 << 29},
		{in: "4GiB", want: 4 << 30},
		{in: "4gb", want: 4 << 30},
		{in: "2048k", want: 2 << 20},
		{in: "1073741824", want: 1 << 30},
		{in: "100b", want: 100},
		{in: "8 gigs", err: true},
		{in: "ib", err: true},
		{in: "-1g", err: true},
		{in: "99999999999t", err: true},
	}
	for _, tt := range tests {
		got, err := ParseSize(tt.in)
		if (err != nil) != tt.err || got != tt.want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d, error %v", tt.in, got, err, tt.want, tt.err)
		}
	}
	if got := FormatSize(8 << 30); got != "8g" {
		t.Errorf("FormatSize(8g) = %q", got)
	}
}

func TestHumanSize(t *testing.T) {
	tests := []struct {
		in   int64
		want string
	}{
		{0, "0 B"},
		{1023, "1023 B"},
		{1024, "1 KiB"},
		{1536, "1.5 KiB"},
		{512 << 20, "512 MiB"},
		{1288490189, "1.2 GiB"},
		{8 << 30, "8 GiB"},
		// Just under a unit rounds up into it, not to "1024.0 MiB".
		{1<<30 - 1, "1 GiB"},
		{3 << 40, "3 TiB"},
		{1<<63 - 1, "8 EiB"},
	}
	for _, tt := range tests {
		if got := HumanSize(tt.in); got != tt.want {
			t.Errorf("HumanSize(%d) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestParsePort(t *testing.T) {
	tests := []struct {
		in   string
		want Port
		err  string
	}{
		{in: "3000", want: Port{ContainerPort: 3000, Protocol: "tcp"}},
		{in: "8080:3000", want: Port{HostPort: 8080, ContainerPort: 3000, Protocol: "tcp"}},
		{in: "127.0.0.1:8080:3000/udp", want: Port{HostIP: "127.0.0.1", HostPort: 8080, ContainerPort: 3000, Protocol: "udp"}},
		{in: "127.0.0.1::3000", want: Port{HostIP: "127.0.0.1", ContainerPort: 3000, Protocol: "tcp"}},
		{in: "[::1]:8080:3000", want: Port{HostIP: "::1", HostPort: 8080, ContainerPort: 3000, Protocol: "tcp"}},
		{in: "70000", err: `invalid port "70000": port "70000" is not a number from 1 to 65535`},
		{in: "3000/sctp", err: `invalid port "3000/sctp": protocol must be tcp or udp`},
		{in: "a:b:c:d", err: `invalid port "a:b:c:d": use [IP:][HOST:]CONTAINER[/tcp|udp]`},
	}
	for _, tt := range tests {
		got, err := ParsePort(tt.in)
		if tt.err != "" {
			if err == nil || err.Error() != tt.err {
				t.Errorf("ParsePort(%q) error = %v, want %s", tt.in, err, tt.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParsePort(%q): %v", tt.in, err)
			continue
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("ParsePort(%q) (-want +got):\n%s", tt.in, diff)
		}
		if again, err := ParsePort(got.String()); err != nil || again != got {
			t.Errorf("ParsePort(%q.String() = %q) = %v, %v", tt.in, got.String(), again, err)
		}
	}
}

func TestDeriveName(t *testing.T) {
	tests := []struct{ agent, ws, want string }{
		{"claude", "/home/u/api", "claude-api"},
		{"codex", "/home/u/My Project!", "codex-My-Project"},
		{"claude", "/home/u/über", "claude-ber"},
		{"claude", "/", "claude-sandbox"},
		{"claude", "/x/" + string(make([]byte, 0)) + "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "claude-aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"},
	}
	for _, tt := range tests {
		got := DeriveName(tt.agent, tt.ws)
		if got != tt.want {
			t.Errorf("DeriveName(%q, %q) = %q, want %q", tt.agent, tt.ws, got, tt.want)
		}
		if err := CheckName(got); err != nil {
			t.Errorf("DeriveName(%q, %q) = %q, invalid: %v", tt.agent, tt.ws, got, err)
		}
	}
}
