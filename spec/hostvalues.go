package spec

import (
	"regexp"
	"sort"
	"strconv"
	"strings"
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
	vals = append([]HostValue(nil), vals...)
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
	vals = append([]HostValue(nil), vals...)
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

// addHostValue records a value taken from the host, once.
func addHostValue(vals []HostValue, h HostValue) []HostValue {
	for _, v := range vals {
		if v == h {
			return vals
		}
	}
	return append(vals, h)
}
