package main

import (
	"bytes"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/sbxhq/sbx/reconcile"
)

// stepPrinter shows apply's progress: a line per step ("[2/5] create
// sandbox "api""), what a long backend command prints (a template build,
// an image pull) indented under it, and, on a terminal, the time each step
// took at the end of its line. Off a terminal the lines are the same
// without times, so logs compare from run to run.
type stepPrinter struct {
	w   io.Writer
	tty bool

	mu sync.Mutex
	// open is set while a step's line waits for its time.
	open bool
	// partial is set when streamed output ended mid-line.
	partial bool
}

// options are the apply callbacks that print through p.
func (p *stepPrinter) options() reconcile.ApplyOptions {
	return reconcile.ApplyOptions{Progress: p.start, Done: p.done, Output: p.output()}
}

func (p *stepPrinter) start(i, n int, st reconcile.Step) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.endLine()
	fmt.Fprintf(p.w, "[%d/%d] %s", i, n, st)
	if !p.tty {
		fmt.Fprintln(p.w)
		return
	}
	p.open = true
}

func (p *stepPrinter) done(i, n int, st reconcile.Step, took time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.tty {
		return
	}
	if p.open {
		fmt.Fprintf(p.w, " (%s)\n", formatTook(took))
		p.open = false
		return
	}
	p.endLine()
	fmt.Fprintf(p.w, "      done (%s)\n", formatTook(took))
}

// finish ends a step line left open by a failure or an interruption.
func (p *stepPrinter) finish() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.endLine()
}

// endLine closes an open step line or a partial output line.
func (p *stepPrinter) endLine() {
	if p.open || p.partial {
		fmt.Fprintln(p.w)
	}
	p.open, p.partial = false, false
}

// output is the writer backend commands stream to: each line indented
// under its step.
func (p *stepPrinter) output() io.Writer {
	return writerFunc(func(b []byte) (int, error) {
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.open {
			fmt.Fprintln(p.w)
			p.open = false
		}
		n := len(b)
		for len(b) > 0 {
			line, rest, nl := bytes.Cut(b, []byte("\n"))
			if !p.partial {
				io.WriteString(p.w, "      ")
			}
			p.w.Write(line)
			if nl {
				io.WriteString(p.w, "\n")
			}
			p.partial = !nl
			b = rest
		}
		return n, nil
	})
}

// formatTook shows a step's time for people: "0.4s", "12s", "2m5s".
func formatTook(d time.Duration) string {
	switch {
	case d < 10*time.Second:
		return fmt.Sprintf("%.1fs", d.Seconds())
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Round(time.Second).Seconds()))
	}
	return d.Round(time.Second).String()
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(b []byte) (int, error) { return f(b) }
