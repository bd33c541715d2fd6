package kubernetes

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// The testdata/wait files were recorded on the test cluster (Kubernetes
// v1.35.4, kubectl v1.35.4) in a namespace of their own, managedFields
// left out: pods.json (kubectl get pods -o json) holds "pull", whose image
// 127.0.0.1:1/sbx-none:x cannot be pulled (ImagePullBackOff), "big",
// which requests 4Ti of memory (Unschedulable: Insufficient memory), and
// "usesclaim", whose claim has no volume; pvc.json is that claim, of a
// StorageClass that does not exist; pull2.json is "pull" made again (a
// new UID) with another image; events-stale.json is the namespace's
// Warning events after that, the first pull pod's included; nodes.json
// is the cluster's nodes (a real one and kwok's tainted fake one).

func readJSON(t *testing.T, name string, v any) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "wait", name))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
}

func recordedPods(t *testing.T) map[string]*waitPod {
	t.Helper()
	var l struct{ Items []*waitPod }
	readJSON(t, "pods.json", &l)
	pods := map[string]*waitPod{}
	for _, p := range l.Items {
		pods[p.Metadata.Name] = p
	}
	return pods
}

func recordedEvents(t *testing.T) []event {
	t.Helper()
	var l struct{ Items []event }
	readJSON(t, "events-stale.json", &l)
	return l.Items
}

func recordedNodes(t *testing.T) []nodeInfo {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "wait", "nodes.json"))
	if err != nil {
		t.Fatal(err)
	}
	ns, err := nodeInfos(b)
	if err != nil {
		t.Fatal(err)
	}
	return ns
}

// TestCurrentWarnings: of the namespace's Warning events, only those of
// the current objects (by UID) are shown: not the first "pull" pod's,
// whose name the current one has.
func TestCurrentWarnings(t *testing.T) {
	var cur waitPod
	readJSON(t, "pull2.json", &cur)
	events := recordedEvents(t)
	got := currentWarnings(events, map[string]bool{cur.Metadata.UID: true})
	var heads []string
	for _, l := range got {
		if strings.Contains(l, "sbx-none") || strings.Contains(l, "cd403e4c") {
			t.Errorf("a stale event of the earlier pod: %s", l)
		}
		f := strings.SplitN(l, ": ", 3)
		heads = append(heads, f[0]+": "+f[1])
	}
	want := []string{"Pod pull: MissingClusterDNS", "Pod pull: Failed", "Pod pull: Failed", "Pod pull: Failed"}
	if diff := cmp.Diff(want, heads); diff != "" {
		t.Errorf("warnings (-want +got):\n%s\n%s", diff, strings.Join(got, "\n"))
	}
	for _, l := range got[1:] {
		if !strings.Contains(l, "sbx-other:y") && !strings.Contains(l, "ErrImagePull") && !strings.Contains(l, "ImagePullBackOff") {
			t.Errorf("not the current pod's pull: %s", l)
		}
	}
	// The same events, all of the earlier pod's: none of the current's.
	if got := currentWarnings(events, map[string]bool{"cd403e4c-8aee-4402-a249-e87787068378": true}); len(got) != 4 || strings.Contains(strings.Join(got, "\n"), "sbx-other") {
		t.Errorf("the earlier pod's warnings: %q", got)
	}
	if got := currentWarnings(events, map[string]bool{}); len(got) != 0 {
		t.Errorf("no current objects, got %q", got)
	}
}

