package mockmodel

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
)

func TestWriteEvent(t *testing.T) {
	tests := []struct {
		name string
		e    event
		want string
	}{
		{"plain", event{"ping", map[string]string{"type": "ping"}}, "event: ping\ndata: {\"type\":\"ping\"}\n\n"},
		{"newlines stay escaped", event{"x", map[string]string{"t": "a\nb\r\n\ndata: forged"}}, "event: x\ndata: {\"t\":\"a\\nb\\r\\n\\ndata: forged\"}\n\n"},
		{"promise tag unescaped", event{"x", map[string]string{"t": "<promise>COMPLETE</promise>"}}, "event: x\ndata: {\"t\":\"<promise>COMPLETE</promise>\"}\n\n"},
		{"line separators escaped", event{"x", map[string]string{"t": "a\u2028b"}}, "event: x\ndata: {\"t\":\"a\\u2028b\"}\n\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := writeEvent(&b, tt.e); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, b.String()); diff != "" {
				t.Errorf("writeEvent (-want +got):\n%s", diff)
			}
		})
	}
}

func TestChunks(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []string
	}{
		{"empty", "", nil},
		{"short", "hello", []string{"hello"}},
		{"exact", strings.Repeat("a", chunkSize), []string{strings.Repeat("a", chunkSize)}},
		{"long", strings.Repeat("a", chunkSize+3), []string{strings.Repeat("a", chunkSize), "aaa"}},
		{"never splits a rune", strings.Repeat("a", chunkSize-1) + "é" + "b", []string{strings.Repeat("a", chunkSize-1), "éb"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := chunks(tt.in)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("chunks (-want +got):\n%s", diff)
			}
			for _, c := range got {
				if !utf8.ValidString(c) || len(c) > chunkSize {
					t.Errorf("chunk %q is not valid UTF-8 of at most %d bytes", c, chunkSize)
				}
			}
		})
	}
}

// sseEvent is one event read back from a stream.
type sseEvent struct {
	Name string
	Data map[string]any
}

// readSSE parses a text/event-stream body strictly as the server frames
// it: every event is exactly an event line and a data line holding a JSON
// object, then a blank line.
func readSSE(t *testing.T, body []byte) []sseEvent {
	t.Helper()
	var out []sseEvent
	for i, block := range strings.Split(strings.TrimSuffix(string(body), "\n\n"), "\n\n") {
		lines := strings.Split(block, "\n")
		if len(lines) != 2 || !strings.HasPrefix(lines[0], "event: ") || !strings.HasPrefix(lines[1], "data: ") {
			t.Fatalf("event %d is not framed as one event and one data line: %q", i, block)
		}
		e := sseEvent{Name: strings.TrimPrefix(lines[0], "event: ")}
		if err := json.Unmarshal([]byte(strings.TrimPrefix(lines[1], "data: ")), &e.Data); err != nil {
			t.Fatalf("event %d data: %v", i, err)
		}
		if e.Data["type"] != e.Name {
			t.Errorf("event %d: name %q but type %v", i, e.Name, e.Data["type"])
		}
		out = append(out, e)
	}
	return out
}

func TestStreamDelay(t *testing.T) {
	const delay = 10 * time.Millisecond
	events := []event{{"a", map[string]string{"type": "a"}}, {"b", map[string]string{"type": "b"}}, {"c", map[string]string{"type": "c"}}}
	rec := httptest.NewRecorder()
	start := time.Now()
	if err := stream(context.Background(), rec, events, delay); err != nil {
		t.Fatal(err)
	}
	// Timers never fire early: two pauses take at least twice the delay.
	if elapsed := time.Since(start); elapsed < 2*delay {
		t.Errorf("three events streamed in %v, want at least %v between them", elapsed, delay)
	}
	if got := rec.Header().Get("Content-Type"); got != "text/event-stream" {
		t.Errorf("Content-Type %q", got)
	}
	if diff := cmp.Diff([]string{"a", "b", "c"}, names(readSSE(t, rec.Body.Bytes()))); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

func names(ev []sseEvent) []string {
	var out []string
	for _, e := range ev {
		out = append(out, e.Name)
	}
	return out
}

// TestStreamFlushesEachEvent reads a real stream event by event: each
// arrives while the server still waits to send the next.
func TestStreamFlushesEachEvent(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := stream(r.Context(), w, []event{{"a", map[string]string{"type": "a"}}}, 0); err != nil {
			t.Error(err)
		}
		<-release
	}))
	defer srv.Close()
	defer close(release)
	// The timeout only turns a hang (an unflushed event) into a failure.
	client := &http.Client{Timeout: 10 * time.Second}
	resp, err := client.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	if err != nil || line != "event: a\n" {
		t.Fatalf("first line %q, %v: the event was not flushed before the handler returned", line, err)
	}
}

// TestStreamStopsWhenClientLeaves: a client that goes away mid-stream ends
// the handler's work instead of leaving it to sleep through every event.
func TestStreamStopsWhenClientLeaves(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	events := []event{{"a", map[string]string{"type": "a"}}, {"b", map[string]string{"type": "b"}}}
	w := &cancelAfterWrite{ResponseRecorder: httptest.NewRecorder(), cancel: cancel}
	done := make(chan error, 1)
	go func() { done <- stream(ctx, w, events, time.Hour) }()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("stream = %v, want context.Canceled", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("stream still waits to send to a client that left")
	}
}

// cancelAfterWrite cancels the request as soon as the first event is out.
type cancelAfterWrite struct {
	*httptest.ResponseRecorder
	cancel context.CancelFunc
}

func (c *cancelAfterWrite) Write(p []byte) (int, error) {
	defer c.cancel()
	return c.ResponseRecorder.Write(p)
}

func (c *cancelAfterWrite) Flush() { c.ResponseRecorder.Flush() }

func TestAPIKey(t *testing.T) {
	tests := []struct {
		name   string
		header http.Header
		want   string
	}{
		{"x-api-key", http.Header{"X-Api-Key": {"sk-ant-1"}}, "sk-ant-1"},
		{"bearer", http.Header{"Authorization": {"Bearer sk-2"}}, "sk-2"},
		{"bearer any case", http.Header{"Authorization": {"bearer sk-3"}}, "sk-3"},
		{"x-api-key first", http.Header{"X-Api-Key": {"a"}, "Authorization": {"Bearer b"}}, "a"},
		{"basic is not a key", http.Header{"Authorization": {"Basic Zm9v"}}, ""},
		{"none", http.Header{}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := apiKey(tt.header); got != tt.want {
				t.Errorf("apiKey = %q, want %q", got, tt.want)
			}
		})
	}
}

// fmtEvents renders events compactly for failure messages.
func fmtEvents(ev []sseEvent) string {
	var b strings.Builder
	for _, e := range ev {
		fmt.Fprintf(&b, "%s %v\n", e.Name, e.Data)
	}
	return b.String()
}
