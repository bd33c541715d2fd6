package untrusted

import (
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Text is s as it may be shown on a terminal when a hostile process chose
// it (a host name the agent asked the proxy for, a line it printed): s
// itself when it is valid UTF-8, every character is graphic (letters,
// marks, numbers, punctuation, symbols and spaces) and none is a
// backslash or a double quote; else s quoted as Go quotes a string
// (strconv.QuoteToGraphic, as %q does elsewhere in sbx), so that no
// control or format character — terminal escape sequences, bidirectional
// overrides — reaches the terminal, and a quoted name cannot pass for a
// plain one.
func Text(s string) string {
	plain := s != "" && utf8.ValidString(s) &&
		strings.IndexFunc(s, func(r rune) bool { return !unicode.IsGraphic(r) || r == '\\' || r == '"' }) < 0
	if plain {
		return s
	}
	return strconv.QuoteToGraphic(s)
}