func TestTerminal(t *testing.T) {
	pods := recordedPods(t)
	events := recordedEvents(t)
	var claims struct{ Items []*waitClaim }
	readJSON(t, "pvc.json", &claims)
	nodes := recordedNodes(t)
	bigger := append([]nodeInfo{}, nodes...)
	bigger = append(bigger, nodeInfo{name: "huge", allocatable: map[string]string{"cpu": "64", "memory": "8Ti"}})
	pullOnce := *pods["pull"]
	pullOnce.Status.ContainerStatuses = append([]containerStatus{}, pullOnce.Status.ContainerStatuses...)
	w := *pullOnce.Status.ContainerStatuses[0].State.Waiting
	w.Reason = "ErrImagePull"
	pullOnce.Status.ContainerStatuses[0].State.Waiting = &w
	var notFound *waitPod // the first ErrImagePull of an image the registry does not have
	readJSON(t, "pull-notfound.json", &notFound)
	var nf struct{ Items []event } // its Warning events: the kubelet's Failed among them
	readJSON(t, "events-notfound.json", &nf)
	notFoundEvents := nf.Items
	// The same pod before its status says so (a pod with init containers
	// shows the failure at the kubelet's next sync, after its back-off).
	notFoundInit := *notFound
	notFoundInit.Status.ContainerStatuses = append([]containerStatus{}, notFound.Status.ContainerStatuses...)
	init := *notFoundInit.Status.ContainerStatuses[0].State.Waiting
	init.Reason, init.Message = "PodInitializing", ""
	notFoundInit.Status.ContainerStatuses[0].State.Waiting = &init
	var otherPodEvents, refusedEvents []event
	for _, e := range notFoundEvents {
		other := e
		other.InvolvedObject.UID = "another-pod"
		otherPodEvents = append(otherPodEvents, other)
		refused := e
		refused.Message = strings.Replace(e.Message, "127.0.0.1:34389/sbx-missing-rec:none: not found", `failed to do request: Head "http://127.0.0.1:34389/v2/sbx-missing-rec/manifests/none": dial tcp 127.0.0.1:34389: connect: connection refused`, 1)
		refusedEvents = append(refusedEvents, refused)
	}
	scaleUp := event{Type: "Normal", Reason: "TriggeredScaleUp", Message: "pod triggered scale-up"}
	scaleUp.InvolvedObject.UID = pods["big"].Metadata.UID
	noScaleUp := scaleUp
	noScaleUp.Reason = "NotTriggerScaleUp"
	for _, tc := range []struct {
		name      string
		pod       *waitPod
		claim     *waitClaim
		events    []event
		nodes     []nodeInfo
		graceOver bool
		// reason is the terminal cause's, "" for none; needNodes that
		// the nodes must be read first.
		reason, object, msg string
		needNodes           bool
	}{
		{name: "image pull backing off", pod: pods["pull"], reason: "ImagePullBackOff", object: "pod/s", msg: `Back-off pulling image "127.0.0.1:1/sbx-none:x": ErrImagePull`},
		{name: "first pull failure", pod: &pullOnce},
		{name: "image not found", pod: notFound, reason: "ErrImagePull", object: "pod/s", msg: `container agent: rpc error: code = NotFound desc = failed to pull and unpack image "127.0.0.1:34389/sbx-missing-rec:none": failed to resolve reference "127.0.0.1:34389/sbx-missing-rec:none": 127.0.0.1:34389/sbx-missing-rec:none: not found (the registry has no such image or tag)`},
		{name: "image not found, the event first", pod: &notFoundInit, events: notFoundEvents, reason: "ErrImagePull", object: "pod/s", msg: `container agent: Failed to pull image "127.0.0.1:34389/sbx-missing-rec:none": rpc error: code = NotFound desc = failed to pull and unpack image "127.0.0.1:34389/sbx-missing-rec:none": failed to resolve reference "127.0.0.1:34389/sbx-missing-rec:none": 127.0.0.1:34389/sbx-missing-rec:none: not found (the registry has no such image or tag)`},
		{name: "image not found, another pod's event", pod: &notFoundInit, events: otherPodEvents},
		{name: "a pull refused, the event first", pod: &notFoundInit, events: refusedEvents},
		{name: "unschedulable, nodes not read", pod: pods["big"], needNodes: true},
		{name: "unschedulable, within the grace", pod: pods["big"], nodes: nodes},
		{name: "unschedulable", pod: pods["big"], nodes: nodes, graceOver: true, reason: "Unschedulable", object: "pod/s", msg: "it requests memory 4096.0Gi, more than any node it may run on offers pods at all (allocatable: localhost: 24581220Ki memory, 2 cpu); the scheduler says: 0/2 nodes are available: 1 Insufficient memory"},
		{name: "a node big enough", pod: pods["big"], nodes: bigger, graceOver: true},
		{name: "autoscaler scales up", pod: pods["big"], nodes: nodes, graceOver: true, events: []event{scaleUp}},
		{name: "autoscaler will not", pod: pods["big"], nodes: nodes, events: []event{noScaleUp}, reason: "Unschedulable", object: "pod/s", msg: "more than any node"},
		{name: "pod of an unbound claim", pod: pods["usesclaim"]},
		{name: "claim of no class", pod: pods["usesclaim"], claim: claims.Items[0], events: events, reason: "ProvisioningFailed", object: "persistentvolumeclaim/claim", msg: `storageclass.storage.k8s.io "sbx-no-such-class" not found`},
		{name: "claim without events yet", pod: pods["usesclaim"], claim: claims.Items[0]},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newSeen("s")
			// The recorded pod stands for the sandbox's pod.
			p := *tc.pod
			s.pods["s"] = &p
			s.claim = tc.claim
			s.events = tc.events
			s.nodes = tc.nodes
			s.graceOver = tc.graceOver
			err, needNodes := s.terminal([]string{"pod/s"})
			if needNodes != tc.needNodes {
				t.Errorf("needNodes %v, want %v", needNodes, tc.needNodes)
			}
			if tc.reason == "" {
				if err != nil {
					t.Errorf("terminal: %v, want none", err)
				}
				return
			}
			var nr *NotReadyError
			if !errors.As(err, &nr) {
				t.Fatalf("terminal: %v, want a *NotReadyError", err)
			}
			if nr.Reason != tc.reason || nr.Object != tc.object || !strings.Contains(nr.Message, tc.msg) {
				t.Errorf("got %q %q %q, want %q %q containing %q", nr.Reason, nr.Object, nr.Message, tc.reason, tc.object, tc.msg)
			}
		})
	}
}

