// Package drivertest is the conformance suite every driver passes: its
// capability table is complete and says why; a sandbox is created from
// nothing and the plan after it is empty; a no-op plan makes no calls; an
// allow-list change and an env change are carried out as the table says,
// in place or by a replacement; every step of a prepared plan shows the
// backend calls it makes and apply runs exactly those; exec returns the
// command's exit status with the environment it was given; destroy leaves
// nothing. Each driver's tests run it against its backend: the fakes of
// Docker's CLIs, a real Docker Engine, a real Kubernetes cluster.
package drivertest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sbxhq/sbx/checkpoint"
	"github.com/sbxhq/sbx/driver"
	"github.com/sbxhq/sbx/driver/runner"
	"github.com/sbxhq/sbx/reconcile"
	"github.com/sbxhq/sbx/schema"
	"github.com/sbxhq/sbx/spec"
	"github.com/sbxhq/sbx/state"
)

// Harness is what a driver's test gives the suite.
type Harness struct {
	// New returns the driver under test, identified (Identify or Use
	// called), for a test of its own.
	New func(t *testing.T) driver.Backend
	// Head is YAML every sandbox.yaml of the suite has besides version,
	// name, agent, driver and workspace: a template the backend can run.
	Head string
	// Name returns a sandbox name unique to this run; the suite removes
	// what it creates, and Cleanup (when set) is called for each name.
	Name    func(t *testing.T, base string) string
	Cleanup func(name string)
	// Commands, when set, returns the backend commands run since the last
	// call, each as the runner quotes it: the suite then checks that
	// apply ran exactly the commands the plan showed. Drivers that talk
	// to an API rather than a CLI leave it nil.
	Commands func() []string
	// Leftovers, when set, lists what the backend still holds of a
	// sandbox (containers, volumes, objects), asked of the backend
	// directly: after destroy it must be empty.
	Leftovers func(t *testing.T, name string) []string
}

// Run runs the suite.
func Run(t *testing.T, h Harness) {
	t.Run("capabilities", func(t *testing.T) { capabilities(t, h.New(t)) })
	t.Run("lifecycle", func(t *testing.T) { lifecycle(t, h) })
}

// anotherWorkspace: the sandbox belongs to the suite's workspace; the
// same file in another checkout (or a user's other account) is refused by
// plan and destroy, and nothing is planned for it. Where the backend keeps
// the record with the sandbox (labels, annotations), it carries the owner,
// so that the refusal holds without this machine's records (another
// user's state directory); elsewhere the state directory's record is the
// only marker, and it carries the owner.
func anotherWorkspace(t *testing.T, w *world, sp *spec.Spec) {
	caps := w.d.Caps()
	live := w.observe()
	l := live[w.name]
	if r := w.records[w.name]; r == nil || r.Owner != w.owner() {
		t.Fatalf("the record of the applied sandbox has owner %+v, want %+v", r, w.owner())
	}
	elsewhere := []reconcile.Owner{
		{Workspace: w.dir + "-worktree", User: "conform-a"}, // a second checkout
		{Workspace: w.dir, User: "conform-b"},               // another user, the same path
	}
	records := []map[string]*reconcile.Record{w.records}
	if l.Record != nil {
		if l.Record.Owner != w.owner() {
			t.Errorf("the record the backend keeps has owner %+v, want %+v", l.Record.Owner, w.owner())
		}
		records = append(records, map[string]*reconcile.Record{w.name: l.Record})
	}
	for _, o := range elsewhere {
		for _, recs := range records {
			d := w.desired(sp)
			d.Owner = o
			p := reconcile.Plan([]reconcile.Desired{d}, live, recs, caps, reconcile.Options{})
			want := fmt.Sprintf("sandbox %q belongs to %s, not to this workspace (%s)", w.name, w.owner(), o.Workspace)
			if len(p.Errors) != 1 || !strings.HasPrefix(p.Errors[0], want) || len(p.Sandboxes) != 0 {
				t.Errorf("plan from %s: errors %q, %d sandboxes; want one refusal %q", o, p.Errors, len(p.Sandboxes), want)
			}
			pd := reconcile.PlanDestroy([]string{w.name}, live, recs, caps, reconcile.Options{Owners: map[string]reconcile.Owner{w.name: o}})
			if len(pd.Errors) != 1 || !strings.HasPrefix(pd.Errors[0], want) || len(pd.Sandboxes) != 0 {
				t.Errorf("destroy from %s: errors %q; want one refusal", o, pd.Errors)
			}
		}
	}
}

