// Package mockmodel is sbx's own stand-in for the model APIs the real agent
// CLIs talk to, so CI can run Claude Code and Codex CLI end to end without a
// model provider: an Anthropic Messages API (POST /v1/messages, streamed or
// not) and an OpenAI Responses API (POST /v1/responses, streamed), behind one
// http.Handler.
//
// The model is a script, the same for both agents. A request whose user
// prompt holds sbx's loop header "[sbx loop: iteration N of M]" (see
// loop.Prompt) is answered, over the turns of that iteration, by (a) a call
// to the agent's file-writing tool creating sbx-mock/iteration-N.txt in the
// working directory, (b) a call to its shell tool appending a line to
// sbx-mock/shell.log, and (c) a final text that, from iteration PromiseAt on,
// holds <promise>TEXT</promise>. The turn is read from the conversation the
// client sends (the tool results after the prompt), never from server-side
// state, so parallel runs never mix. A request without the header or without
// the tools gets a short plain answer (title generation, quota checks).
//
// Everything in a request is written by the agent, which may be hostile:
// bodies are bounded, parsed as data only, and whatever the server echoes
// back (a working directory, a model name) is JSON-encoded in one SSE data
// line or one log line, so it cannot forge framing. The server runs nothing.
//
// Every request is logged as one JSON line (Entry), API key included as
// received, so a test can assert the key reached the mock: run it only with
// test keys.
package mockmodel