// TestTerminalHostile: what the sandbox writes into its pod's status (its
// container's termination message) is not in the error, and what kubelet
// reports is shown on one line without control characters.
func TestTerminalHostile(t *testing.T) {
	var p waitPod
	if err := json.Unmarshal([]byte(`{"kind":"Pod","metadata":{"name":"s","uid":"u1"},"status":{"phase":"Running",
	"containerStatuses":[{"name":"agent","restartCount":2,"state":{"waiting":{"reason":"CrashLoopBackOff","message":"back-off 10s\n\u001b[2Jsbx: applied"}},
	"lastState":{"terminated":{"reason":"Error","exitCode":3,"message":"FORGED\nsbx: all sandboxes applied"}}}]}}`), &p); err != nil {
		t.Fatal(err)
	}
	s := newSeen("s")
	s.pods["s"] = &p
	p.Status.ContainerStatuses[0].RestartCount = 1
	if err, _ := s.terminal([]string{"pod/s"}); err != nil {
		t.Errorf("terminal after one restart: %v", err)
	}
	p.Status.ContainerStatuses[0].RestartCount = 2
	err, _ := s.terminal([]string{"pod/s"})
	if err == nil {
		t.Fatal("a crash-looping pod is not terminal")
	}
	msg := err.Error()
	if strings.Contains(msg, "FORGED") || strings.Contains(msg, "\n") || strings.Contains(msg, "\x1b") {
		t.Errorf("the error carries what the sandbox wrote, or control characters: %q", msg)
	}
	if !strings.Contains(msg, "container agent keeps exiting (last: Error, exit code 3)") {
		t.Errorf("the error does not say how the container exited: %q", msg)
	}
}