// allFields are the fields a capability table must have a row for.
var allFields = []reconcile.Field{
	reconcile.FieldAgent, reconcile.FieldTemplate, reconcile.FieldTemplateBuild, reconcile.FieldWorkspace,
	reconcile.FieldMounts, reconcile.FieldEnv, reconcile.FieldSecrets, reconcile.FieldResources,
	reconcile.FieldResourcesUnset, reconcile.FieldPids, reconcile.FieldPorts, reconcile.FieldNetworkAdd,
	reconcile.FieldNetworkRemove, reconcile.FieldRuntime, reconcile.FieldNoNewPrivileges, reconcile.FieldProtect,
	reconcile.FieldHardening, reconcile.FieldStatus, reconcile.FieldUser, reconcile.FieldKubernetes, reconcile.FieldEgressMode,
	reconcile.FieldWarmPool, reconcile.FieldDockerNetworks, reconcile.FieldSecretHosts, reconcile.FieldSecretFiles,
	reconcile.FieldHostPorts, reconcile.FieldServices,
}

func capabilities(t *testing.T, d driver.Backend) {
	caps := d.Caps()
	if caps.Driver != d.Name() {
		t.Errorf("Caps().Driver = %q, driver name %q", caps.Driver, d.Name())
	}
	if caps.StopKeeps == "" {
		t.Error("Caps().StopKeeps is empty: sbx stop says what a stop keeps on each backend")
	}
	for _, f := range allFields {
		c, ok := caps.Fields[f]
		if !ok {
			t.Errorf("no row for %s: the table must say what the backend does with every field", f)
			continue
		}
		if (c.Mode == reconcile.Replace || c.Mode == reconcile.Unsupported || c.Mode == reconcile.InPlace || c.Mode == reconcile.PerExec) && c.Reason == "" && f != reconcile.FieldHardening {
			t.Errorf("%s (%s) gives no reason; plans show it", f, c.Mode)
		}
	}
	if c := caps.Of(reconcile.FieldSecrets); c.Mode != reconcile.PerExec {
		t.Errorf("secrets are %s; every driver passes them per exec, never stores them", c.Mode)
	}
}

// spec resolves a sandbox.yaml of the suite: the harness's head and body,
// for the driver, with a workspace in dir.
func (w *world) spec(body string) *spec.Spec {
	w.t.Helper()
	sch, err := schema.Compile()
	if err != nil {
		w.t.Fatal(err)
	}
	doc := fmt.Sprintf("version: 1\nname: %s\nagent: shell\ndriver: %s\nworkspace: ws\n%s%s", w.name, w.d.Name(), w.h.Head, body)
	res, err := spec.Parse("sandbox.yaml", w.dir, []byte(doc), spec.Options{Schema: sch})
	if err != nil {
		w.t.Fatalf("spec: %v\n%s", err, doc)
	}
	return res.Specs[0]
}

// world is one sandbox of the suite on the driver.
type world struct {
	t       *testing.T
	h       Harness
	d       driver.Backend
	store   *reconcile.Store
	key     reconcile.Key
	name    string
	dir     string
	records map[string]*reconcile.Record
}

func (w *world) observe() map[string]*reconcile.Live {
	w.t.Helper()
	live, err := w.d.Observe(context.Background(), []string{w.name})
	if err != nil {
		w.t.Fatalf("Observe: %v", err)
	}
	recs, err := w.store.Records(w.d.Name(), []string{w.name})
	if err != nil {
		w.t.Fatal(err)
	}
	for n, l := range live {
		if recs[n] == nil && l != nil && l.Record != nil {
			recs[n] = l.Record
		}
	}
	w.records = recs
	return live
}

func (w *world) desired(sp *spec.Spec) reconcile.Desired {
	w.t.Helper()
	hash, err := w.d.BuildHash(sp)
	if err != nil {
		w.t.Fatal(err)
	}
	des, err := reconcile.NewDesired(sp, w.key, hash)
	if err != nil {
		w.t.Fatal(err)
	}
	des.Owner = w.owner()
	return des
}

// owner is whom the suite's sandbox belongs to: its base file's directory
// and a user of the suite's.
func (w *world) owner() reconcile.Owner {
	return reconcile.Owner{Workspace: w.dir, User: "conform-a"}
}

