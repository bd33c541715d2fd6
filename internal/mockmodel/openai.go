package mockmodel

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// The OpenAI Responses API (https://platform.openai.com/docs/api-reference/responses
// and its streaming events), as Codex CLI 0.171.0 reads it. Codex's parser
// (codex-rs/codex-api/src/sse/responses.rs, process_sse) acts on
// response.created, response.output_item.added/done, response.output_text.delta
// and response.completed (whose response needs an id; usage is optional) and
// ignores the rest; its own test fixtures
// (codex-rs/core/tests/common/responses.rs, ev_custom_tool_call) send a
// custom tool call as an output item with call_id, name and input and no
// namespace. Observed with 0.171.0: the request carries its tools in an
// input item of type additional_tools (the "responses lite" form), the
// default model gets "code mode" (one custom tool, exec in namespace
// functions, whose input is JavaScript with a global tools object), and the
// user prompt and the <environment_context> are separate user messages.

// responsesRequest is the part of a Responses API request the script reads.
type responsesRequest struct {
	Model  string          `json:"model"`
	Stream bool            `json:"stream"`
	Input  json.RawMessage `json:"input"`
	Tools  []responsesTool `json:"tools"`
}

// responsesItem is the part of an input item the script reads. An item
// with a role and no type is a message.
type responsesItem struct {
	Type    string          `json:"type"`
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
	Tools   []responsesTool `json:"tools"`
}

// responsesTool is a tool, or a namespace of tools.
type responsesTool struct {
	Type  string          `json:"type"`
	Name  string          `json:"name"`
	Tools []responsesTool `json:"tools"`
}

// items reads input that is a string (one user message) or a list of items.
func (q *responsesRequest) items() []responsesItem {
	var s string
	if json.Unmarshal(q.Input, &s) == nil {
		raw, _ := json.Marshal(s)
		return []responsesItem{{Type: "message", Role: "user", Content: raw}}
	}
	var items []responsesItem
	if json.Unmarshal(q.Input, &items) != nil {
		return nil
	}
	return items
}

// texts is the text of a message's content: a string, or input_text and
// output_text parts.
func texts(raw json.RawMessage) []string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return []string{s}
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(raw, &parts) != nil {
		return nil
	}
	var out []string
	for _, p := range parts {
		if p.Type == "input_text" || p.Type == "text" {
			out = append(out, p.Text)
		}
	}
	return out
}

// isMessage reports whether it is a message item.
func (it responsesItem) isMessage() bool {
	return it.Type == "message" || it.Type == "" && it.Role != ""
}

// loop finds where the conversation stands: the last user message holding
// the loop header, and the tool outputs after it.
func (q *responsesRequest) loop(items []responsesItem) Loop {
	var l Loop
	prompt := -1
	for i, it := range items {
		if !it.isMessage() || it.Role != "user" {
			continue
		}
		for _, t := range texts(it.Content) {
			if n, of, ok := parseHeader(t); ok {
				prompt, l.Iteration, l.Of = i, n, of
			}
		}
	}
	if prompt < 0 {
		return Loop{}
	}
	for _, it := range items[prompt+1:] {
		if it.Type == "custom_tool_call_output" || it.Type == "function_call_output" {
			l.Turn++
		}
	}
	return l
}

// hasExec reports whether the request offers code mode's custom tool exec,
// at top level or in an additional_tools item, in a namespace or not.
func (q *responsesRequest) hasExec(items []responsesItem) bool {
	all := q.Tools
	for _, it := range items {
		if it.Type == "additional_tools" {
			all = append(all, it.Tools...)
		}
	}
	return findCustom(all, "exec", 0)
}

// maxNesting bounds how deep findCustom follows namespaces.
const maxNesting = 8

// findCustom reports whether tools, or the namespaces in them down to
// maxNesting, hold a custom tool called name.
func findCustom(tools []responsesTool, name string, depth int) bool {
	if depth > maxNesting {
		return false
	}
	for _, t := range tools {
		if t.Type == "custom" && t.Name == name || findCustom(t.Tools, name, depth+1) {
			return true
		}
	}
	return false
}

// jsString is s as a JavaScript string literal: JSON's string syntax is a
// subset of JavaScript's, and marshal escapes every control character
// (and U+2028/U+2029).
func jsString(s string) string {
	b, _ := marshal(s)
	return string(b)
}

// codexExec is the scripted step as code mode's exec input: JavaScript
// calling tools.apply_patch (the patch adds the file relative to the turn's
// working directory) or tools.exec_command, and returning what it did with
// text(). The tool named is the nested one.
func codexExec(st Step) (js, tool string) {
	switch st.Action {
	case WriteFile:
		var patch strings.Builder
		fmt.Fprintf(&patch, "*** Begin Patch\n*** Add File: %s\n", st.Path)
		for _, line := range strings.SplitAfter(strings.TrimSuffix(st.Content, "\n"), "\n") {
			fmt.Fprintf(&patch, "+%s", line)
		}
		patch.WriteString("\n*** End Patch\n")
		return fmt.Sprintf("await tools.apply_patch(%s);\ntext(%s);\n", jsString(patch.String()), jsString("wrote "+st.Path)), "apply_patch"
	case Shell:
		return fmt.Sprintf("const r = await tools.exec_command({cmd: %s});\ntext(r.output);\n", jsString(st.Command)), "exec_command"
	}
	return "", ""
}

// responsesUsage is a response's usage as codex parses it.
func responsesUsage(in, out int) map[string]any {
	return map[string]any{
		"input_tokens": in, "input_tokens_details": map[string]int{"cached_tokens": 0},
		"output_tokens": out, "output_tokens_details": map[string]int{"reasoning_tokens": 0},
		"total_tokens": in + out,
	}
}

