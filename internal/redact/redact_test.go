package redact

import (
	"encoding/base64"
	"encoding/hex"
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
