package egress

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
)

// Bounds on what a client (or an upstream) may make the proxy hold. A
// message head over them is refused while it is read: the proxy never
// holds more than one buffer of it beyond the bound. Apache httpd's
// defaults are of the same order (LimitRequestLine 8190,
// LimitRequestFields 100); nginx keeps an upstream's response head in
// one 4 or 8 KiB buffer (proxy_buffer_size).
const (
	maxRequestLine   = 8 << 10  // the request line: method, target, version
	maxHeaderBytes   = 64 << 10 // all header field lines, line ends included
	maxRequestFields = 100
	// An upstream's response head gets the same size bounds and more
	// fields (Set-Cookie repeats).
	maxResponseFields = 256
	// maxConns bounds the connections served at once; with the bounds
	// above it bounds the proxy's memory (see Options.MaxConns).
	maxConns = 1024
)

var (
	errStartLineTooLong = errors.New("start line too long")
	errHeaderTooBig     = errors.New("header fields too large")
	errTooManyFields    = errors.New("too many header fields")
)

// headLimits bound a message head.
type headLimits struct {
	line   int // the first line, without its line end
	size   int // the field lines, line ends included
	fields int // the number of field lines
}

func requestLimits() headLimits {
	return headLimits{line: maxRequestLine, size: maxHeaderBytes, fields: maxRequestFields}
}

func responseLimits() headLimits {
	return headLimits{line: maxRequestLine, size: maxHeaderBytes, fields: maxResponseFields}
}

// headReader passes a connection's bytes through, counting the head of
// the HTTP message at its start (RFC 9112 §2.1: a start line, field lines,
// an empty line; a line ends at LF) and failing the read that crosses a
// bound. Past the empty line it only passes bytes through: the body is
// not its business. net/http's ReadRequest has no bound of its own.
type headReader struct {
	r       io.Reader
	lim     headLimits
	started bool // the first line has ended
	done    bool // the empty line ending the head was seen
	line    int  // bytes of the current line so far, LF excluded
	last    byte // the last byte of the current line
	size    int
	fields  int
	err     error // the bound crossed, once crossed
}

func (h *headReader) Read(p []byte) (int, error) {
	if h.err != nil {
		return 0, h.err
	}
	n, err := h.r.Read(p)
	if !h.done && n > 0 {
		if h.err = h.scan(p[:n]); h.err != nil {
			return 0, h.err
		}
	}
	return n, err
}

func (h *headReader) scan(b []byte) error {
	for len(b) > 0 && !h.done {
		seg, rest, eol := b, []byte(nil), false
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			seg, rest, eol = b[:i], b[i+1:], true
		}
		h.line += len(seg)
		if len(seg) > 0 {
			h.last = seg[len(seg)-1]
		}
		if !h.started {
			if h.line > h.lim.line {
				return errStartLineTooLong
			}
		} else if h.size += len(seg); h.size > h.lim.size {
			return errHeaderTooBig
		}
		if !eol {
			return nil
		}
		switch {
		case !h.started:
			h.started = true
		case h.line == 0 || h.line == 1 && h.last == '\r':
			h.done = true
		default:
			if h.fields++; h.fields > h.lim.fields {
				return errTooManyFields
			}
			h.size++
		}
		h.line, h.last, b = 0, 0, rest
	}
	return nil
}

// headStatus is the answer to a request whose head crossed a bound: 414
// for the request line (RFC 9110 §15.5.15), 431 for the header fields
// (RFC 6585 §5); 0 when no bound was crossed.
func headStatus(err error) (int, string) {
	switch err {
	case errStartLineTooLong:
		return http.StatusRequestURITooLong, fmt.Sprintf("request line over %d bytes", maxRequestLine)
	case errHeaderTooBig:
		return http.StatusRequestHeaderFieldsTooLarge, fmt.Sprintf("request header fields over %d bytes", maxHeaderBytes)
	case errTooManyFields:
		return http.StatusRequestHeaderFieldsTooLarge, fmt.Sprintf("more than %d request header fields", maxRequestFields)
	}
	return 0, ""
}

// headBuffer is a pooled bufio.Reader over a headReader, so a request
// allocates neither.
type headBuffer struct {
	head headReader
	*bufio.Reader
}

func (p *Proxy) newReader(r io.Reader, lim headLimits) *headBuffer {
	hb, ok := p.readers.Get().(*headBuffer)
	if !ok {
		hb = &headBuffer{}
		hb.Reader = bufio.NewReader(&hb.head)
	}
	hb.head = headReader{r: r, lim: lim}
	hb.Reset(&hb.head)
	return hb
}

func (p *Proxy) putReader(hb *headBuffer) {
	hb.head = headReader{}
	hb.Reset(nil)
	p.readers.Put(hb)
}
