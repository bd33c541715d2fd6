package mockmodel

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/sbxhq/sbx/loop"
)

func TestParseHeader(t *testing.T) {
	type result struct {
		Iteration, Of int
		OK            bool
	}
	tests := []struct {
		name string
		text string
		want result
	}{
		{"as sbx writes it", loop.Prompt(3, 7, nil, "do it"), result{3, 7, true}},
		{"with hints", loop.Prompt(2, 2, []string{"look at auth"}, "do it"), result{2, 2, true}},
		{"after other text", "context\n[sbx loop: iteration 4 of 9]\n", result{4, 9, true}},
		{"crlf", "[sbx loop: iteration 1 of 2]\r\nx", result{1, 2, true}},
		{"none", "do it", result{}},
		{"not at line start", "say [sbx loop: iteration 1 of 2]", result{}},
		{"trailing text", "[sbx loop: iteration 1 of 2] now", result{}},
		{"iteration zero", "[sbx loop: iteration 0 of 2]", result{}},
		{"ten digits cannot overflow", "[sbx loop: iteration 9999999999 of 2]", result{}},
		{"negative", "[sbx loop: iteration -1 of 2]", result{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got result
			got.Iteration, got.Of, got.OK = parseHeader(tt.text)
			if !got.OK {
				got = result{}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("parseHeader(%q) (-want +got):\n%s", tt.text, diff)
			}
		})
	}
}

func TestPlan(t *testing.T) {
	s := Script{PromiseAt: 2, Promise: "DONE"}
	tests := []struct {
		name  string
		s     Script
		l     Loop
		tools bool
		want  Step
	}{
		{
			name:  "no header",
			s:     s,
			l:     Loop{},
			tools: true,
			want:  Step{Action: Chat, Text: "sbx mock model: this request holds no sbx loop header, so there is nothing to do."},
		},
		{
			name: "no tools",
			s:    s,
			l:    Loop{Iteration: 1, Of: 3},
			want: Step{Action: Chat, Loop: Loop{Iteration: 1, Of: 3}, Text: "sbx mock model: the tools this script calls are not offered, so there is nothing to do."},
		},
		{
			name:  "write first",
			s:     s,
			l:     Loop{Iteration: 1, Of: 3},
			tools: true,
			want:  Step{Action: WriteFile, Loop: Loop{Iteration: 1, Of: 3}, Path: "sbx-mock/iteration-1.txt", Content: "sbx mock model: iteration 1 of 3\n"},
		},
		{
			name:  "then the shell",
			s:     s,
			l:     Loop{Iteration: 1, Of: 3, Turn: 1},
			tools: true,
			want: Step{Action: Shell, Loop: Loop{Iteration: 1, Of: 3, Turn: 1},
				Command: "mkdir -p sbx-mock && echo 'iteration 1' >> sbx-mock/shell.log && env > sbx-mock/env-1.txt && echo 'sbx mock shell step: iteration 1'"},
		},
		{
			name:  "finish before the promise",
			s:     s,
			l:     Loop{Iteration: 1, Of: 3, Turn: 2},
			tools: true,
			want: Step{Action: Finish, Loop: Loop{Iteration: 1, Of: 3, Turn: 2},
				Text: "sbx mock model: iteration 1 of 3 done: wrote sbx-mock/iteration-1.txt and appended to sbx-mock/shell.log."},
		},
		{
			name:  "finish at the promise",
			s:     s,
			l:     Loop{Iteration: 2, Of: 3, Turn: 2},
			tools: true,
			want: Step{Action: Finish, Loop: Loop{Iteration: 2, Of: 3, Turn: 2}, Promise: true,
				Text: "sbx mock model: iteration 2 of 3 done: wrote sbx-mock/iteration-2.txt and appended to sbx-mock/shell.log.\n\n<promise>DONE</promise>"},
		},
		{
			name:  "promise stays after",
			s:     Script{PromiseAt: 1, Promise: "COMPLETE"},
			l:     Loop{Iteration: 5, Of: 5, Turn: 4},
			tools: true,
			want: Step{Action: Finish, Loop: Loop{Iteration: 5, Of: 5, Turn: 4}, Promise: true,
				Text: "sbx mock model: iteration 5 of 5 done: wrote sbx-mock/iteration-5.txt and appended to sbx-mock/shell.log.\n\n<promise>COMPLETE</promise>"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.s.Plan(tt.l, tt.tools)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Plan (-want +got):\n%s", diff)
			}
			if got.Action == Finish && loop.PromiseSeen(got.Text, tt.s.Promise) != got.Promise {
				t.Errorf("loop.PromiseSeen(%q) disagrees with Promise %v", got.Text, got.Promise)
			}
		})
	}
}
