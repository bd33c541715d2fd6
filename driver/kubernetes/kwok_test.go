package kubernetes

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/sbxhq/sbx/driver/runner"
	"github.com/sbxhq/sbx/internal/k8stest"
	"github.com/sbxhq/sbx/reconcile"
	"github.com/sbxhq/sbx/state"
)

// fleet is n sandboxes on the kwok fake node, made as the driver makes
// them, in a namespace of the test's own, with the sandbox files sbx
// plans them from. kwok makes their pods Running and Ready without
// running anything, so hundreds fit on this machine; what sbx reads of
// them comes from the real API server and the real agent-sandbox
// controller.
type fleet struct {
	*k8stest.Env
	ns     string
	binary string   // the run's static sbx
	n      int      // how many sandboxes
	files  []string // sbx's -f arguments
	env    []string // the sbx binary's environment
	log    string   // the kubectl wrapper's log: its -v=6 request lines
}

// newFleet makes the sandboxes: for each, its file, the record a create
// would carry (the plan's own), the driver's objects (proxy pod,
// NetworkPolicies, Sandbox) bound to the fake node, applied in one
// server-side apply, then waits until every Sandbox is Ready. The
// namespace, and with it everything in it, goes when the test ends.
func newFleet(tb testing.TB, n int) *fleet {
	tb.Helper()
	e := k8stest.Cluster(tb)
	node := e.Kwok(tb)
	binary, helper := k8stest.Sbx(tb, e, "driver/kubernetes", buildHelper)
	f := &fleet{Env: e, ns: e.Namespace(tb), binary: binary, n: n}
	// Before the namespace goes (cleanups run last first): its deletion
	// then waits for nothing but the namespace. One collection delete per
	// kind (kubectl delete --all deletes object by object: half a minute
	// for 2000, and --wait waits for each in turn).
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(tb.Context()), 5*time.Minute)
		defer cancel()
		start := time.Now()
		for _, kind := range []string{"/apis/agents.x-k8s.io/v1beta1/namespaces/%s/sandboxes", "/api/v1/namespaces/%s/pods",
			"/apis/networking.k8s.io/v1/namespaces/%s/networkpolicies", "/api/v1/namespaces/%s/persistentvolumeclaims"} {
			del := f.Command(ctx, "delete", "--raw", fmt.Sprintf(kind, f.ns))
			if out, err := del.CombinedOutput(); err != nil {
				tb.Errorf("removing the fleet: %v\n%.2000s", err, out)
			}
		}
		tb.Logf("fleet deleted in %v", time.Since(start).Round(time.Millisecond))
	})
	made := time.Now()
	dir := tb.TempDir()
	stateDir := filepath.Join(dir, "state")
	store, err := reconcile.OpenStore(state.Dir(stateDir))
	if err != nil {
		tb.Fatal(err)
	}
	key, err := store.Key()
	if err != nil {
		tb.Fatal(err)
	}
	// kubectl with -v=6 logs each request it makes ("Response" verb=…
	// url=…) on stderr; the wrapper keeps those apart from what sbx reads.
	f.log = filepath.Join(dir, "kubectl.log")
	wrapper := filepath.Join(dir, "kubectl")
	script := fmt.Sprintf("#!/bin/sh\n{ echo exec; for a in \"$@\"; do echo \"arg $a\"; done; } >>%q\nexec %q -v=6 \"$@\" 2>>%q\n", f.log, e.KubectlPath(), f.log)
	if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
		tb.Fatal(err)
	}
	f.env = append(os.Environ(), "KUBECONFIG="+e.Kubeconfig, "SBX_KUBECTL="+wrapper, "SBX_K8S_HELPER_IMAGE="+helper,
		"SBX_STATE_DIR="+stateDir, "SBX_DOCKER_SBX=", "HOME="+dir, "NO_COLOR=1")

	// The cluster's kubeconfig, whatever the environment says (as the
	// e2e tests' driver).
	d := New(Options{Runner: &runner.Runner{Env: append(os.Environ(), "KUBECONFIG="+e.Kubeconfig)}, Kubectl: e.KubectlPath(), Binary: binary, HelperImage: helper, Namespace: f.ns})
	// The node addresses every proxy refuses, listed once.
	nodes, err := d.nodeAddrs(tb.Context(), place{namespace: f.ns})
	if err != nil {
		tb.Fatal(err)
	}
	me, err := user.Current()
	if err != nil {
		tb.Fatal(err)
	}
	var objs []object
	for i := range n {
		sd := filepath.Join(dir, fmt.Sprintf("s%d", i))
		if err := os.MkdirAll(filepath.Join(sd, "ws"), 0o755); err != nil {
			tb.Fatal(err)
		}
		file := filepath.Join(sd, "sandbox.yaml")
		doc := fmt.Sprintf("version: 1\nname: kw-%d\nagent: shell\ndriver: kubernetes\nworkspace: ws\ntemplate: %s\nnetwork: {allow: [example.com]}\nkubernetes: {namespace: %s}\n",
			i, k8stest.BusyboxImage, f.ns)
		if err := os.WriteFile(file, []byte(doc), 0o644); err != nil {
			tb.Fatal(err)
		}
		f.files = append(f.files, "-f", file)
		sp := k8stest.LoadSpec(tb, file)
		hash, err := d.BuildHash(sp)
		if err != nil {
			tb.Fatal(err)
		}
		des, err := reconcile.NewDesired(sp, key, hash)
		if err != nil {
			tb.Fatal(err)
		}
		// Whose it is, as sbx plan in that workspace will say: a record
		// without an owner is one an earlier sbx made, which plan adopts.
		des.Owner = reconcile.Owner{Workspace: filepath.Clean(sp.Dir), User: me.Username}
		p := reconcile.Plan([]reconcile.Desired{des}, nil, nil, d.Caps(), reconcile.Options{})
		if err := p.Err(); err != nil {
			tb.Fatal(err)
		}
		var rec *reconcile.Record
		for _, s := range p.Sandboxes[0].Steps {
			if s.Kind == reconcile.StepCreate {
				rec = s.Record
			}
		}
		if rec == nil {
			tb.Fatalf("the plan of a new sandbox has no create step with a record: %+v", p.Sandboxes[0].Steps)
		}
		made, err := newSandboxObjects(sp, place{namespace: f.ns}, rec, helper, TemplateImage(sp, hash), nodes, "")
		if err != nil {
			tb.Fatal(err)
		}
		for i := range made {
			bindToNode(tb, &made[i], node)
		}
		objs = append(objs, made...)
	}
	start := time.Now()
	f.apply(tb, objs)
	applied := time.Now()
	f.waitReady(tb)
	tb.Logf("%d sandboxes: made in %v, applied in %v, Ready %v later", n, start.Sub(made).Round(time.Millisecond), applied.Sub(start).Round(time.Millisecond), time.Since(applied).Round(time.Millisecond))
	return f
}

