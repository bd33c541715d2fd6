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
	"fmt"
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
	forms []form // longest first, so a longer form is replaced whole
}

// form is one text a secret appears as. A base64 core (the characters
// that depend on the secret alone, at one alignment) has edges: the
// character before it that mixes the secret's first bits with the bytes
// before (lead: the characters it can be), the one after it that mixes
// the secret's last bits with the bytes after or with the zero bits of the
// end (trail), and the padding that may follow that. The edges are
// masked with the core: left, they give away bits of the secret.
type form struct {
	text        string
	lead, trail string
}

// span is the longest text the form can mask.
func (f form) span() int {
	n := len(f.text)
	if f.lead != "" {
		n++
	}
	if f.trail != "" {
		n += 3 // the character and two of padding
	}
	return n
}

// Add registers secret values; empty values are ignored.
func (s *Set) Add(values ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	seen := map[form]bool{}
	for _, f := range s.forms {
		seen[f] = true
	}
	for _, v := range values {
		for _, f := range forms(v) {
			if !seen[f] {
				seen[f] = true
				s.forms = append(s.forms, f)
			}
		}
	}
	sort.SliceStable(s.forms, func(i, j int) bool { return len(s.forms[i].text) > len(s.forms[j].text) })
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
	n := 0
	for _, f := range s.forms {
		n = max(n, f.span())
	}
	return n
}

// String returns in with every form of every secret replaced by Mask.
func (s *Set) String(in string) string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	for _, f := range s.forms {
		if strings.Contains(in, f.text) {
			in = f.replace(in)
		}
	}
	return in
}

// replace masks every occurrence of the form in in, with its edges.
func (f form) replace(in string) string {
	if f.lead == "" && f.trail == "" {
		return strings.ReplaceAll(in, f.text, Mask)
	}
	var b strings.Builder
	for {
		i := strings.Index(in, f.text)
		if i < 0 {
			b.WriteString(in)
			return b.String()
		}
		start, end := i, i+len(f.text)
		if start > 0 && f.lead != "" && strings.IndexByte(f.lead, in[start-1]) >= 0 {
			start--
		}
		if end < len(in) && f.trail != "" && strings.IndexByte(f.trail, in[end]) >= 0 {
			end++
			for pad := 0; pad < 2 && end < len(in) && in[end] == '='; pad++ {
				end++
			}
		}
		b.WriteString(in[:start])
		b.WriteString(Mask)
		in = in[end:]
	}
}

// Forms returns the value and the encodings of it that are long enough to
// replace safely (a base64 form without its edges).
func Forms(v string) []string {
	var out []string
	for _, f := range forms(v) {
		out = append(out, f.text)
	}
	return out
}

// forms are the value and its encodings, the base64 ones with their edges.
func forms(v string) []form {
	if v == "" {
		return nil
	}
	out := []form{{text: v}}
	seen := map[string]bool{v: true}
	add := func(f form) {
		if len(f.text) >= minEncoded && !seen[f.text] {
			seen[f.text] = true
			out = append(out, f)
		}
	}
	b := []byte(v)
	for _, alphabet := range []string{stdAlphabet, urlAlphabet} {
		for k := 0; k < 3; k++ {
			add(base64Form(alphabet, b, k))
		}
	}
	text := func(s string) { add(form{text: s}) }
	text(hex.EncodeToString(b))
	text(strings.ToUpper(hex.EncodeToString(b)))
	// Percent-encoding as Go's url package writes it (query: space as +;
	// path: some reserved characters left as they are), and as RFC 3986
	// and JavaScript's encodeURIComponent write it: every byte but the
	// unreserved ones (encodeURIComponent also leaves !'()*) as %XX, a
	// space as %20. Each also with lower-case hex digits, which RFC 3986
	// makes equivalent.
	query := url.QueryEscape(v)
	strict := strings.ReplaceAll(query, "+", "%20")
	component := strict
	for _, c := range "!'()*" {
		component = strings.ReplaceAll(component, fmt.Sprintf("%%%02X", c), string(c))
	}
	for _, p := range []string{query, url.PathEscape(v), strict, component} {
		text(p)
		text(lowerHex(p))
	}
	for _, js := range jsonStrings(v) {
		text(js)
		text(strings.ReplaceAll(js, "/", `\/`))
	}
	return out
}

// The base64 alphabets (RFC 4648 sections 4 and 5).
const (
	stdAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
	urlAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
)

// base64Form is the base64 of b when it starts k bytes into a 3-byte
// group: the characters that depend on b alone, and the characters its
// edges can be. The character before them holds 8k mod 6 bits of the
// bytes before b and b's first bits; the one after, b's last bits and the
// bits of the bytes after b (zero when b ends the data, padding follows).
func base64Form(alphabet string, b []byte, k int) form {
	e := base64.NewEncoding(alphabet).WithPadding(base64.NoPadding).EncodeToString(append(make([]byte, k), b...))
	startBit, endBit := 8*k, 8*(k+len(b))
	start, end := (startBit+5)/6, endBit/6
	if end <= start {
		return form{}
	}
	f := form{text: e[start:end]}
	if own := 6 - startBit%6; own < 6 {
		// e[start-1] has its low own bits from b: any character with
		// those bits.
		low := strings.IndexByte(alphabet, e[start-1]) & (1<<own - 1)
		for c := 0; c < 64; c++ {
			if c&(1<<own-1) == low {
				f.lead += string(alphabet[c])
			}
		}
	}
	if own := endBit % 6; own > 0 {
		// e[end] has its high own bits from b.
		high := strings.IndexByte(alphabet, e[end]) >> (6 - own)
		for c := 0; c < 64; c++ {
			if c>>(6-own) == high {
				f.trail += string(alphabet[c])
			}
		}
	}
	return f
}

// lowerHex is a percent-encoded text with its hex digits in lower case.
func lowerHex(s string) string {
	b := []byte(s)
	for i := 0; i+2 < len(b); i++ {
		if b[i] == '%' {
			b[i+1], b[i+2] = toLower(b[i+1]), toLower(b[i+2])
			i += 2
		}
	}
	return string(b)
}

func toLower(c byte) byte {
	if 'A' <= c && c <= 'F' {
		return c + 'a' - 'A'
	}
	return c
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
