// Package redact removes secret values from what sbx writes (traces, loop
// logs, the terminal), including the forms a secret commonly takes when a
// program re-encodes it: base64 in both alphabets at any alignment inside a
// longer encoding (an HTTP basic-auth header, a JWT), hexadecimal, percent
// encoding and JSON string escapes.
package redact

import (
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"net/url"
	"sort"
	"strings"
	"sync"
)

// Mask replaces every form of a secret.
const Mask = "[redacted]"

// minEncoded is the shortest encoded form replaced: shorter fragments (of a
// short secret, or base64 cores cut at an alignment) would match ordinary
// text.
const minEncoded = 6

// Set is a set of secrets. The zero value is empty and ready to use; it is
// safe for concurrent use.
type Set struct {
	mu    sync.RWMutex
	forms []string // longest first, so a longer form is replaced whole
}

// Add registers secret values; empty values are ignored.
func (s *Set) Add(values ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	seen := map[string]bool{}
	for _, f := range s.forms {
		seen[f] = true
	}
	for _, v := range values {
		for _, f := range Forms(v) {
			if !seen[f] {
				seen[f] = true
				s.forms = append(s.forms, f)
			}
		}
	}
	sort.SliceStable(s.forms, func(i, j int) bool { return len(s.forms[i]) > len(s.forms[j]) })
}

// Empty reports whether the set holds no secret.
func (s *Set) Empty() bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.forms) == 0
}

// Longest is the length of the longest form: a writer that redacts a stream
// in pieces must hold back that many bytes less one.
func (s *Set) Longest() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if len(s.forms) == 0 {
		return 0
	}
	return len(s.forms[0])
}

// String returns in with every form of every secret replaced by Mask.
func (s *Set) String(in string) string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	for _, f := range s.forms {
		if strings.Contains(in, f) {
			in = strings.ReplaceAll(in, f, Mask)
		}
	}
	return in
}

// Forms returns the value and the encodings of it that are long enough to
// replace safely.
func Forms(v string) []string {
	if v == "" {
		return nil
	}
	forms := []string{v}
	add := func(f string) {
		if len(f) >= minEncoded && f != v {
			forms = append(forms, f)
		}
	}
	b := []byte(v)
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding} {
		// At alignment k the value starts k bytes into a 3-byte group;
		// the characters that depend on other bytes are cut off.
		for k := 0; k < 3; k++ {
			buf := append(make([]byte, k), b...)
			e := enc.WithPadding(base64.NoPadding).EncodeToString(buf)
			start := (k*8 + 5) / 6
			end := (k + len(b)) * 8 / 6
			if end > start {
				add(e[start:end])
			}
		}
	}
	add(hex.EncodeToString(b))
	add(strings.ToUpper(hex.EncodeToString(b)))
	add(url.QueryEscape(v))
	add(url.PathEscape(v))
	for _, js := range jsonStrings(v) {
		add(js)
		add(strings.ReplaceAll(js, "/", `\/`))
	}
	return forms
}

// jsonStrings is v as the inside of a JSON string, as Go writes it (<, >
// and & as \u escapes) and as encoders that leave HTML alone write it.
func jsonStrings(v string) []string {
	var out []string
	for _, escapeHTML := range []bool{true, false} {
		var b strings.Builder
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(escapeHTML)
		if enc.Encode(v) != nil {
			continue
		}
		if s := strings.TrimSpace(b.String()); len(s) > 2 {
			out = append(out, s[1:len(s)-1])
		}
	}
	return out
}
