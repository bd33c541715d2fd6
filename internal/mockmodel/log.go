package mockmodel

import (
	"io"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Agent kinds an Entry names, from the API the request used.
const (
	AgentClaude = "claude" // Anthropic Messages API
	AgentCodex  = "codex"  // OpenAI Responses API
)

// Entry is one line of the request log.
type Entry struct {
	Time   time.Time `json:"time"`
	Method string    `json:"method"`
	Path   string    `json:"path"`
	// Key is the API key as received: the x-api-key header, else the token
	// of an "Authorization: Bearer" header.
	Key       string `json:"key,omitempty"`
	Model     string `json:"model,omitempty"`
	Agent     string `json:"agent,omitempty"`
	Iteration int    `json:"iteration,omitempty"`
	Turn      int    `json:"turn,omitempty"`
	// Action is the scripted step answered (see Action); empty for requests
	// that are not model calls.
	Action Action `json:"action,omitempty"`
	// Tool names the tool the answer called (for Codex's code mode, the
	// nested tool the exec script calls); empty when it called none.
	Tool    string `json:"tool,omitempty"`
	Promise bool   `json:"promise,omitempty"`
	Status  int    `json:"status"`
	// Error says why a request was refused or its answer cut short.
	Error string `json:"error,omitempty"`
}

// requestLog writes entries as JSON lines, one Write each, serialised.
type requestLog struct {
	mu sync.Mutex
	w  io.Writer
}

// write logs e as one line; a nil writer discards it.
func (l *requestLog) write(e Entry) {
	if l.w == nil {
		return
	}
	line, err := marshal(e)
	if err != nil {
		return
	}
	line = append(line, '\n')
	l.mu.Lock()
	defer l.mu.Unlock()
	_, _ = l.w.Write(line)
}

// apiKey is the key a request carries: x-api-key (Anthropic), else the
// bearer token (OpenAI).
func apiKey(h http.Header) string {
	if k := h.Get("X-Api-Key"); k != "" {
		return k
	}
	auth := h.Get("Authorization")
	if len(auth) > len("bearer ") && strings.EqualFold(auth[:len("bearer ")], "bearer ") {
		return auth[len("bearer "):]
	}
	return ""
}
