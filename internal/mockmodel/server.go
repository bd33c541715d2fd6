package mockmodel

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"
)

// Config configures a Server; the zero value is usable.
type Config struct {
	// Script is the scripted model; PromiseAt 0 means 2 and an empty
	// Promise means "COMPLETE".
	Script Script
	// Delay is the pause between streamed events.
	Delay time.Duration
	// Log receives one JSON line per request; nil discards them.
	Log io.Writer
	// MaxBody bounds a request body in bytes; 0 means DefaultMaxBody.
	MaxBody int64
	// MaxInFlight bounds the requests served at once; more wait their turn.
	// 0 means DefaultMaxInFlight.
	MaxInFlight int
	// BodyTimeout bounds how long a request body may take to arrive, so a
	// client trickling one cannot hold a slot; 0 means a minute.
	BodyTimeout time.Duration
}

// DefaultMaxBody bounds a request body: far above what an agent sends
// (tens of kilobytes a turn in the scripted loop, a few megabytes for a
// conversation at the edge of a model's context).
const DefaultMaxBody = 8 << 20

// DefaultMaxInFlight bounds the requests served at once, so that bodies in
// memory stay under MaxBody times this however many connections a client
// opens.
const DefaultMaxInFlight = 16

// Server is the mock model APIs as an http.Handler.
type Server struct {
	script  Script
	delay   time.Duration
	maxBody int64
	bodyTTL time.Duration
	slots   chan struct{}
	log     requestLog
	mux     *http.ServeMux
}

// New returns a Server for c, with c's defaults filled in.
func New(c Config) *Server {
	if c.Script.PromiseAt == 0 {
		c.Script.PromiseAt = 2
	}
	if c.Script.Promise == "" {
		c.Script.Promise = "COMPLETE"
	}
	if c.MaxBody <= 0 {
		c.MaxBody = DefaultMaxBody
	}
	if c.MaxInFlight <= 0 {
		c.MaxInFlight = DefaultMaxInFlight
	}
	if c.BodyTimeout <= 0 {
		c.BodyTimeout = time.Minute
	}
	s := &Server{
		script: c.Script, delay: c.Delay, maxBody: c.MaxBody, bodyTTL: c.BodyTimeout,
		slots: make(chan struct{}, c.MaxInFlight), log: requestLog{w: c.Log},
	}
	s.mux = http.NewServeMux()
	// Claude Code checks it can reach the API with HEAD /api/hello before
	// its first message (observed with 2.1.332).
	s.mux.HandleFunc("/api/hello", s.hello)
	s.mux.HandleFunc("POST /v1/messages", s.messages)
	s.mux.HandleFunc("POST /v1/messages/count_tokens", s.countTokens)
	s.mux.HandleFunc("GET /v1/responses", s.responsesWebSocket)
	s.mux.HandleFunc("POST /v1/responses", s.responses)
	s.mux.HandleFunc("/", s.notFound)
	return s
}

// ServeHTTP routes a request to the API it belongs to, once one of the
// MaxInFlight slots is free; a client that leaves while it waits gets 503.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	select {
	case s.slots <- struct{}{}:
	case <-r.Context().Done():
		http.Error(w, "the mock is busy", http.StatusServiceUnavailable)
		return
	}
	defer func() { <-s.slots }()
	// The whole body must be in within BodyTimeout, or a client trickling
	// it holds the slot: readJSON lifts the deadline once it has read it
	// all; net/http's own read of an unread body, before it answers, stays
	// under it. Servers that cannot set deadlines (httptest's recorder) go
	// without.
	_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(s.bodyTTL))
	s.mux.ServeHTTP(w, r)
}

// entry starts the log line of r.
func entry(r *http.Request, agent string) Entry {
	return Entry{Time: time.Now().UTC(), Method: r.Method, Path: r.URL.Path, Key: apiKey(r.Header), Agent: agent}
}

// hello answers Claude Code's reachability check.
func (s *Server) hello(w http.ResponseWriter, r *http.Request) {
	e := entry(r, AgentClaude)
	e.Status = http.StatusOK
	s.log.write(e)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(e.Status)
	if r.Method != http.MethodHead {
		_, _ = io.WriteString(w, `{"message":"hello"}`)
	}
}

// notFound answers and logs what the mock does not serve, so a test sees
// an endpoint an agent needs and the mock lacks.
func (s *Server) notFound(w http.ResponseWriter, r *http.Request) {
	e := entry(r, "")
	e.Status = http.StatusNotFound
	e.Error = "no such endpoint in the mock"
	s.log.write(e)
	http.Error(w, e.Error, e.Status)
}

// errBody is a request body the server refuses, with the status it gets.
type errBody struct {
	status int
	msg    string
}

func (e *errBody) Error() string { return e.msg }

// readJSON decodes r's body into v, bounded by the server's MaxBody. A body
// over the bound is refused without being buffered, and so is an encoded
// one: agents send plain JSON to a base URL that is not OpenAI's own.
func (s *Server) readJSON(w http.ResponseWriter, r *http.Request, v any) error {
	if ce := r.Header.Get("Content-Encoding"); ce != "" && ce != "identity" {
		return &errBody{http.StatusUnsupportedMediaType, fmt.Sprintf("content-encoding %q is not supported", ce)}
	}
	body := http.MaxBytesReader(w, r.Body, s.maxBody)
	err := json.NewDecoder(body).Decode(v)
	if err == nil {
		// Whatever follows the value, under the same bounds.
		_, err = io.Copy(io.Discard, body)
	}
	if err == nil {
		_ = http.NewResponseController(w).SetReadDeadline(time.Time{})
	}
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		return &errBody{http.StatusRequestEntityTooLarge, fmt.Sprintf("request body over %d bytes", s.maxBody)}
	case errors.Is(err, os.ErrDeadlineExceeded):
		return &errBody{http.StatusRequestTimeout, fmt.Sprintf("request body not in within %v", s.bodyTTL)}
	case err != nil:
		return &errBody{http.StatusBadRequest, "request body is not the JSON expected: " + err.Error()}
	}
	return nil
}

// refuse answers a refused request with the API's error JSON and logs it.
func (s *Server) refuse(w http.ResponseWriter, e Entry, err error, body func(msg string) any) {
	e.Status = http.StatusBadRequest
	var eb *errBody
	if errors.As(err, &eb) {
		e.Status = eb.status
	}
	e.Error = err.Error()
	s.log.write(e)
	writeJSON(w, e.Status, body(e.Error))
}

// writeJSON answers with v as JSON.
func writeJSON(w http.ResponseWriter, status int, v any) {
	data, err := marshal(v)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(data)
}

// finish answers a scripted step, streamed or as one JSON value, and logs
// it.
func (s *Server) finish(w http.ResponseWriter, r *http.Request, e Entry, streamed bool, events []event, whole any) {
	e.Status = http.StatusOK
	if streamed {
		if err := stream(r.Context(), w, events, s.delay); err != nil {
			e.Error = "stream cut short: " + err.Error()
		}
	} else {
		writeJSON(w, e.Status, whole)
	}
	s.log.write(e)
}