// responseValue is the response object: in_progress with no output for
// response.created, completed with its output and usage at the end and as
// a non-streamed answer.
func responseValue(id, model string, created int64, output []any, usage map[string]any) map[string]any {
	status := "completed"
	if usage == nil {
		status = "in_progress"
	}
	return map[string]any{
		"id": id, "object": "response", "created_at": created, "status": status,
		"model": model, "output": output, "usage": usage,
	}
}

// responsesOut is one answer of the Responses API: the events of its stream
// and the final response object.
type responsesOut struct {
	events []event
	whole  map[string]any
}

// responsesAnswer is the documented event flow of a response with one
// output item: response.created, response.in_progress,
// response.output_item.added, the item's deltas and done events,
// response.output_item.done, response.completed. Every event carries a
// sequence_number.
func responsesAnswer(id, model string, created int64, st Step, js string, inTokens int) responsesOut {
	var ev []event
	add := func(name string, data map[string]any) {
		data["type"] = name
		data["sequence_number"] = len(ev)
		ev = append(ev, event{name, data})
	}
	add("response.created", map[string]any{"response": responseValue(id, model, created, []any{}, nil)})
	add("response.in_progress", map[string]any{"response": responseValue(id, model, created, []any{}, nil)})
	var item map[string]any
	var outLen int
	if js != "" {
		item, outLen = customToolCall(add, id, st, js), len(js)
	} else {
		item, outLen = textMessage(add, id, st.Text), len(st.Text)
	}
	add("response.output_item.done", map[string]any{"output_index": 0, "item": item})
	whole := responseValue(id, model, created, []any{item}, responsesUsage(inTokens, tokens(outLen)))
	add("response.completed", map[string]any{"response": whole})
	return responsesOut{events: ev, whole: whole}
}

// customToolCall streams a custom_tool_call to code mode's exec and returns
// the finished item.
func customToolCall(add func(string, map[string]any), id string, st Step, js string) map[string]any {
	itemID := "ctc_" + strings.TrimPrefix(id, "resp_")
	callID := "call_" + strings.TrimPrefix(id, "resp_")
	add("response.output_item.added", map[string]any{"output_index": 0, "item": map[string]any{
		"id": itemID, "type": "custom_tool_call", "status": "in_progress", "call_id": callID, "name": "exec", "input": "",
	}})
	for _, c := range chunks(js) {
		add("response.custom_tool_call_input.delta", map[string]any{"item_id": itemID, "output_index": 0, "delta": c})
	}
	add("response.custom_tool_call_input.done", map[string]any{"item_id": itemID, "output_index": 0, "input": js})
	return map[string]any{"id": itemID, "type": "custom_tool_call", "status": "completed", "call_id": callID, "name": "exec", "input": js}
}

// textMessage streams an assistant message with text and returns the
// finished item.
func textMessage(add func(string, map[string]any), id, text string) map[string]any {
	itemID := "msg_" + strings.TrimPrefix(id, "resp_")
	at := func(m map[string]any) map[string]any {
		m["item_id"], m["output_index"], m["content_index"] = itemID, 0, 0
		return m
	}
	part := func(t string) map[string]any {
		return map[string]any{"type": "output_text", "text": t, "annotations": []any{}}
	}
	add("response.output_item.added", map[string]any{"output_index": 0, "item": map[string]any{
		"id": itemID, "type": "message", "status": "in_progress", "role": "assistant", "content": []any{},
	}})
	add("response.content_part.added", at(map[string]any{"part": part("")}))
	for _, c := range chunks(text) {
		add("response.output_text.delta", at(map[string]any{"delta": c}))
	}
	add("response.output_text.done", at(map[string]any{"text": text}))
	add("response.content_part.done", at(map[string]any{"part": part(text)}))
	return map[string]any{"id": itemID, "type": "message", "status": "completed", "role": "assistant", "content": []any{part(text)}}
}

// openaiError is the Responses API's error body.
func openaiError(msg string) any {
	return map[string]any{"error": map[string]any{"message": msg, "type": "invalid_request_error", "param": nil, "code": nil}}
}

// responsesWebSocket answers Codex's Responses WebSocket handshake
// (GET /v1/responses with Upgrade: websocket) with 426 Upgrade Required:
// codex then disables WebSockets for the session and uses HTTP at once,
// without its five reconnects (its own test servers answer a WebSocket it
// should not use the same way).
func (s *Server) responsesWebSocket(w http.ResponseWriter, r *http.Request) {
	e := entry(r, AgentCodex)
	e.Status = http.StatusUpgradeRequired
	s.log.write(e)
	writeJSON(w, e.Status, openaiError("this mock serves the Responses API over HTTP only"))
}

// responses answers POST /v1/responses.
func (s *Server) responses(w http.ResponseWriter, r *http.Request) {
	e := entry(r, AgentCodex)
	var q responsesRequest
	if err := s.readJSON(w, r, &q); err != nil {
		s.refuse(w, e, err, openaiError)
		return
	}
	items := q.items()
	l := q.loop(items)
	st := s.script.Plan(l, q.hasExec(items))
	js, tool := codexExec(st)
	e.Model, e.Iteration, e.Turn, e.Action, e.Tool, e.Promise = q.Model, l.Iteration, l.Turn, st.Action, tool, st.Promise
	id := fmt.Sprintf("resp_sbxmock_%d_%d", l.Iteration, l.Turn)
	out := responsesAnswer(id, q.Model, time.Now().Unix(), st, js, tokens(int(r.ContentLength)))
	s.finish(w, r, e, q.Stream, out.events, out.whole)
}
