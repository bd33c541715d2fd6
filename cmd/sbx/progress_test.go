package main

import (
	"bytes"
	"io"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sbxhq/sbx/reconcile"
)

func TestStepPrinter(t *testing.T) {
	build := reconcile.Step{Kind: reconcile.StepBuild, Sandbox: "api"}
	create := reconcile.Step{Kind: reconcile.StepCreate, Sandbox: "api"}
	run := func(tty bool) string {
		var b bytes.Buffer
		p := &stepPrinter{w: &b, tty: tty}
		o := p.options()
		o.Progress(1, 3, build)
		io.WriteString(o.Output, "Step 1/2 : FROM busybox\nStep 2/2 : RUN ma")
		io.WriteString(o.Output, "ke\n")
		o.Done(1, 3, build, 12345*time.Millisecond)
		o.Progress(2, 3, create)
		o.Done(2, 3, create, 420*time.Millisecond)
		o.Progress(3, 3, create)
		io.WriteString(o.Output, "half a line")
		p.finish()
		return b.String()
	}
	wantTTY := `[1/3] build template of sandbox "api"
      Step 1/2 : FROM busybox
      Step 2/2 : RUN make
      done (12s)
[2/3] create sandbox "api" (0.4s)
[3/3] create sandbox "api"
      half a line
`
	if diff := cmp.Diff(wantTTY, run(true)); diff != "" {
		t.Errorf("on a terminal (-want +got):\n%s", diff)
	}
	wantPlain := `[1/3] build template of sandbox "api"
      Step 1/2 : FROM busybox
      Step 2/2 : RUN make
[2/3] create sandbox "api"
[3/3] create sandbox "api"
      half a line
`
	if diff := cmp.Diff(wantPlain, run(false)); diff != "" {
		t.Errorf("off a terminal (-want +got):\n%s", diff)
	}
}