// plan plans sp and prepares the plan's calls.
func (w *world) plan(sp *spec.Spec) (*reconcile.Changes, map[string]*reconcile.Live) {
	w.t.Helper()
	live := w.observe()
	p := reconcile.Plan([]reconcile.Desired{w.desired(sp)}, live, w.records, w.d.Caps(), reconcile.Options{})
	if err := p.Err(); err != nil {
		w.t.Fatalf("plan: %v", err)
	}
	if err := p.Prepare(w.d, live); err != nil {
		w.t.Fatalf("prepare: %v", err)
	}
	return p, live
}

// apply applies a prepared plan, checks that apply ran what the plan
// showed, and that the plan after it is empty.
func (w *world) apply(p *reconcile.Changes, again func() *reconcile.Changes) {
	w.t.Helper()
	for _, c := range p.Sandboxes {
		for _, s := range c.Steps {
			if len(s.Calls) == 0 && s.Kind != reconcile.StepRecord && s.Kind != reconcile.StepForget {
				w.t.Errorf("step %s shows no backend call: a step that does nothing must not be planned", s)
			}
		}
	}
	if w.h.Commands != nil {
		w.h.Commands()
	}
	if err := reconcile.Apply(context.Background(), w.d, p, reconcile.ApplyOptions{Records: w.store}); err != nil {
		w.t.Fatalf("apply: %v", err)
	}
	if w.h.Commands != nil {
		ran(w.t, p, w.h.Commands())
	}
	if err := reconcile.Converged(again()); err != nil {
		w.t.Fatalf("after apply: %v", err)
	}
}

// ran checks that the commands apply ran are the plan's calls, in order:
// each call shown as a command line (up to a "  # note") is one command
// run, with a placeholder (<env file, 0600>) standing for a temporary path.
// Calls that are not command lines (API requests, notes) are skipped.
func ran(t *testing.T, p *reconcile.Changes, commands []string) {
	t.Helper()
	var shown []string
	for _, c := range p.Sandboxes {
		for _, s := range c.Steps {
			for _, call := range s.Calls {
				call, _, _ = strings.Cut(call, "  # ")
				shown = append(shown, call)
			}
		}
	}
	i := 0
	for _, cmd := range commands {
		for i < len(shown) && !sameCommand(shown[i], cmd) {
			i++
		}
		if i == len(shown) {
			t.Errorf("apply ran a command the plan did not show: %s\nthe plan's calls:\n  %s", cmd, strings.Join(shown, "\n  "))
			return
		}
		i++
	}
}

// sameCommand compares a shown call with a command run, word by word,
// a placeholder in <> matching any one word.
func sameCommand(shown, ran string) bool {
	sw, rw := strings.Fields(shown), strings.Fields(ran)
	// A placeholder may be several words (<env file, 0600>).
	var ws []string
	for j := 0; j < len(sw); j++ {
		if strings.HasPrefix(sw[j], "<") && !strings.HasSuffix(sw[j], ">") {
			k := j
			for k < len(sw) && !strings.HasSuffix(sw[k], ">") {
				k++
			}
			ws = append(ws, "<>")
			j = k
			continue
		}
		ws = append(ws, sw[j])
	}
	if len(ws) != len(rw) {
		return false
	}
	for j := range ws {
		if ws[j] != rw[j] && !(strings.HasPrefix(ws[j], "<") && strings.HasSuffix(ws[j], ">")) {
			return false
		}
	}
	return true
}

