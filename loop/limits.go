package loop

import (
	"fmt"
	"io"
	"sync"
)

// What an iteration's output may cost the host: the agent inside may print
// without end. Its log keeps the first maxLog bytes; the completion checks
// (the promise, the last error line) read the last maxTail.
const (
	maxLog  = 64 << 20
	maxTail = 4 << 20
)

// tail keeps the last max bytes written to it.
type tail struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := len(p)
	if len(p) >= t.max {
		t.buf = append(t.buf[:0], p[len(p)-t.max:]...)
		return n, nil
	}
	if over := len(t.buf) + len(p) - t.max; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	t.buf = append(t.buf, p...)
	return n, nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}

// capped writes the first max bytes to w, then one line saying the rest
// was dropped (note, or that the log stops), and swallows the rest.
type capped struct {
	mu      sync.Mutex
	w       io.Writer
	max     int
	note    string
	written int
	dropped bool
}

func (c *capped) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := len(p)
	if room := c.max - c.written; room < len(p) {
		p = p[:max(room, 0)]
		if !c.dropped {
			c.dropped = true
			note := c.note
			if note == "" {
				note = fmt.Sprintf("the log stops here: the iteration printed more than %d MiB", c.max>>20)
			}
			defer fmt.Fprintf(c.w, "\n[sbx: %s]\n", note)
		}
	}
	if len(p) > 0 {
		if _, err := c.w.Write(p); err != nil {
			return 0, err
		}
		c.written += len(p)
	}
	return n, nil
}
