package mockmodel

import (
	"encoding/json"
	"fmt"
	"net/http"
	"path"
	"regexp"
	"strings"
)

// The Anthropic Messages API as Anthropic documents it
// (https://docs.anthropic.com/en/api/messages and, for the stream,
// https://docs.anthropic.com/en/docs/build-with-claude/streaming), read by
// Claude Code 2.1.332 (observed: POST /v1/messages?beta=true, stream true,
// x-api-key, tools Bash and Write among others).

// messagesRequest is the part of a Messages API request the script reads.
type messagesRequest struct {
	Model    string             `json:"model"`
	Stream   bool               `json:"stream"`
	System   json.RawMessage    `json:"system"`
	Messages []anthropicMessage `json:"messages"`
	Tools    []struct {
		Name string `json:"name"`
	} `json:"tools"`
}

// anthropicMessage is one turn; content is a string or a list of blocks.
type anthropicMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// anthropicBlock is the part of a content block the script reads.
type anthropicBlock struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// anthropicBlocks reads content that is a string (one text block) or a
// list of blocks; anything else has no blocks.
func anthropicBlocks(raw json.RawMessage) []anthropicBlock {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return []anthropicBlock{{Type: "text", Text: s}}
	}
	var blocks []anthropicBlock
	if json.Unmarshal(raw, &blocks) != nil {
		return nil
	}
	return blocks
}

// workingDir is the line Claude Code states its working directory in, in
// the system prompt or a system message ("Primary working directory: /w",
// observed with 2.1.332; older versions say "Working directory: /w").
var workingDir = regexp.MustCompile(`(?m)^[ \t]*-?[ \t]*(?:Primary working directory|Working directory):[ \t]*(/[^\r\n]*?)[ \t]*\r?$`)

// loop finds where the conversation stands: the last user text holding
// the loop header, and the tool results after it.
func (q *messagesRequest) loop() Loop {
	var l Loop
	prompt := -1
	for i, m := range q.Messages {
		if m.Role != "user" {
			continue
		}
		for _, b := range anthropicBlocks(m.Content) {
			if b.Type != "text" {
				continue
			}
			if it, of, ok := parseHeader(b.Text); ok {
				prompt, l.Iteration, l.Of = i, it, of
			}
		}
	}
	if prompt < 0 {
		return Loop{}
	}
	for _, m := range q.Messages[prompt+1:] {
		if m.Role != "user" {
			continue
		}
		for _, b := range anthropicBlocks(m.Content) {
			if b.Type == "tool_result" {
				l.Turn++
			}
		}
	}
	return l
}

// cwd is the working directory Claude Code states, from the system prompt
// first, then from text in the messages; "" when none is absolute.
func (q *messagesRequest) cwd() string {
	texts := []string{}
	for _, b := range anthropicBlocks(q.System) {
		texts = append(texts, b.Text)
	}
	for _, m := range q.Messages {
		if m.Role == "assistant" {
			continue
		}
		for _, b := range anthropicBlocks(m.Content) {
			if b.Type == "text" {
				texts = append(texts, b.Text)
			}
		}
	}
	for _, t := range texts {
		if m := workingDir.FindStringSubmatch(t); m != nil && !strings.ContainsRune(m[1], 0) {
			return path.Clean(m[1])
		}
	}
	return ""
}

// hasTools reports whether the request offers every tool named.
func (q *messagesRequest) hasTools(names ...string) bool {
	offered := map[string]bool{}
	for _, t := range q.Tools {
		offered[t.Name] = true
	}
	for _, n := range names {
		if !offered[n] {
			return false
		}
	}
	return true
}

// anthropicOut is one content block of the answer: text, or a tool_use
// with its input as JSON.
type anthropicOut struct {
	Type  string          `json:"type"`
	Text  string          `json:"text,omitempty"`
	ID    string          `json:"id,omitempty"`
	Name  string          `json:"name,omitempty"`
	Input json.RawMessage `json:"input,omitempty"`
}

// claudeAnswer is the scripted step as Claude Code's tools: Write with an
// absolute path under the working directory, Bash, or text.
func claudeAnswer(st Step, cwd string) (anthropicOut, error) {
	var name string
	var input any
	switch st.Action {
	case WriteFile:
		if cwd == "" {
			return anthropicOut{}, fmt.Errorf("no absolute working directory in the request")
		}
		name = "Write"
		input = map[string]string{"file_path": path.Join(cwd, st.Path), "content": st.Content}
	case Shell:
		name = "Bash"
		input = map[string]string{"command": st.Command, "description": "Append the iteration to the mock's shell log"}
	default:
		return anthropicOut{Type: "text", Text: st.Text}, nil
	}
	raw, err := marshal(input)
	if err != nil {
		return anthropicOut{}, err
	}
	id := fmt.Sprintf("toolu_sbxmock_%d_%d", st.Iteration, st.Turn)
	return anthropicOut{Type: "tool_use", ID: id, Name: name, Input: raw}, nil
}

// anthropicStop is the stop reason and output token count of a message
// whose one content block is b.
func anthropicStop(b anthropicOut) (reason string, out int) {
	if b.Type == "tool_use" {
		return "tool_use", tokens(len(b.Input))
	}
	return "end_turn", tokens(len(b.Text))
}