func lifecycle(t *testing.T, h Harness) {
	d := h.New(t)
	store, err := reconcile.OpenStore(state.Dir(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	key, err := store.Key()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "ws"), 0o755); err != nil {
		t.Fatal(err)
	}
	w := &world{t: t, h: h, d: d, store: store, key: key, name: h.Name(t, "conform"), dir: dir}
	destroy := func() {
		live := w.observe()
		p := reconcile.PlanDestroy([]string{w.name}, live, w.records, d.Caps(), reconcile.Options{})
		if p.Err() != nil || p.Prepare(d, live) != nil {
			return
		}
		reconcile.Apply(context.Background(), d, p, reconcile.ApplyOptions{Records: store})
	}
	t.Cleanup(func() {
		destroy()
		if h.Cleanup != nil {
			h.Cleanup(w.name)
		}
	})
	caps := d.Caps()
	body := "env: {NODE_ENV: development}\nnetwork:\n  agentHosts: false\n  allow: [a.example.com]\n"
	sp := w.spec(body)
	again := func(sp *spec.Spec) func() *reconcile.Changes {
		return func() *reconcile.Changes {
			live := w.observe()
			return reconcile.Plan([]reconcile.Desired{w.desired(sp)}, live, w.records, caps, reconcile.Options{})
		}
	}

	p, _ := w.plan(sp)
	if a := p.Sandboxes[0].Action; a != reconcile.ActionCreate {
		t.Fatalf("a new sandbox is planned as %s", a)
	}
	w.apply(p, again(sp))
	l := w.observe()[w.name]
	if l == nil || !l.Exists {
		t.Fatal("the created sandbox is not observed")
	}
	if caps.Of(reconcile.FieldWorkspace).Readable && l.Workspace.Path != sp.Workspace.Path {
		t.Errorf("observed workspace %q, created with %q", l.Workspace.Path, sp.Workspace.Path)
	}

	t.Run("another workspace", func(t *testing.T) { anotherWorkspace(t, w, sp) })

	t.Run("no-op", func(t *testing.T) {
		p, _ := w.plan(sp)
		if !p.Empty() {
			var b bytes.Buffer
			reconcile.RenderWidth(&b, p, false, 0) // unwrapped: the checks read whole lines
			t.Fatalf("a converged sandbox plans changes:\n%s", b.String())
		}
	})

	t.Run("allow-list change", func(t *testing.T) {
		if caps.Of(reconcile.FieldNetworkAdd).Mode != reconcile.InPlace {
			t.Skipf("this backend cannot add rules in place (%s)", caps.Of(reconcile.FieldNetworkAdd).Reason)
		}
		next := w.spec(strings.Replace(body, "[a.example.com]", "[a.example.com, b.example.com]", 1))
		p, _ := w.plan(next)
		if a := p.Sandboxes[0].Action; a != reconcile.ActionUpdate {
			t.Fatalf("an added allow rule is planned as %s, the table says in place", a)
		}
		w.apply(p, again(next))
		sp = next
	})

	t.Run("env change", func(t *testing.T) {
		next := w.spec(strings.Replace(stripAllow(sp), "development", "production", 1))
		p, _ := w.plan(next)
		want := reconcile.ActionUpdate
		if caps.Of(reconcile.FieldEnv).Mode == reconcile.Replace {
			want = reconcile.ActionReplace
		}
		if a := p.Sandboxes[0].Action; a != want {
			t.Fatalf("an env change is planned as %s, the table says %s", a, want)
		}
		w.apply(p, again(next))
		sp = next
	})

	t.Run("exec", func(t *testing.T) {
		ex, ok := d.(driver.Execer)
		if !ok {
			t.Skip("the driver runs no commands")
		}
		var out bytes.Buffer
		code, err := ex.Exec(context.Background(), w.name, []string{"sh", "-c", `printf '%s' "$SBX_CONFORM"; exit 3`},
			driver.ExecOptions{Env: map[string]string{"SBX_CONFORM": "secret-for-exec"}, Stdout: &out, Stderr: &out})
		if err != nil || code != 3 || !strings.Contains(out.String(), "secret-for-exec") {
			t.Errorf("exec: code %d, err %v, output %q; want 3 and the variable it was given", code, err, out.String())
		}
	})

	t.Run("stopped", func(t *testing.T) {
		if caps.Of(reconcile.FieldStatus).Mode != reconcile.InPlace {
			t.Skipf("a stopped sandbox is not drift here (%s)", caps.Of(reconcile.FieldStatus).Reason)
		}
		calls, err := d.Calls(reconcile.Step{Kind: reconcile.StepStop, Sandbox: w.name}, sp, w.observe()[w.name])
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range calls {
			if err := c.Run(context.Background()); err != nil {
				t.Fatalf("stop: %v", err)
			}
		}
		if l := w.observe()[w.name]; l == nil || !l.Stopped {
			t.Fatalf("after stop the sandbox is observed as %+v, want stopped", l)
		}
		p, _ := w.plan(sp)
		c := p.Sandboxes[0]
		if c.Action != reconcile.ActionUpdate || len(c.Steps) == 0 || c.Steps[0].Kind != reconcile.StepStart {
			var b bytes.Buffer
			reconcile.RenderWidth(&b, p, false, 0) // unwrapped: the checks read whole lines
			t.Fatalf("a stopped sandbox is not planned to start in place:\n%s", b.String())
		}
		w.apply(p, again(sp))
		if ex, ok := d.(driver.Execer); ok {
			if code, err := ex.Exec(context.Background(), w.name, []string{"true"}, driver.ExecOptions{}); err != nil || code != 0 {
				t.Errorf("exec after start: code %d, err %v", code, err)
			}
		}
	})

	t.Run("checkpoint", func(t *testing.T) {
		cpr, ok := d.(driver.Checkpointer)
		if !ok {
			t.Skipf("the driver keeps no checkpoints (%s)", caps.Constraints.NoCheckpoints)
		}
		ctx := context.Background()
		cp := checkpoint.Checkpoint{Name: h.Name(t, "conform-cp"), Driver: d.Name(), Sandbox: w.name,
			Kind: checkpoint.KindManual, Origin: checkpoint.OriginCreated}
		cp.Image = checkpoint.Ref(cp.Name)
		t.Cleanup(func() { cpr.RemoveCheckpoint(context.Background(), cp.Name) })
		calls, err := cpr.CheckpointCalls(cp, w.observe()[w.name], "")
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range calls {
			if err := c.Run(ctx); err != nil {
				t.Fatalf("checkpoint: %s: %v", c.Desc, err)
			}
		}
		if h.Commands != nil {
			h.Commands()
		}
		if l := w.observe()[w.name]; l == nil || !l.Exists {
			t.Fatal("the sandbox is gone after a checkpoint")
		}
		cps, err := cpr.Checkpoints(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := cps[cp.Name]; !ok {
			t.Fatalf("Checkpoints does not list %s after saving it: %v", cp.Name, cps)
		}
		if err := cpr.RemoveCheckpoint(ctx, cp.Name); err != nil {
			t.Fatal(err)
		}
		cps, err = cpr.Checkpoints(ctx)
		if _, still := cps[cp.Name]; err != nil || still {
			t.Errorf("after RemoveCheckpoint, Checkpoints: %v, %v", cps, err)
		}
		if err := cpr.RemoveCheckpoint(ctx, cp.Name); err != nil {
			t.Errorf("removing a checkpoint already gone: %v", err)
		}
		if h.Commands != nil {
			h.Commands()
		}
	})

	t.Run("destroy", func(t *testing.T) {
		live := w.observe()
		p := reconcile.PlanDestroy([]string{w.name}, live, w.records, caps, reconcile.Options{})
		if err := p.Prepare(d, live); err != nil {
			t.Fatal(err)
		}
		w.apply(p, func() *reconcile.Changes {
			live := w.observe()
			return reconcile.PlanDestroy([]string{w.name}, live, w.records, caps, reconcile.Options{})
		})
		if l := w.observe()[w.name]; l != nil && l.Exists {
			t.Error("the sandbox is still observed after destroy")
		}
		if h.Leftovers != nil {
			if left := h.Leftovers(t, w.name); len(left) > 0 {
				t.Errorf("destroy left %s", strings.Join(left, ", "))
			}
		}
	})
}

// stripAllow returns the spec's body without changing it: the harness's
// Spec builds bodies; the env change keeps the allow-list of the previous
// step.
func stripAllow(sp *spec.Spec) string {
	allow := slices.Clone(sp.Network.Allow)
	return fmt.Sprintf("env: {NODE_ENV: %s}\nnetwork:\n  agentHosts: false\n  allow: [%s]\n", sp.Env["NODE_ENV"], strings.Join(allow, ", "))
}

// ArgvLog is a Harness's Commands for a fake of internal/fakecli, which
// logs each invocation's arguments as one JSON array per line at path:
// each new line, after program, quoted as the runner quotes commands.
func ArgvLog(t *testing.T, path string, program ...string) func() []string {
	seen := 0
	return func() []string {
		b, err := os.ReadFile(path)
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		if len(lines) == 1 && lines[0] == "" {
			lines = nil
		}
		var cmds []string
		for _, l := range lines[min(seen, len(lines)):] {
			var argv []string
			if err := json.Unmarshal([]byte(l), &argv); err != nil {
				t.Fatalf("argv log %s: %v", path, err)
			}
			cmds = append(cmds, runner.Quote(append(slices.Clone(program), argv...)))
		}
		seen = len(lines)
		return cmds
	}
}
