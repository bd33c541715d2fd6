package untrusted

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf16"
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

// Visible is s with every character a terminal could act on written as a
// Go escape (\x1b, \r, \u202e): control and format characters
// (escape sequences, carriage returns, backspaces, bidirectional
// overrides), line and paragraph separators, and bytes that are not
// UTF-8. Line feeds and tabs stay, and so does everything printable,
// backslashes and quotes included: it is for free text (what the agent
// printed, a log of it), which quoting line by line as Text does would
// bury in escaped quotes. Text made visible can still read like anything
// printable, so a caller that shows it among its own lines marks where
// it begins. Visible(Visible(s)) is Visible(s).
func Visible(s string) string {
	if utf8.ValidString(s) && strings.IndexFunc(s, hidden) < 0 {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case hidden(r):
			q := strconv.QuoteRuneToASCII(r)
			b.WriteString(q[1 : len(q)-1])
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

// Line is s made Visible on one line: line feeds too are written as \n,
// so that text a hostile process chose (an error quoting its file names,
// a run's detail) printed inside one of sbx's lines cannot start a line
// of its own that passes for sbx's.
func Line(s string) string {
	return strings.ReplaceAll(Visible(s), "\n", `\n`)
}

// hidden reports whether Visible escapes r.
func hidden(r rune) bool {
	return r != '\n' && r != '\t' && !unicode.IsGraphic(r)
}

// VisibleWriter writes what is written to it to W made Visible. A
// character split across two writes is held until its end arrives (Flush
// writes what is held at the end, escaped).
type VisibleWriter struct {
	W       io.Writer
	pending []byte
}

// Write writes p to W made Visible; it reports len(p) unless W fails.
func (v *VisibleWriter) Write(p []byte) (int, error) {
	b := append(v.pending, p...)
	cut := len(b)
	// An incomplete character at the end waits for the next write.
	for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax+1; i-- {
		if utf8.RuneStart(b[i]) {
			if !utf8.FullRune(b[i:]) {
				cut = i
			}
			break
		}
	}
	v.pending = append([]byte(nil), b[cut:]...)
	if _, err := io.WriteString(v.W, Visible(string(b[:cut]))); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Flush writes what Write held back.
func (v *VisibleWriter) Flush() error {
	if len(v.pending) == 0 {
		return nil
	}
	s := Visible(string(v.pending))
	v.pending = nil
	_, err := io.WriteString(v.W, s)
	return err
}

// JSONWriter writes JSON to W with every character a terminal could act
// on that encoding/json leaves as it is (DEL, C1 controls such as U+009B,
// bidirectional overrides and other format characters, invalid UTF-8
// already being U+FFFD) written as a \u escape: the same JSON to any
// decoder, nothing for a terminal it is printed on to act on. JSON's own
// syntax is ASCII, so such a character can only be inside a string,
// where the escape means it. Each Write must be whole JSON values, as
// json.Encoder writes them.
type JSONWriter struct{ W io.Writer }

func (j JSONWriter) Write(p []byte) (int, error) {
	s := string(p)
	if strings.IndexFunc(s, hidden) < 0 {
		return j.W.Write(p)
	}
	var b strings.Builder
	for _, r := range s {
		switch {
		case !hidden(r):
			b.WriteRune(r)
		case r > 0xffff:
			r1, r2 := utf16.EncodeRune(r)
			fmt.Fprintf(&b, `\u%04x\u%04x`, r1, r2)
		default:
			fmt.Fprintf(&b, `\u%04x`, r)
		}
	}
	if _, err := io.WriteString(j.W, b.String()); err != nil {
		return 0, err
	}
	return len(p), nil
}
