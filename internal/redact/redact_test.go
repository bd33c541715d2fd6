package redact

import (
	"encoding/base64"
	"encoding/hex"
	mathrand "math/rand/v2"
	"net/url"
	"strings"
	"testing"
)

// TestEncodingsAreRedacted: a secret an agent or a tool re-encodes is still
// masked, wherever it sits in a longer encoding.
func TestEncodingsAreRedacted(t *testing.T) {
	const secret = "ghp_S3cr3t/Value+with=odd&chars"
	var s Set
	s.Add(secret)
	basic := base64.StdEncoding.EncodeToString([]byte("x-access-token:" + secret))
	for name, text := range map[string]string{
		"raw":                  "token=" + secret,
		"base64":               base64.StdEncoding.EncodeToString([]byte(secret)),
		"base64url":            base64.URLEncoding.EncodeToString([]byte(secret)),
		"base64 raw":           base64.RawStdEncoding.EncodeToString([]byte(secret)),
		"basic auth":           "Authorization: Basic " + basic,
		"offset 1":             base64.StdEncoding.EncodeToString([]byte("a" + secret + "b")),
		"offset 2":             base64.URLEncoding.EncodeToString([]byte("ab" + secret)),
		"hex":                  hex.EncodeToString([]byte(secret)),
		"HEX":                  strings.ToUpper(hex.EncodeToString([]byte(secret))),
		"query escaped":        "?t=" + url.QueryEscape(secret),
		"path escaped":         "/" + url.PathEscape(secret),
		"json escaped solidus": `{"t":"` + strings.ReplaceAll(secret, "/", `\/`) + `"}`,
		"go json":              `{"t":"` + strings.ReplaceAll(secret, "&", `\u0026`) + `"}`,
	} {
		got := s.String(text)
		for _, f := range []string{secret, "UzNjcjN0", "53336372"} {
			if strings.Contains(got, f) {
				t.Errorf("%s: %q still holds %q", name, got, f)
			}
		}
		if !strings.Contains(got, Mask) {
			t.Errorf("%s: nothing masked in %q", name, got)
		}
	}
}

func TestShortAndEmpty(t *testing.T) {
	var s Set
	s.Add("", "ab")
	if got := s.String("ab cd YWI="); got != Mask+" cd YWI=" {
		t.Errorf("got %q: a short secret is masked as written, its short encodings are not", got)
	}
	var e Set
	if !e.Empty() || e.String("x") != "x" {
		t.Error("the empty set changes text")
	}
}

// TestBase64Edges: a secret base64-encoded inside longer data, at every
// alignment, with and without padding, in both alphabets, is masked with
// every character that holds a bit of it: the partial characters at its
// edges and the padding after it, which the core alone leaves
// ("eE[redacted]Q==").
func TestBase64Edges(t *testing.T) {
	const secret = "s3cr3t-Value!"
	var s Set
	s.Add(secret)
	rnd := mathrand.New(mathrand.NewPCG(1, 2))
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding, base64.RawStdEncoding, base64.RawURLEncoding} {
		for pre := 0; pre < 6; pre++ {
			for post := 0; post < 5; post++ {
				for trial := 0; trial < 8; trial++ {
					data := make([]byte, pre+len(secret)+post)
					for i := range data {
						data[i] = byte(rnd.IntN(256))
					}
					copy(data[pre:], secret)
					e := enc.EncodeToString(data)
					// The characters holding a bit of the secret, and
					// the padding after them when it ends the data.
					first, last := 8*pre/6, (8*(pre+len(secret))+5)/6
					if post == 0 {
						last = len(e)
					}
					want := e[:first] + Mask + e[last:]
					if got := s.String(e); got != want {
						t.Errorf("prefix %d, suffix %d: %q\ngot  %q\nwant %q", pre, post, e, got, want)
					}
				}
			}
		}
	}
}

// TestPercentEncodings: the secret percent-encoded as Go's url package,
// RFC 3986 and JavaScript's encodeURIComponent write it, in either case of
// hex digits, is masked.
func TestPercentEncodings(t *testing.T) {
	const secret = "p@ss word/+=&!*()'~x"
	var s Set
	s.Add(secret)
	strict := strings.ReplaceAll(url.QueryEscape(secret), "+", "%20")
	for name, text := range map[string]string{
		"query":                url.QueryEscape(secret),
		"path":                 url.PathEscape(secret),
		"rfc 3986":             strict,
		"rfc 3986 lower":       strings.ToLower(strict),
		"encodeURIComponent":   "p%40ss%20word%2F%2B%3D%26!*()'~x",
		"encodeURIComponent l": "p%40ss%20word%2f%2b%3d%26!*()'~x",
	} {
		got := s.String("?t=" + text + "&u=1")
		if got != "?t="+Mask+"&u=1" {
			t.Errorf("%s: %q became %q", name, text, got)
		}
	}
}
