package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/sbxhq/sbx/internal/mockmodel"
)

// lockedBuffer is stdout as the server writes it while the test reads.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func TestRun(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout lockedBuffer
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"-listen", "127.0.0.1:0", "-promise-at", "1", "-promise", "FINI", "-delay", "0s"}, &stdout, pw)
		pw.Close()
	}()
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		t.Fatalf("no listening line: %v (run: %v)", err, <-done)
	}
	go io.Copy(io.Discard, pr)
	addr, ok := strings.CutPrefix(strings.TrimSpace(line), "mockmodel: listening on ")
	if !ok {
		t.Fatalf("first stderr line %q", line)
	}

	body := `{"model":"m","stream":false,"tools":[{"name":"Write"},{"name":"Bash"}],` +
		`"messages":[{"role":"user","content":"[sbx loop: iteration 1 of 1]\n\nx"},` +
		`{"role":"assistant","content":[{"type":"tool_use","id":"a","name":"Write","input":{}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"a"}]},` +
		`{"role":"assistant","content":[{"type":"tool_use","id":"b","name":"Bash","input":{}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"b"}]}]}`
	req, err := http.NewRequest("POST", "http://"+addr+"/v1/messages", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Api-Key", "k")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	answer, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(answer), "<promise>FINI</promise>") {
		t.Errorf("answer %d %s, want the flags' promise", resp.StatusCode, answer)
	}

	cancel()
	if err := <-done; err != nil {
		t.Fatalf("run after cancel: %v", err)
	}
	var e mockmodel.Entry
	if err := json.Unmarshal([]byte(stdout.String()), &e); err != nil {
		t.Fatalf("stdout %q is not one log line: %v", stdout.String(), err)
	}
	if e.Key != "k" || !e.Promise || e.Action != mockmodel.Finish {
		t.Errorf("log entry %+v", e)
	}
}

func TestRunBadArgs(t *testing.T) {
	for _, args := range [][]string{
		{"-promise-at", "0"},
		{"-nope"},
		{"extra"},
		{"-listen", "127.0.0.1:notaport"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			if err := run(context.Background(), args, io.Discard, io.Discard); err == nil {
				t.Errorf("run(%q) = nil, want an error", args)
			}
		})
	}
}
