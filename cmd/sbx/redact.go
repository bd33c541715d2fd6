package main

import (
	"encoding/json"
	"io"
	"strings"
	"sync"

	"github.com/sbxhq/sbx/spec"
)

// hostValues are the values this invocation's declarations read from the
// host environment. What sbx prints about a declaration (the sandbox's
// name, plan lines, backend commands, status, errors, JSON) goes through
// a redactor that shows each as "(from $VAR)": a declaration the agent
// wrote can put ${AWS_SECRET_ACCESS_KEY} in any field, and CI posts plan
// and validate output to the job log (THREATS.md #6).
type hostValues struct {
	mu   sync.Mutex
	vals []spec.HostValue
}

// add notes a value; the loader calls it from several goroutines.
func (h *hostValues) add(v spec.HostValue) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, o := range h.vals {
		if o == v {
			return
		}
	}
	h.vals = append(h.vals, v)
	// A value JSON escapes (a quote, a backslash, a control or non-ASCII
	// character) appears in --json output in its escaped form as well.
	if b, err := json.Marshal(v.Value); err == nil {
		if esc := strings.TrimSuffix(strings.TrimPrefix(string(b), `"`), `"`); esc != v.Value {
			h.vals = append(h.vals, spec.HostValue{Var: v.Var, Value: esc})
		}
	}
}

// redact is spec.Redact with the values noted so far. In a JSON document
// it keeps the document valid: a value outside a string (a port number)
// becomes the string "(from $VAR)".
func (h *hostValues) redact(s string) string {
	h.mu.Lock()
	vals := h.vals
	h.mu.Unlock()
	if len(vals) == 0 {
		return s
	}
	if !json.Valid([]byte(s)) {
		return spec.Redact(s, vals)
	}
	var b strings.Builder
	for _, seg := range jsonSegments(s) {
		if seg.str {
			b.WriteString(spec.Redact(seg.text, vals))
			continue
		}
		b.WriteString(spec.RedactQuoted(seg.text, vals))
	}
	return b.String()
}

// segment is a part of a JSON document: the inside of a string, or what
// lies between strings.
type segment struct {
	text string
	str  bool
}

// jsonSegments splits a valid JSON document into the contents of its
// strings (between the quotes, still escaped) and the rest.
func jsonSegments(s string) []segment {
	var out []segment
	start, in := 0, false
	for i := 0; i < len(s); i++ {
		switch {
		case in && s[i] == '\\':
			i++
		case s[i] == '"':
			if in {
				out = append(out, segment{text: s[start:i], str: true})
			} else {
				out = append(out, segment{text: s[start:i]})
			}
			out = append(out, segment{text: `"`})
			start, in = i+1, !in
		}
	}
	return append(out, segment{text: s[start:]})
}

// redactor is a stream that redacts host values from each write. Verbs
// print whole lines or documents per write, so a value is not split
// between two writes.
type redactor struct {
	w    io.Writer
	vals *hostValues
}

// Write writes p with host values replaced, and reports p as written in
// full when the redacted text was.
func (r *redactor) Write(p []byte) (int, error) {
	s := r.vals.redact(string(p))
	if _, err := io.WriteString(r.w, s); err != nil {
		return 0, err
	}
	return len(p), nil
}

// stream is the writer a redactor wraps, for isTerminal.
func stream(w any) any {
	if r, ok := w.(*redactor); ok {
		return r.w
	}
	return w
}
