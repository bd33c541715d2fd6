package mockmodel

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"
	"unicode/utf8"
)

// event is one server-sent event: its name and the value its data line
// carries as JSON.
type event struct {
	Name string
	Data any
}

// marshal encodes v as one line of JSON without HTML escaping, so a
// promise tag reads as <promise> on the wire. encoding/json escapes every
// control character in strings, so the line never holds a raw newline.
func marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// writeEvent writes e in the text/event-stream framing both APIs use
// ("event: NAME", "data: JSON", blank line; WHATWG HTML, server-sent
// events). The data is a single line, so no value in it can end the event
// or start another.
func writeEvent(w io.Writer, e event) error {
	data, err := marshal(e.Data)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "event: %s\ndata: %s\n\n", e.Name, data)
	return err
}

// stream answers with events as text/event-stream, flushing each and
// waiting delay between them so the client sees a real stream; it stops
// when the client goes away.
func stream(ctx context.Context, w http.ResponseWriter, events []event, delay time.Duration) error {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	for i, e := range events {
		if i > 0 && delay > 0 {
			if err := sleep(ctx, delay); err != nil {
				return err
			}
		}
		if err := writeEvent(w, e); err != nil {
			return err
		}
		if err := rc.Flush(); err != nil {
			return err
		}
	}
	return nil
}

// sleep waits d or until ctx is done.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// chunkSize is how many bytes of text or tool input one delta carries at
// most, so even a short answer streams in several events.
const chunkSize = 24

// chunks splits s into pieces of at most chunkSize bytes, never inside a
// UTF-8 sequence; an empty s has no pieces.
func chunks(s string) []string {
	var out []string
	for len(s) > chunkSize {
		n := chunkSize
		for n > 0 && !utf8.RuneStart(s[n]) {
			n--
		}
		if n == 0 {
			n = chunkSize
		}
		out = append(out, s[:n])
		s = s[n:]
	}
	if s != "" {
		out = append(out, s)
	}
	return out
}

// tokens is a rough token count (four bytes a token) for the usage both
// APIs report; clients only display it.
func tokens(n int) int {
	return n/4 + 1
}
