package mockmodel

import (
	"fmt"
	"regexp"
	"strconv"
)

// Action is what the scripted model does in one response.
type Action string

const (
	// Chat is a short plain answer to a request that is not a loop
	// iteration (no header) or that offers none of the tools the script
	// needs.
	Chat Action = "chat"
	// WriteFile creates sbx-mock/iteration-N.txt with the file tool.
	WriteFile Action = "write"
	// Shell appends a line to sbx-mock/shell.log with the shell tool and
	// writes the environment its commands get to sbx-mock/env-N.txt.
	Shell Action = "shell"
	// Finish is the iteration's final text.
	Finish Action = "finish"
)

// Dir is the directory, relative to the agent's working directory, the
// script writes in.
const Dir = "sbx-mock"

// ShellLog is the file the shell step appends one line to per iteration.
const ShellLog = Dir + "/shell.log"

// Script is the scripted model's configuration.
type Script struct {
	// PromiseAt is the first iteration whose final text holds the promise.
	PromiseAt int
	// Promise is the text between <promise> and </promise>.
	Promise string
}

// Loop is where a request stands in sbx's loop: its iteration (0 when the
// prompt has no loop header) and how many tool results already came back
// in that iteration's conversation.
type Loop struct {
	Iteration int
	Of        int
	Turn      int
}

// Step is the scripted model's answer to one request.
type Step struct {
	Action Action
	Loop
	// Path is the file WriteFile creates, relative to the working directory.
	Path string
	// Content is what WriteFile writes.
	Content string
	// Command is the shell command Shell runs.
	Command string
	// Text is the answer of Chat and Finish.
	Text string
	// Promise reports whether Text holds the completion promise.
	Promise bool
}

// loopHeader is the line loop.Prompt starts every iteration's prompt with.
// Nine digits at most, so a hostile header cannot overflow an int.
var loopHeader = regexp.MustCompile(`(?m)^\[sbx loop: iteration ([0-9]{1,9}) of ([0-9]{1,9})\]\r?$`)

// parseHeader finds sbx's loop header in a prompt; ok is false without one
// or when it names iteration 0.
func parseHeader(text string) (iteration, of int, ok bool) {
	m := loopHeader.FindStringSubmatch(text)
	if m == nil {
		return 0, 0, false
	}
	iteration, _ = strconv.Atoi(m[1])
	of, _ = strconv.Atoi(m[2])
	return iteration, of, iteration > 0
}

// EnvFile is the file the shell step of iteration n writes the agent's
// command environment to: what a tool the model calls can read.
func EnvFile(n int) string {
	return fmt.Sprintf("%s/env-%d.txt", Dir, n)
}

// IterationFile is the file the write step of iteration n creates.
func IterationFile(n int) string {
	return fmt.Sprintf("%s/iteration-%d.txt", Dir, n)
}

// Plan is the scripted model's step at l, when the client offers the tools
// the script calls (tools) or not. It is pure: the same request always gets
// the same answer.
func (s Script) Plan(l Loop, tools bool) Step {
	if l.Iteration == 0 {
		return Step{Action: Chat, Loop: l, Text: "sbx mock model: this request holds no sbx loop header, so there is nothing to do."}
	}
	if !tools {
		return Step{Action: Chat, Loop: l, Text: "sbx mock model: the tools this script calls are not offered, so there is nothing to do."}
	}
	switch l.Turn {
	case 0:
		return Step{
			Action:  WriteFile,
			Loop:    l,
			Path:    IterationFile(l.Iteration),
			Content: fmt.Sprintf("sbx mock model: iteration %d of %d\n", l.Iteration, l.Of),
		}
	case 1:
		return Step{
			Action: Shell,
			Loop:   l,
			Command: fmt.Sprintf("mkdir -p %s && echo 'iteration %d' >> %s && env > %s && echo 'sbx mock shell step: iteration %d'",
				Dir, l.Iteration, ShellLog, EnvFile(l.Iteration), l.Iteration),
		}
	}
	text := fmt.Sprintf("sbx mock model: iteration %d of %d done: wrote %s and appended to %s.",
		l.Iteration, l.Of, IterationFile(l.Iteration), ShellLog)
	promise := s.PromiseAt > 0 && l.Iteration >= s.PromiseAt
	if promise {
		text += fmt.Sprintf("\n\n<promise>%s</promise>", s.Promise)
	}
	return Step{Action: Finish, Loop: l, Text: text, Promise: promise}
}