// applyParts is how many kubectl applies make the fleet's objects
// together. kubectl applies a list object by object, each a round trip
// to the API server; on two busy cores one apply of 1,300 objects took
// over three minutes, while four share the server's time.
const applyParts = 4

// apply applies objs in applyParts server-side applies at once.
func (f *fleet) apply(tb testing.TB, objs []object) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(tb.Context(), 5*time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	errs := make([]error, applyParts)
	for i := range applyParts {
		part := objs[len(objs)*i/applyParts : len(objs)*(i+1)/applyParts]
		doc, err := applyList(part...)
		if err != nil {
			tb.Fatal(err)
		}
		wg.Go(func() {
			cmd := f.Command(ctx, "apply", "--server-side", "--field-manager=sbx", "-f", "-")
			cmd.Stdin = bytes.NewReader(doc)
			if out, err := cmd.CombinedOutput(); err != nil {
				errs[i] = fmt.Errorf("kubectl apply of %d objects: %v\n%.2000s", len(part), err, out)
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		tb.Fatal(err)
	}
}

// waitReady waits until every Sandbox of the fleet is Ready, as a watch
// of them says (kubectl wait waits object by object: over a minute for
// 500 that are Ready already). The controller makes each Sandbox's pod,
// kwok makes the pods Ready: a minute or two for 500 on two cores.
//
// It gives up a minute before the test binary's deadline (go test
// -timeout), so that a fleet that never gets Ready fails the test with
// what the cluster says rather than panicking the whole package.
func (f *fleet) waitReady(tb testing.TB) {
	tb.Helper()
	limit := 14 * time.Minute
	if d, ok := tb.(interface{ Deadline() (time.Time, bool) }); ok {
		if end, ok := d.Deadline(); ok {
			limit = min(limit, time.Until(end)-time.Minute)
		}
	}
	if limit <= 0 {
		tb.Fatalf("no time left before the test deadline to wait for the Sandboxes")
	}
	ctx, cancel := context.WithTimeout(tb.Context(), limit)
	defer cancel()
	// Each line is a Sandbox as listed, then as it changes.
	watch := f.Command(ctx, "-n", f.ns, "get", "sandboxes.agents.x-k8s.io", "--watch", "-o",
		`jsonpath={.metadata.name} {.status.conditions[?(@.type=="Ready")].status}{"\n"}`)
	var stderr bytes.Buffer
	watch.Stderr = &stderr
	out, err := watch.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	if err := watch.Start(); err != nil {
		tb.Fatal(err)
	}
	ready := map[string]bool{}
	count := 0
	sc := bufio.NewScanner(out)
	for count < f.n && sc.Scan() {
		name, status, _ := strings.Cut(sc.Text(), " ")
		if was, now := ready[name], status == "True"; was != now {
			ready[name] = now
			if now {
				count++
			} else {
				count--
			}
		}
	}
	cancel()
	werr := watch.Wait()
	if count == f.n {
		return
	}
	node := f.Kubectl(tb, "get", "nodes", "-o", `jsonpath={range .items[*]}{.metadata.name} Ready={.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}`)
	tb.Fatalf("waiting for the Sandboxes on the fake node: %v (%v)\n%.2000s\n%d of %d Ready; nodes:\n%s", werr, sc.Err(), stderr.String(), count, f.n, node)
}

// notReady counts the fleet's Sandboxes whose Ready condition is not True
// now, as the cluster says.
func (f *fleet) notReady(tb testing.TB) int {
	tb.Helper()
	out := f.Kubectl(tb, "-n", f.ns, "get", "sandboxes.agents.x-k8s.io", "-o", `jsonpath={range .items[*]}{.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}`)
	n := 0
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if l != "True" {
			n++
		}
	}
	return n
}

// bindToNode puts a pod, or a Sandbox's pod template, on the fake node
// (and tolerates its taint), so the scheduler is not involved and kwok
// plays its kubelet.
func bindToNode(tb testing.TB, o *object, node string) {
	tb.Helper()
	var s map[string]any
	if err := json.Unmarshal(o.Spec, &s); err != nil {
		tb.Fatal(err)
	}
	ps := s
	switch o.Kind {
	case "Pod":
	case "Sandbox":
		ps = s["podTemplate"].(map[string]any)["spec"].(map[string]any)
	default:
		return
	}
	ps["nodeName"] = node
	ps["tolerations"] = []any{map[string]any{"key": "kwok.x-k8s.io/node", "operator": "Exists", "effect": "NoSchedule"}}
	b, err := json.Marshal(s)
	if err != nil {
		tb.Fatal(err)
	}
	o.Spec = b
}

// sbx runs the sbx binary with args; it returns its stdout and exit code.
func (f *fleet) sbx(tb testing.TB, args ...string) (string, int) {
	tb.Helper()
	cmd := exec.CommandContext(tb.Context(), f.binary, args...)
	cmd.Env = f.env
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	if err != nil && (cmd.ProcessState == nil || cmd.ProcessState.ExitCode() < 0) {
		tb.Fatalf("sbx %s: %v\n%s", args[0], err, errOut.String())
	}
	code := cmd.ProcessState.ExitCode()
	if errOut.Len() > 0 && code != 0 {
		tb.Logf("sbx %s stderr:\n%s", args[0], errOut.String())
	}
	return out.String(), code
}

// responseLine is one request in kubectl's -v=6 log (client-go's
// round_trippers: `"Response" verb="GET" url="…" status="200 OK"`).
var responseLine = regexp.MustCompile(`"Response" verb="([A-Z]+)" url="([^"]+)" status="([^"]*)"`)

// requests reads the wrapper's log since the last call, and clears it:
// the requests to the namespace (verb, path, status, and the paging
// parameters of a list that asks in pages; discovery, outside any
// namespace, left out) and the kubectl commands run (their arguments).
func (f *fleet) requests(tb testing.TB) (reqs []string, cmds [][]string) {
	tb.Helper()
	b, err := os.ReadFile(f.log)
	if err != nil && !os.IsNotExist(err) {
		tb.Fatal(err)
	}
	if err := os.WriteFile(f.log, nil, 0o644); err != nil {
		tb.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if line == "exec" {
			cmds = append(cmds, []string{})
			continue
		}
		if a, ok := strings.CutPrefix(line, "arg "); ok && len(cmds) > 0 {
			cmds[len(cmds)-1] = append(cmds[len(cmds)-1], a)
			continue
		}
		m := responseLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		u, err := url.Parse(m[2])
		if err != nil {
			tb.Fatalf("kubectl logged a request to %q: %v", m[2], err)
		}
		if strings.Contains(u.Path, "/namespaces/"+f.ns+"/") {
			req := m[1] + " " + path.Base(u.Path) + " " + m[3]
			// A list in pages (kubectl's --chunk-size: limit, then
			// continue) says so, however few objects there are.
			for _, p := range []string{"limit", "continue"} {
				if u.Query().Has(p) {
					req += " " + p + "=" + u.Query().Get(p)
				}
			}
			reqs = append(reqs, req)
		} else if strings.Contains(u.Path, "/namespaces/") {
			tb.Errorf("a request outside the test's namespace: %s %s", m[1], m[2])
		}
	}
	sort.Strings(reqs)
	return reqs, cmds
}

// oneListPerKind is what observing a namespace may ask the API server:
// one list of each kind the driver reads, however many sandboxes.
var oneListPerKind = []string{
	"GET networkpolicies 200 OK",
	"GET pods 200 OK",
	"GET sandboxes 200 OK",
	"GET sandboxwarmpools 200 OK",
}

// TestKwokFleet: over a fleet of sandboxes on kwok's fake node, sbx plan
// is a no-op and sbx status reports every sandbox running and in sync,
// each asking the API server one list per kind, in one page, and nothing
// per sandbox. A listing in pages (kubectl's default --chunk-size of 500)
// shows in the requests' parameters whatever the fleet's size, so the
// fleet is only as large as "nothing per sandbox" needs to show; making
// and removing a sandbox costs the API server about a third of a second,
// and fleets of 500 and more are BenchmarkKwokPlan's.
func TestKwokFleet(t *testing.T) {
	t.Parallel()
	const n = 30
	f := newFleet(t, n)
	f.requests(t) // what making the fleet logged

	start := time.Now()
	out, code := f.sbx(t, append([]string{"plan", "--detailed-exitcode"}, f.files...)...)
	if code != 0 {
		t.Fatalf("sbx plan over %d unchanged sandboxes: exit %d, want 0 (no changes):\n%.3000s", n, code, out)
	}
	t.Logf("sbx plan: %v", time.Since(start).Round(time.Millisecond))
	reqs, cmds := f.requests(t)
	if diff := cmp.Diff(oneListPerKind, reqs); diff != "" {
		t.Errorf("the API requests of sbx plan (-want +got):\n%s\nkubectl commands: %q", diff, cmds)
	}

	// sbx status must say what the cluster says: every sandbox running.
	// (kwok's node no longer flaps here: test/kubernetes/cluster turns
	// the API server's WatchList off. Should it lose its lease again, the
	// failure says how many Sandboxes the cluster itself has not Ready.)
	f.waitReady(t)
	f.requests(t)
	start = time.Now()
	out, code = f.sbx(t, append([]string{"status", "--json"}, f.files...)...)
	if code != 0 {
		t.Fatalf("sbx status: exit %d\n%.3000s", code, out)
	}
	t.Logf("sbx status: %v", time.Since(start).Round(time.Millisecond))
	want := map[string]int{"exists=true status=running state=in-sync": n}
	if states := statusStates(t, out); !cmp.Equal(want, states) {
		t.Fatalf("sbx status over %d sandboxes (-want +got), with %d not Ready per the cluster:\n%s", n, f.notReady(t), cmp.Diff(want, states))
	}
	reqs, cmds = f.requests(t)
	if diff := cmp.Diff(oneListPerKind, reqs); diff != "" {
		t.Errorf("the API requests of sbx status (-want +got):\n%s\nkubectl commands: %q", diff, cmds)
	}
}

// statusStates counts sbx status --json's sandboxes by what it says of
// them (docs/status-json.md; session.StatusReport, which this package
// cannot import: session imports the drivers). Errors fail the test.
func statusStates(t *testing.T, out string) map[string]int {
	t.Helper()
	var rep struct {
		Sandboxes []struct {
			Exists bool   `json:"exists"`
			Status string `json:"status"`
			State  string `json:"state"`
		} `json:"sandboxes"`
		Errors []string `json:"errors"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("sbx status --json: %v\n%.3000s", err, out)
	}
	if len(rep.Errors) > 0 {
		t.Errorf("sbx status errors: %q", rep.Errors)
	}
	states := map[string]int{}
	for _, s := range rep.Sandboxes {
		states[fmt.Sprintf("exists=%v status=%s state=%s", s.Exists, s.Status, s.State)]++
	}
	return states
}

// BenchmarkKwokPlan times a no-op sbx plan of 1, 50 and 500 sandboxes on
// the fake node (the whole sbx process), and the one kubectl command that
// plan runs against the cluster, alone: the difference is sbx's own time
// beyond the API calls (BENCHMARKS.md).
func BenchmarkKwokPlan(b *testing.B) {
	for _, n := range []int{1, 50, 500} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			f := newFleet(b, n)
			f.requests(b)
			if out, code := f.sbx(b, append([]string{"plan", "--detailed-exitcode"}, f.files...)...); code != 0 {
				b.Fatalf("sbx plan: exit %d\n%.3000s", code, out)
			}
			// The command plan ran against the cluster, as the wrapper
			// logged it.
			reqs, cmds := f.requests(b)
			if diff := cmp.Diff(oneListPerKind, reqs); diff != "" {
				b.Fatalf("the API requests of sbx plan (-want +got):\n%s", diff)
			}
			var list []string
			for _, c := range cmds {
				if len(c) > 0 && slices.Contains(c, "get") {
					list = c
				}
			}
			if list == nil {
				b.Fatalf("no kubectl get among %q", cmds)
			}
			// Timed with the real kubectl, not the logging wrapper.
			f.env = append(f.env, "SBX_KUBECTL="+f.KubectlPath())
			// own-ms/op is sbx's own time: the whole process less the
			// kubectl calls it made, as its trace timed them.
			trace := filepath.Join(b.TempDir(), "trace")
			b.Run("sbx-plan", func(b *testing.B) {
				env := f.env
				f.env = append(env, "SBX_TRACE="+trace)
				defer func() { f.env = env }()
				var own time.Duration
				for b.Loop() {
					start := time.Now()
					if out, code := f.sbx(b, append([]string{"plan", "--detailed-exitcode"}, f.files...)...); code != 0 {
						b.Fatalf("sbx plan: exit %d\n%.3000s", code, out)
					}
					own += time.Since(start) - tracedCalls(b, trace)
				}
				b.ReportMetric(float64(own.Microseconds())/1000/float64(b.N), "own-ms/op")
			})
			b.Run("kubectl-get", func(b *testing.B) {
				for b.Loop() {
					cmd := exec.CommandContext(b.Context(), f.KubectlPath(), list...)
					cmd.Env = f.env
					if out, err := cmd.CombinedOutput(); err != nil {
						b.Fatalf("%s: %v\n%.2000s", strings.Join(list, " "), err, out)
					}
				}
			})
		})
	}
}

// traceEnd is the line ending each call in an SBX_TRACE file (runner's
// trace): its exit and its duration.
var traceEnd = regexp.MustCompile(`(?m)^# (?:exit [-0-9]+|[a-z ]+) \(([0-9.]+[a-zµ]+)\)$`)

// tracedCalls is the time the calls in an SBX_TRACE file took, and
// removes the file.
func tracedCalls(tb testing.TB, path string) time.Duration {
	tb.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	if err := os.Remove(path); err != nil {
		tb.Fatal(err)
	}
	var sum time.Duration
	ends := traceEnd.FindAllStringSubmatch(string(b), -1)
	if len(ends) == 0 || len(ends) != strings.Count(string(b), "\n$ ")+1 {
		tb.Fatalf("the trace's calls and their ends do not pair up:\n%.3000s", b)
	}
	for _, m := range ends {
		d, err := time.ParseDuration(m[1])
		if err != nil {
			tb.Fatalf("trace: %q: %v", m[0], err)
		}
		sum += d
	}
	return sum
}
