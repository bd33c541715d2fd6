package mockmodel

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/sbxhq/sbx/loop"
)

// syncBuffer is a log writer tests read while handlers write.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// entries decodes the log, one Entry a line, and fails on any line that is
// not one.
func (s *syncBuffer) entries(t *testing.T) []Entry {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Entry
	for _, line := range strings.Split(strings.TrimSuffix(s.b.String(), "\n"), "\n") {
		if line == "" {
			continue
		}
		var e Entry
		dec := json.NewDecoder(strings.NewReader(line))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&e); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		out = append(out, e)
	}
	return out
}

// send serves one request to h in process.
func send(t *testing.T, h http.Handler, method, path string, header http.Header, body any) *httptest.ResponseRecorder {
	t.Helper()
	var raw []byte
	switch b := body.(type) {
	case nil:
	case string:
		raw = []byte(b)
	default:
		var err error
		if raw, err = json.Marshal(b); err != nil {
			t.Fatal(err)
		}
	}
	r := httptest.NewRequest(method, path, bytes.NewReader(raw))
	for k, v := range header {
		r.Header[k] = v
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

const testCwd = "/work/ws"

// claudeConversation is a Messages API request as Claude Code 2.1.332
// sends it, cut down to what matters: the prompt in a user message after a
// system reminder, the working directory in a system message, the tools,
// and turn tool round trips.
func claudeConversation(prompt string, turn int, stream bool) map[string]any {
	msgs := []any{
		map[string]any{"role": "user", "content": []any{
			map[string]any{"type": "text", "text": "<system-reminder>\ngit status: clean\n</system-reminder>"},
			map[string]any{"type": "text", "text": prompt},
		}},
		map[string]any{"role": "system", "content": []any{
			map[string]any{"type": "text", "text": "# Environment\n - Primary working directory: " + testCwd + "\n - Is a git repository: true\n"},
		}},
	}
	for i := 0; i < turn; i++ {
		id := "toolu_" + string(rune('a'+i))
		msgs = append(msgs,
			map[string]any{"role": "assistant", "content": []any{map[string]any{"type": "tool_use", "id": id, "name": "Write", "input": map[string]any{}}}},
			map[string]any{"role": "user", "content": []any{map[string]any{"type": "tool_result", "tool_use_id": id, "content": "ok"}}},
		)
	}
	return map[string]any{
		"model": "claude-opus-5-5", "stream": stream, "max_tokens": 128000,
		"system":   []any{map[string]any{"type": "text", "text": "You are a Claude agent."}},
		"messages": msgs,
		"tools":    []any{map[string]any{"name": "Bash"}, map[string]any{"name": "Read"}, map[string]any{"name": "Write"}},
	}
}

// claudeReply is an answer reduced to what Claude Code acts on.
type claudeReply struct {
	StopReason string
	Type       string
	Name       string
	Text       string
	Input      map[string]any
}

// claudeStreamed rebuilds the answer from its events the way a client
// does, checking the documented order on the way.
func claudeStreamed(t *testing.T, ev []sseEvent) claudeReply {
	t.Helper()
	want := []string{"message_start", "ping", "content_block_start"}
	for range ev[3 : len(ev)-3] {
		want = append(want, "content_block_delta")
	}
	want = append(want, "content_block_stop", "message_delta", "message_stop")
	if diff := cmp.Diff(want, names(ev)); diff != "" {
		t.Fatalf("event order (-want +got):\n%s", diff)
	}
	var r claudeReply
	start := ev[2].Data["content_block"].(map[string]any)
	r.Type, _ = start["type"].(string)
	r.Name, _ = start["name"].(string)
	var partial strings.Builder
	for _, e := range ev[3 : len(ev)-3] {
		d := e.Data["delta"].(map[string]any)
		switch d["type"] {
		case "text_delta":
			r.Text += d["text"].(string)
		case "input_json_delta":
			partial.WriteString(d["partial_json"].(string))
		default:
			t.Fatalf("delta type %v", d["type"])
		}
	}
	if r.Type == "tool_use" {
		if err := json.Unmarshal([]byte(partial.String()), &r.Input); err != nil {
			t.Fatalf("tool input %q: %v", partial.String(), err)
		}
	}
	r.StopReason = ev[len(ev)-2].Data["delta"].(map[string]any)["stop_reason"].(string)
	return r
}

// claudeWhole reads a non-streamed answer.
func claudeWhole(t *testing.T, body []byte) claudeReply {
	t.Helper()
	var m struct {
		Type       string `json:"type"`
		StopReason string `json:"stop_reason"`
		Content    []struct {
			Type  string         `json:"type"`
			Name  string         `json:"name"`
			Text  string         `json:"text"`
			Input map[string]any `json:"input"`
		} `json:"content"`
	}
	if err := json.Unmarshal(body, &m); err != nil || m.Type != "message" || len(m.Content) != 1 {
		t.Fatalf("answer %s: %v", body, err)
	}
	c := m.Content[0]
	return claudeReply{StopReason: m.StopReason, Type: c.Type, Name: c.Name, Text: c.Text, Input: c.Input}
}

func TestClaudeScript(t *testing.T) {
	prompt := loop.Prompt(2, 3, nil, "Build the thing.")
	tests := []struct {
		name   string
		turn   int
		prompt string
		want   claudeReply
	}{
		{"write", 0, prompt, claudeReply{StopReason: "tool_use", Type: "tool_use", Name: "Write",
			Input: map[string]any{"file_path": testCwd + "/sbx-mock/iteration-2.txt", "content": "sbx mock model: iteration 2 of 3\n"}}},
		{"shell", 1, prompt, claudeReply{StopReason: "tool_use", Type: "tool_use", Name: "Bash",
			Input: map[string]any{
				"command":     "mkdir -p sbx-mock && echo 'iteration 2' >> sbx-mock/shell.log && env > sbx-mock/env-2.txt && echo 'sbx mock shell step: iteration 2'",
				"description": "Append the iteration to the mock's shell log",
			}}},
		{"finish", 2, prompt, claudeReply{StopReason: "end_turn", Type: "text",
			Text: "sbx mock model: iteration 2 of 3 done: wrote sbx-mock/iteration-2.txt and appended to sbx-mock/shell.log.\n\n<promise>COMPLETE</promise>"}},
		{"no header", 0, "Write a 5-word title for this conversation.", claudeReply{StopReason: "end_turn", Type: "text",
			Text: "sbx mock model: this request holds no sbx loop header, so there is nothing to do."}},
	}
	for _, tt := range tests {
		for _, streamed := range []bool{true, false} {
			name := tt.name + map[bool]string{true: " streamed", false: " whole"}[streamed]
			t.Run(name, func(t *testing.T) {
				h := New(Config{})
				for _, path := range []string{"/v1/messages", "/v1/messages?beta=true"} {
					w := send(t, h, "POST", path, http.Header{"X-Api-Key": {"sk-ant-test"}}, claudeConversation(tt.prompt, tt.turn, streamed))
					if w.Code != http.StatusOK {
						t.Fatalf("%s: status %d: %s", path, w.Code, w.Body)
					}
					var got claudeReply
					if streamed {
						got = claudeStreamed(t, readSSE(t, w.Body.Bytes()))
					} else {
						got = claudeWhole(t, w.Body.Bytes())
					}
					if diff := cmp.Diff(tt.want, got); diff != "" {
						t.Errorf("%s: answer (-want +got):\n%s", path, diff)
					}
				}
			})
		}
	}
}

// claudeWithoutTools is a title-generation style request: no tools.
func TestClaudeNoTools(t *testing.T) {
	req := claudeConversation(loop.Prompt(1, 3, nil, "x"), 0, true)
	delete(req, "tools")
	w := send(t, New(Config{}), "POST", "/v1/messages", nil, req)
	got := claudeStreamed(t, readSSE(t, w.Body.Bytes()))
	if got.Type != "text" || got.StopReason != "end_turn" {
		t.Errorf("answer without tools %+v, want plain text", got)
	}
}

// codexConversation is a Responses API request as Codex CLI 0.171.0 sends
// it in code mode, cut down: tools in an additional_tools item, the
// environment context and the prompt as user messages, and turn exec round
// trips.
func codexConversation(prompt string, turn int) map[string]any {
	input := []any{
		map[string]any{"type": "additional_tools", "role": "developer", "tools": []any{
			map[string]any{"type": "namespace", "name": "functions", "tools": []any{
				map[string]any{"type": "custom", "name": "exec", "format": map[string]any{"type": "grammar", "syntax": "lark"}},
				map[string]any{"type": "function", "name": "wait"},
			}},
		}},
		map[string]any{"type": "message", "role": "developer", "content": []any{map[string]any{"type": "input_text", "text": "You are Codex."}}},
		map[string]any{"type": "message", "role": "user", "content": []any{map[string]any{"type": "input_text", "text": "<environment_context>\n  <cwd>/work/ws</cwd>\n</environment_context>"}}},
		map[string]any{"type": "message", "role": "user", "content": []any{map[string]any{"type": "input_text", "text": prompt}}},
		map[string]any{"type": "configuration_update", "reasoning": map[string]any{"effort": "low"}},
	}
	for i := 0; i < turn; i++ {
		id := "call_" + string(rune('a'+i))
		input = append(input,
			map[string]any{"type": "custom_tool_call", "call_id": id, "name": "exec", "input": "text(1)"},
			map[string]any{"type": "custom_tool_call_output", "call_id": id, "output": "ok"},
		)
	}
	return map[string]any{"model": "gpt-6.2-sol", "stream": true, "input": input, "tool_choice": "auto", "store": false}
}

// codexReply is an answer reduced to what Codex acts on.
type codexReply struct {
	Type  string
	Name  string
	Input string
	Text  string
}

// codexStreamed rebuilds the answer from its events, checking what codex
// relies on: created first, completed last with the output item and usage,
// sequence numbers in order, deltas adding up to the done item.
func codexStreamed(t *testing.T, ev []sseEvent) codexReply {
	t.Helper()
	if ev[0].Name != "response.created" || ev[len(ev)-1].Name != "response.completed" {
		t.Fatalf("stream does not run from response.created to response.completed:\n%s", fmtEvents(ev))
	}
	var deltas strings.Builder
	var done map[string]any
	for i, e := range ev {
		if e.Data["sequence_number"] != float64(i) {
			t.Errorf("event %d %s: sequence_number %v", i, e.Name, e.Data["sequence_number"])
		}
		switch e.Name {
		case "response.output_text.delta", "response.custom_tool_call_input.delta":
			deltas.WriteString(e.Data["delta"].(string))
		case "response.output_item.done":
			done = e.Data["item"].(map[string]any)
		}
	}
	completed := ev[len(ev)-1].Data["response"].(map[string]any)
	if diff := cmp.Diff([]any{done}, completed["output"]); diff != "" {
		t.Errorf("response.completed output is not the done item (-want +got):\n%s", diff)
	}
	if completed["id"] == "" || completed["usage"] == nil {
		t.Errorf("response.completed lacks id or usage: %v", completed)
	}
	r := codexReply{Type: done["type"].(string)}
	switch r.Type {
	case "custom_tool_call":
		r.Name, r.Input = done["name"].(string), done["input"].(string)
		if done["call_id"] == "" {
			t.Error("custom_tool_call without call_id")
		}
		if deltas.String() != r.Input {
			t.Errorf("input deltas %q do not add up to the input %q", deltas.String(), r.Input)
		}
	case "message":
		r.Text = done["content"].([]any)[0].(map[string]any)["text"].(string)
		if deltas.String() != r.Text {
			t.Errorf("text deltas %q do not add up to the text %q", deltas.String(), r.Text)
		}
	}
	return r
}

func TestCodexScript(t *testing.T) {
	prompt := loop.Prompt(1, 3, []string{"hint"}, "Build the thing.")
	tests := []struct {
		name   string
		turn   int
		prompt string
		want   codexReply
	}{
		{"write", 0, prompt, codexReply{Type: "custom_tool_call", Name: "exec",
			Input: "await tools.apply_patch(\"*** Begin Patch\\n*** Add File: sbx-mock/iteration-1.txt\\n+sbx mock model: iteration 1 of 3\\n*** End Patch\\n\");\ntext(\"wrote sbx-mock/iteration-1.txt\");\n"}},
		{"shell", 1, prompt, codexReply{Type: "custom_tool_call", Name: "exec",
			Input: "const r = await tools.exec_command({cmd: \"mkdir -p sbx-mock && echo 'iteration 1' >> sbx-mock/shell.log && env > sbx-mock/env-1.txt && echo 'sbx mock shell step: iteration 1'\"});\ntext(r.output);\n"}},
		{"finish", 2, prompt, codexReply{Type: "message",
			Text: "sbx mock model: iteration 1 of 3 done: wrote sbx-mock/iteration-1.txt and appended to sbx-mock/shell.log."}},
		{"no header", 0, "hello", codexReply{Type: "message",
			Text: "sbx mock model: this request holds no sbx loop header, so there is nothing to do."}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := send(t, New(Config{}), "POST", "/v1/responses", http.Header{"Authorization": {"Bearer sk-test"}}, codexConversation(tt.prompt, tt.turn))
			if w.Code != http.StatusOK {
				t.Fatalf("status %d: %s", w.Code, w.Body)
			}
			got := codexStreamed(t, readSSE(t, w.Body.Bytes()))
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("answer (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCodexWhole(t *testing.T) {
	req := codexConversation(loop.Prompt(2, 2, nil, "x"), 2)
	req["stream"] = false
	w := send(t, New(Config{}), "POST", "/v1/responses", nil, req)
	var resp struct {
		Status string `json:"status"`
		Output []struct {
			Type    string `json:"type"`
			Content []struct {
				Text string `json:"text"`
			} `json:"content"`
		} `json:"output"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &resp); err != nil || resp.Status != "completed" || len(resp.Output) != 1 || len(resp.Output[0].Content) != 1 {
		t.Fatalf("non-streamed answer %s: %v", w.Body, err)
	}
	if !loop.PromiseSeen(resp.Output[0].Content[0].Text, "COMPLETE") {
		t.Errorf("iteration 2's final answer %q holds no promise", resp.Output[0].Content[0].Text)
	}
}

func TestCodexExecOffered(t *testing.T) {
	nest := func(depth int) []any {
		tools := []any{map[string]any{"type": "custom", "name": "exec"}}
		for i := 0; i < depth; i++ {
			tools = []any{map[string]any{"type": "namespace", "name": "ns", "tools": tools}}
		}
		return tools
	}
	tests := []struct {
		name string
		edit func(req map[string]any)
		want Action
	}{
		{"in additional_tools", func(map[string]any) {}, WriteFile},
		{"top-level tools", func(req map[string]any) {
			req["input"] = req["input"].([]any)[1:]
			req["tools"] = nest(0)
		}, WriteFile},
		{"none", func(req map[string]any) { req["input"] = req["input"].([]any)[1:] }, Chat},
		{"a function named exec is not code mode", func(req map[string]any) {
			req["input"] = req["input"].([]any)[1:]
			req["tools"] = []any{map[string]any{"type": "function", "name": "exec"}}
		}, Chat},
		// A hostile client nests namespaces deep; the search stops.
		{"deeper than followed", func(req map[string]any) {
			req["input"] = req["input"].([]any)[1:]
			req["tools"] = nest(1000)
		}, Chat},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var log syncBuffer
			req := codexConversation(loop.Prompt(1, 1, nil, "x"), 0)
			tt.edit(req)
			w := send(t, New(Config{Log: &log}), "POST", "/v1/responses", nil, req)
			if w.Code != http.StatusOK {
				t.Fatalf("status %d: %s", w.Code, w.Body)
			}
			if got := log.entries(t)[0].Action; got != tt.want {
				t.Errorf("action %q, want %q", got, tt.want)
			}
		})
	}
}

func TestRequestLog(t *testing.T) {
	var log syncBuffer
	h := New(Config{Log: &log, Script: Script{PromiseAt: 1, Promise: "OK"}})
	prompt := loop.Prompt(1, 2, nil, "x")
	send(t, h, "HEAD", "/api/hello", http.Header{"X-Api-Key": {"k1"}}, nil)
	for turn := 0; turn < 3; turn++ {
		send(t, h, "POST", "/v1/messages?beta=true", http.Header{"X-Api-Key": {"k1"}}, claudeConversation(prompt, turn, true))
	}
	send(t, h, "POST", "/v1/messages/count_tokens", http.Header{"X-Api-Key": {"k1"}}, map[string]any{"model": "m", "messages": []any{}})
	send(t, h, "GET", "/v1/responses", http.Header{"Authorization": {"Bearer k2"}, "Upgrade": {"websocket"}}, nil)
	send(t, h, "POST", "/v1/responses", http.Header{"Authorization": {"Bearer k2"}}, codexConversation(prompt, 0))
	send(t, h, "GET", "/v1/models", nil, nil)

	var got []Entry
	for _, e := range log.entries(t) {
		if e.Time.IsZero() {
			t.Errorf("entry %+v has no time", e)
		}
		e.Time = time.Time{}
		got = append(got, e)
	}
	claude := func(turn int, action Action, tool string, promise bool) Entry {
		return Entry{Method: "POST", Path: "/v1/messages", Key: "k1", Model: "claude-opus-5-5", Agent: AgentClaude,
			Iteration: 1, Turn: turn, Action: action, Tool: tool, Promise: promise, Status: 200}
	}
	want := []Entry{
		{Method: "HEAD", Path: "/api/hello", Key: "k1", Agent: AgentClaude, Status: 200},
		claude(0, WriteFile, "Write", false),
		claude(1, Shell, "Bash", false),
		claude(2, Finish, "", true),
		{Method: "POST", Path: "/v1/messages/count_tokens", Key: "k1", Model: "m", Agent: AgentClaude, Status: 200},
		{Method: "GET", Path: "/v1/responses", Key: "k2", Agent: AgentCodex, Status: 426},
		{Method: "POST", Path: "/v1/responses", Key: "k2", Model: "gpt-6.2-sol", Agent: AgentCodex, Iteration: 1, Action: WriteFile, Tool: "apply_patch", Status: 200},
		{Method: "GET", Path: "/v1/models", Status: 404, Error: "no such endpoint in the mock"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("log (-want +got):\n%s", diff)
	}
}

func TestWebSocketRefused(t *testing.T) {
	w := send(t, New(Config{}), "GET", "/v1/responses", http.Header{
		"Connection": {"Upgrade"}, "Upgrade": {"websocket"}, "Sec-Websocket-Version": {"13"},
		"Sec-Websocket-Key": {"dGhlIHNhbXBsZSBub25jZQ=="}, "Openai-Beta": {"responses_websockets=2026-02-06"},
	}, nil)
	// codex-rs/core/src/client.rs: a connect-time 426 is
	// WebsocketStreamOutcome::FallbackToHttp, HTTP for the rest of the session.
	if w.Code != http.StatusUpgradeRequired {
		t.Errorf("WebSocket handshake answered %d, want 426 so codex falls back to HTTP at once", w.Code)
	}
}

func TestHello(t *testing.T) {
	for _, method := range []string{"HEAD", "GET"} {
		w := send(t, New(Config{}), method, "/api/hello", nil, nil)
		if w.Code != http.StatusOK {
			t.Errorf("%s /api/hello: %d", method, w.Code)
		}
	}
}