func TestReady(t *testing.T) {
	pods := recordedPods(t)
	ready := *pods["pull"]
	ready.Status.Conditions = []condition{{Type: "Ready", Status: "True"}}
	s := newSeen("s")
	s.pods["s.egress"] = &ready
	if !s.ready([]string{"pod/s.egress"}) {
		t.Error("a Ready pod is not ready")
	}
	if s.ready([]string{"pod/s.egress", "sandboxes.agents.x-k8s.io/s"}) {
		t.Error("ready without the Sandbox")
	}
	s.sandbox = &waitSandbox{Kind: "Sandbox"}
	s.sandbox.Status.Conditions = []condition{{Type: "Ready", Status: "True"}}
	if !s.ready([]string{"pod/s.egress", "sandboxes.agents.x-k8s.io/s"}) {
		t.Error("not ready with both Ready")
	}
	// A DELETED event of the pod takes it away; one of an earlier pod
	// of the name (another UID) does not.
	old, _ := json.Marshal(map[string]any{"kind": "Pod", "metadata": map[string]any{"name": "s.egress", "uid": "old"}})
	s.apply(update{kind: "pods", Type: "DELETED", Obj: old})
	if !s.ready([]string{"pod/s.egress"}) {
		t.Error("an earlier pod's deletion took the current one away")
	}
	cur, _ := json.Marshal(map[string]any{"kind": "Pod", "metadata": map[string]any{"name": "s.egress", "uid": ready.Metadata.UID}})
	s.apply(update{kind: "pods", Type: "DELETED", Obj: cur})
	if s.ready([]string{"pod/s.egress"}) {
		t.Error("ready after its pod was deleted")
	}
}

func TestParseNodes(t *testing.T) {
	got := recordedNodes(t)
	if len(got) != 2 || got[0].name != "kwok-node-0" || len(got[0].taints) != 1 || got[0].taints[0].Key != "kwok.x-k8s.io/node" || got[1].allocatable["memory"] != "24581220Ki" {
		t.Errorf("nodes: %+v", got)
	}
	for _, bad := range []string{`{"kind":"Node"}`, `{"kind":"List","items":[{"kind":"Pod"}]}`, `[`} {
		if _, err := nodeInfos([]byte(bad)); err == nil {
			t.Errorf("nodeInfos(%s): no error", bad)
		}
	}
}

func TestTolerates(t *testing.T) {
	fake := []toleration{{Key: "kwok.x-k8s.io/node", Value: "fake", Effect: "NoSchedule"}}
	for _, tc := range []struct {
		name   string
		tols   []toleration
		taints []toleration
		want   bool
	}{
		{"no taints", nil, nil, true},
		{"untolerated", nil, fake, false},
		{"tolerated by key and value", []toleration{{Key: "kwok.x-k8s.io/node", Operator: "Equal", Value: "fake"}}, fake, true},
		{"tolerated by Exists", []toleration{{Operator: "Exists"}}, fake, true},
		{"another effect", []toleration{{Key: "kwok.x-k8s.io/node", Operator: "Exists", Effect: "NoExecute"}}, fake, false},
		{"lifecycle taints clear", nil, []toleration{{Key: "node.kubernetes.io/not-ready", Effect: "NoSchedule"}}, true},
		{"PreferNoSchedule does not keep off", nil, []toleration{{Key: "x", Effect: "PreferNoSchedule"}}, true},
	} {
		if got := tolerates(tc.tols, tc.taints); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestQuantity(t *testing.T) {
	for q, want := range map[string]float64{"250m": 0.25, "2": 2, "1k": 1000, "512Mi": 512 << 20, "24581220Ki": 24581220 << 10, "4Ti": 4 << 40, "1G": 1e9, "0.5": 0.5} {
		if got, err := quantity(q); err != nil || got != want {
			t.Errorf("quantity(%q) = %v, %v; want %v", q, got, err, want)
		}
	}
	for _, q := range []string{"", "x", "-1", "1Q"} {
		if _, err := quantity(q); err == nil {
			t.Errorf("quantity(%q): no error", q)
		}
	}
}