// anthropicUsage is the usage block of a message.
func anthropicUsage(in, out int) map[string]int {
	return map[string]int{"input_tokens": in, "output_tokens": out, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
}

// anthropicMessageValue is the whole message, as a non-streamed answer and
// (with no content) as message_start's message.
func anthropicMessageValue(id, model string, content []anthropicOut, stop any, usage map[string]int) map[string]any {
	return map[string]any{
		"id": id, "type": "message", "role": "assistant", "model": model,
		"content": content, "stop_reason": stop, "stop_sequence": nil, "usage": usage,
	}
}

// anthropicEvents is the documented event flow of one streamed message with
// one content block: message_start, ping, content_block_start, deltas,
// content_block_stop, message_delta with the stop reason, message_stop.
func anthropicEvents(id, model string, block anthropicOut, inTokens int) []event {
	stop, out := anthropicStop(block)
	ev := []event{
		{"message_start", map[string]any{"type": "message_start",
			"message": anthropicMessageValue(id, model, []anthropicOut{}, nil, anthropicUsage(inTokens, 1))}},
		{"ping", map[string]string{"type": "ping"}},
		{"content_block_start", map[string]any{"type": "content_block_start", "index": 0, "content_block": anthropicStart(block)}},
	}
	for _, d := range anthropicDeltas(block) {
		ev = append(ev, event{"content_block_delta", map[string]any{"type": "content_block_delta", "index": 0, "delta": d}})
	}
	return append(ev,
		event{"content_block_stop", map[string]any{"type": "content_block_stop", "index": 0}},
		event{"message_delta", map[string]any{"type": "message_delta",
			"delta": map[string]any{"stop_reason": stop, "stop_sequence": nil}, "usage": map[string]int{"output_tokens": out}}},
		event{"message_stop", map[string]string{"type": "message_stop"}},
	)
}

// anthropicStart is a content block as content_block_start shows it: a
// text block with empty text, a tool_use with an empty input.
func anthropicStart(b anthropicOut) map[string]any {
	if b.Type == "tool_use" {
		return map[string]any{"type": "tool_use", "id": b.ID, "name": b.Name, "input": map[string]any{}}
	}
	return map[string]any{"type": "text", "text": ""}
}

// anthropicDeltas is a content block's content in pieces: text_delta for
// text, input_json_delta (pieces of the input's JSON) for a tool_use.
func anthropicDeltas(b anthropicOut) []map[string]string {
	var out []map[string]string
	if b.Type == "tool_use" {
		for _, c := range chunks(string(b.Input)) {
			out = append(out, map[string]string{"type": "input_json_delta", "partial_json": c})
		}
		return out
	}
	for _, c := range chunks(b.Text) {
		out = append(out, map[string]string{"type": "text_delta", "text": c})
	}
	return out
}

// anthropicError is the Messages API's error body.
func anthropicError(msg string) any {
	return map[string]any{"type": "error", "error": map[string]string{"type": "invalid_request_error", "message": msg}}
}

// messages answers POST /v1/messages.
func (s *Server) messages(w http.ResponseWriter, r *http.Request) {
	e := entry(r, AgentClaude)
	var q messagesRequest
	if err := s.readJSON(w, r, &q); err != nil {
		s.refuse(w, e, err, anthropicError)
		return
	}
	st, block, err := s.claudeStep(&q)
	e.Model, e.Iteration, e.Turn, e.Action, e.Tool, e.Promise = q.Model, st.Iteration, st.Turn, st.Action, block.Name, st.Promise
	if err != nil {
		e.Error = err.Error()
	}
	id := fmt.Sprintf("msg_sbxmock_%d_%d", st.Iteration, st.Turn)
	in := tokens(int(r.ContentLength))
	stop, out := anthropicStop(block)
	whole := anthropicMessageValue(id, q.Model, []anthropicOut{block}, stop, anthropicUsage(in, out))
	s.finish(w, r, e, q.Stream, anthropicEvents(id, q.Model, block, in), whole)
}

// claudeStep is the script's step for q and the content block answering
// it; a step Claude Code cannot be given (no working directory to write
// under) becomes a plain answer saying why, and the error.
func (s *Server) claudeStep(q *messagesRequest) (Step, anthropicOut, error) {
	l := q.loop()
	st := s.script.Plan(l, q.hasTools("Write", "Bash"))
	block, err := claudeAnswer(st, q.cwd())
	if err != nil {
		st = Step{Action: Chat, Loop: l, Text: "sbx mock model: " + err.Error() + ", so there is nothing to do."}
		block = anthropicOut{Type: "text", Text: st.Text}
	}
	return st, block, err
}

// countTokens answers POST /v1/messages/count_tokens with a rough count.
func (s *Server) countTokens(w http.ResponseWriter, r *http.Request) {
	e := entry(r, AgentClaude)
	var q messagesRequest
	if err := s.readJSON(w, r, &q); err != nil {
		s.refuse(w, e, err, anthropicError)
		return
	}
	e.Model, e.Status = q.Model, http.StatusOK
	s.log.write(e)
	writeJSON(w, e.Status, map[string]int{"input_tokens": tokens(int(r.ContentLength))})
}
