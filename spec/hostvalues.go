package spec

import (
	"regexp"
	"sort"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// HostValue is a value a declaration took from the host environment: the
// variable and what it held. sbx never prints it (THREATS.md #6): a
// declaration the agent wrote can put ${AWS_SECRET_ACCESS_KEY} in any field,
// and validate or plan would otherwise quote it in a message that CI posts
// to a job log.
type HostValue struct {
	Var   string
	Value string
}

// Placeholder is what messages show in place of the value.
func (h HostValue) Placeholder() string { return "(from $" + h.Var + ")" }

// shortValue is the length below which a host value is replaced only where
// it stands alone (quoted, or between non-alphanumerics): a one- or
// two-character value ("1", "3g") would otherwise be found inside every
// number and word of a message.
const shortValue = 3

// Redact replaces every host value in s, in any letter
// case (a host name is lower-cased before it is reported, which defeats a
// CI log's masking of the original), by "(from $VAR)". Longer values go
// first, so a value containing another is replaced whole.
func Redact(s string, vals []HostValue) string {
	if len(vals) == 0 {
		return s
	}
	vals = allForms(vals)
	sort.SliceStable(vals, func(i, j int) bool { return len(vals[i].Value) > len(vals[j].Value) })
	for _, h := range vals {
		if h.Value == "" {
			continue
		}
		pat := "(?i)" + regexp.QuoteMeta(h.Value)
		if len(h.Value) < shortValue {
			pat = `(?i)(^|[^\pL\pN])` + regexp.QuoteMeta(h.Value) + `($|[^\pL\pN])`
			s = regexp.MustCompile(pat).ReplaceAllString(s, "${1}"+strings.ReplaceAll(h.Placeholder(), "$", "$$")+"${2}")
			continue
		}
		s = regexp.MustCompile(pat).ReplaceAllLiteralString(s, h.Placeholder())
	}
	return s
}

// RedactQuoted is Redact for the text between a JSON document's strings
// (numbers, true, false, null): the value becomes the JSON string
// "(from $VAR)", so that the document stays valid.
func RedactQuoted(s string, vals []HostValue) string {
	vals = allForms(vals)
	sort.SliceStable(vals, func(i, j int) bool { return len(vals[i].Value) > len(vals[j].Value) })
	for _, h := range vals {
		if h.Value == "" {
			continue
		}
		re := regexp.MustCompile(`(?i)(^|[^\pL\pN.+-])` + regexp.QuoteMeta(h.Value) + `($|[^\pL\pN.+-])`)
		s = re.ReplaceAllString(s, "${1}"+strings.ReplaceAll(strconv.Quote(h.Placeholder()), "$", "$$")+"${2}")
	}
	return s
}

// minPart is the length from which a part of a host value (forms) is
// redacted on its own: shorter ones ("com", "tmp") are ordinary words.
const minPart = 4

// forms are the texts a host value can appear as in a message: as set;
// trimmed of spaces and of a host's trailing dot, as sbx normalizes it
// before it reports it; and each part between separators (a DNS label, a
// path element, a port's field), which a check quotes on its own ("label
// \"hunter2\" is not valid"), when it is long enough to be told from an
// ordinary word. Redacting too much hides a word; too little prints the
// secret.
func forms(h HostValue) []HostValue {
	seen := map[string]bool{}
	var out []HostValue
	add := func(s string) {
		if k := strings.ToLower(s); s != "" && !seen[k] {
			seen[k] = true
			out = append(out, HostValue{Var: h.Var, Value: s})
		}
	}
	add(h.Value)
	t := strings.TrimSpace(h.Value)
	add(t)
	add(strings.TrimSpace(strings.TrimSuffix(t, ".")))
	parts := strings.FieldsFunc(h.Value, func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r) && r != '-' && r != '_'
	})
	for _, p := range parts {
		if utf8.RuneCountInString(p) >= minPart {
			add(p)
		}
	}
	return out
}

// allForms is every form of every value.
func allForms(vals []HostValue) []HostValue {
	var out []HostValue
	for _, h := range vals {
		out = append(out, forms(h)...)
	}
	return out
}

// addHostValue records a value taken from the host, once.
func addHostValue(vals []HostValue, h HostValue) []HostValue {
	for _, v := range vals {
		if v == h {
			return vals
		}
	}
	return append(vals, h)
}
