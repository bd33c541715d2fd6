package kubernetes

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/sbxhq/sbx/driver"
	"github.com/sbxhq/sbx/driver/runner"
	"github.com/sbxhq/sbx/internal/untrusted"
)

// waitFor bounds each wait for a pod or Sandbox to be Ready; waitTimeout
// is the same bound for kubectl's own waits (deletes).
const (
	waitFor     = 180 * time.Second
	waitTimeout = "180s"
)

// scaleUpGrace is how long a pod whose requests no node can ever offer
// is given for a node autoscaler to answer before the wait fails (see
// unschedulable).
const scaleUpGrace = 10 * time.Second

// NotReadyError is a wait for Ready that ended without it: on a cause the
// cluster reported that will not clear by itself (Reason set), or at the
// time limit (Reason "", Seen says how each object stood).
type NotReadyError struct {
	Sandbox string
	// Object is what the cause is about ("pod/NAME",
	// "persistentvolumeclaim/NAME").
	Object string
	// Reason is the cluster's word for the cause (ImagePullBackOff,
	// ErrImageNeverPull, InvalidImageName, CreateContainerConfigError,
	// CrashLoopBackOff, Unschedulable, ProvisioningFailed, FailedBinding,
	// Failed), "" after the time limit.
	Reason  string
	Message string
	// Seen is, after the time limit, how each awaited object stood.
	Seen []string
	// Warnings are the Warning events of the current objects only.
	Warnings []string
	// After is the time limit the wait had (waitLimit).
	After time.Duration
}

func (e *NotReadyError) Error() string {
	var b strings.Builder
	if e.Reason != "" {
		fmt.Fprintf(&b, "sandbox %q: %s: %s: %s", e.Sandbox, e.Object, e.Reason, e.Message)
	} else {
		after := e.After
		if after == 0 {
			after = waitFor
		}
		fmt.Fprintf(&b, "sandbox %q: not Ready after %s", e.Sandbox, after)
		for _, s := range e.Seen {
			b.WriteString("\n  " + s)
		}
	}
	if len(e.Warnings) > 0 {
		b.WriteString("\nthe cluster's warnings:")
		for _, w := range e.Warnings {
			b.WriteString("\n  " + w)
		}
	}
	return b.String()
}

// waitDesc is how a plan shows a wait for objs (waitReady).
func (d *Driver) waitDesc(p place, name string, objs ...string) string {
	also := "and the Warning events"
	for _, o := range objs {
		if strings.HasPrefix(o, "sandboxes.agents.x-k8s.io/") {
			also = "and its Sandbox, claim and Warning events"
		}
	}
	return runner.Quote(d.kubectl(p, "get", "pods", "-l", driver.LabelSandbox+"="+name, "--watch", "-o", "json", "--output-watch-events")) +
		"  # " + also + ", until " + strings.Join(objs, " and ") + " Ready; fails on a cause that will not clear by itself, or after " + d.waitLimit(name).String()
}

// waitLimit bounds a wait for sandbox name's objects: waitFor, and the
// longest readiness timeout of its services on top (the pod is Ready once
// each service's check passes: serviceContainer's probe).
func (d *Driver) waitLimit(name string) time.Duration {
	d.mu.Lock()
	sp := d.specs[name]
	d.mu.Unlock()
	var longest time.Duration
	if sp != nil {
		for _, s := range sp.Services {
			if s.Ready != nil {
				longest = max(longest, s.Ready.Timeout)
			}
		}
	}
	return waitFor + longest
}

// waitReady waits for objs ("pod/NAME", "sandboxes.agents.x-k8s.io/NAME",
// all the sandbox name's) to be Ready, as kubectl wait
// --for=condition=Ready would, but from watches of the sandbox's pods,
// Sandbox, workspace claim and the namespace's Warning events (kubectl
// get --watch: a list, then the changes, so nothing between the two is
// missed). It fails as soon as an object reports a cause that will not
// clear by itself (terminal), and otherwise after waitFor with what it
// saw. Either error is a *NotReadyError carrying the Warning events of
// the current objects only (by UID: not those of an earlier attempt's
// pod of the same name).
func (d *Driver) waitReady(ctx context.Context, p place, name string, objs ...string) error {
	w := &waiter{name: name, want: objs, s: newSeen(name)}
	for _, o := range objs {
		if strings.HasPrefix(o, "sandboxes.agents.x-k8s.io/") {
			w.sandbox = true
		}
	}
	watchCtx, stop := context.WithCancel(ctx)
	defer stop()
	updates := make(chan update)
	ended := make(chan watchEnd, 4)
	watches := []watchSpec{
		{kind: "pods", args: []string{"get", "pods", "-l", driver.LabelSandbox + "=" + name}},
		{kind: "events", args: []string{"get", "events", "--field-selector", "type=Warning"}, optional: true},
	}
	if w.sandbox {
		watches = append(watches,
			watchSpec{kind: "sandboxes", args: []string{"get", "sandboxes.agents.x-k8s.io", "--field-selector", "metadata.name=" + name}},
			watchSpec{kind: "claims", args: []string{"get", "persistentvolumeclaims", "--field-selector", "metadata.name=" + ClaimName(name)}})
	}
	for _, ws := range watches {
		go func() { ended <- watchEnd{ws, d.watch(watchCtx, p, ws, updates)} }()
	}
	running := len(watches)
	after := d.waitLimit(name)
	limit := time.NewTimer(after)
	defer limit.Stop()
	var grace <-chan time.Time
	for {
		select {
		case u := <-updates:
			w.s.apply(u)
		case e := <-ended:
			running--
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if e.spec.optional {
				w.s.note("the watch of Warning events ended: " + errString(e.err))
				continue
			}
			stop()
			// Drain: the others end too.
			go func() {
				for range running {
					<-ended
				}
			}()
			return fmt.Errorf("sandbox %q: watching its %s: %w", name, e.spec.kind, errOr(e.err))
		case <-grace:
			w.s.graceOver = true
		case <-limit.C:
			err := w.s.timedOut(w.want)
			err.After = after
			return err
		case <-ctx.Done():
			return ctx.Err()
		}
		if w.s.ready(w.want) {
			return nil
		}
		err, needNodes := w.s.terminal(w.want)
		if needNodes && w.s.nodes == nil && w.s.nodesErr == nil {
			// Once, when the scheduler first says a pod does not fit.
			w.s.nodes, w.s.nodesErr = d.listNodes(ctx, p)
			if grace == nil && !w.s.graceOver {
				grace = time.After(scaleUpGrace)
			}
			err, _ = w.s.terminal(w.want)
		}
		if err != nil {
			return err
		}
	}
}

type waiter struct {
	name    string
	want    []string
	sandbox bool
	s       *seen
}

func errString(err error) string {
	if err == nil {
		return "it ended"
	}
	return err.Error()
}

func errOr(err error) error {
	if err == nil {
		return errors.New("kubectl ended the watch")
	}
	return err
}

// watchSpec is one kubectl get --watch: kind names what it watches.
type watchSpec struct {
	kind     string
	args     []string
	optional bool // the wait goes on without it (Warning events)
}

type watchEnd struct {
	spec watchSpec
	err  error
}

// update is one watch event: kubectl get --watch -o json
// --output-watch-events prints each as {"type":"ADDED"|"MODIFIED"|
// "DELETED"|…,"object":{…}} (k8s.io/apimachinery/pkg/apis/meta/v1
// WatchEvent; recorded from kubectl v1.35.4 on the test cluster).
type update struct {
	kind string
	Type string          `json:"type"`
	Obj  json.RawMessage `json:"object"`
}

// watch runs one kubectl watch and sends its events until ctx ends. The
// apiserver ends a watch after its own timeout (minutes); kubectl then
// exits cleanly and the watch starts again (with a new list).
func (d *Driver) watch(ctx context.Context, p place, ws watchSpec, out chan<- update) error {
	args := append(append([]string{}, ws.args...), "--watch", "-o", "json", "--output-watch-events")
	for {
		pr, pw := io.Pipe()
		decoded := make(chan error, 1)
		go func() {
			dec := json.NewDecoder(pr)
			for {
				var u update
				if err := dec.Decode(&u); err != nil {
					if err == io.EOF {
						err = nil
					}
					io.Copy(io.Discard, pr)
					decoded <- err
					return
				}
				u.kind = ws.kind
				select {
				case out <- u:
				case <-ctx.Done():
					io.Copy(io.Discard, pr)
					decoded <- nil
					return
				}
			}
		}()
		err := d.opts.Runner.Run(ctx, runner.Cmd{Args: d.kubectl(p, args...), Stdout: pw, StreamStdout: true})
		pw.Close()
		derr := <-decoded
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err != nil {
			return err
		}
		if derr != nil {
			return fmt.Errorf("%s: %v", runner.Quote(d.kubectl(p, args...)), derr)
		}
	}
}

// The parts of the watched objects the wait reads (core/v1 Pod,
// PersistentVolumeClaim, Event, Node; agent-sandbox v1beta1 Sandbox).
type (
	objMeta struct {
		Name              string `json:"name"`
		UID               string `json:"uid"`
		DeletionTimestamp string `json:"deletionTimestamp"`
	}
	waitPod struct {
		Kind     string  `json:"kind"`
		Metadata objMeta `json:"metadata"`
		Spec     struct {
			InitContainers []podContainer    `json:"initContainers"`
			Containers     []podContainer    `json:"containers"`
			Overhead       map[string]string `json:"overhead"`
			Tolerations    []toleration      `json:"tolerations"`
		} `json:"spec"`
		Status struct {
			Phase                 string            `json:"phase"`
			Reason                string            `json:"reason"`
			Message               string            `json:"message"`
			Conditions            []condition       `json:"conditions"`
			InitContainerStatuses []containerStatus `json:"initContainerStatuses"`
			ContainerStatuses     []containerStatus `json:"containerStatuses"`
		} `json:"status"`
	}
	podContainer struct {
		Name      string    `json:"name"`
		Resources resources `json:"resources"`
	}
	toleration struct {
		Key      string `json:"key"`
		Operator string `json:"operator"`
		Value    string `json:"value"`
		Effect   string `json:"effect"`
	}
	containerStatus struct {
		Name         string `json:"name"`
		RestartCount int    `json:"restartCount"`
		State        struct {
			Waiting *struct {
				Reason  string `json:"reason"`
				Message string `json:"message"`
			} `json:"waiting"`
		} `json:"state"`
		LastState struct {
			Terminated *struct {
				Reason   string `json:"reason"`
				ExitCode int    `json:"exitCode"`
			} `json:"terminated"`
		} `json:"lastState"`
	}
	waitClaim struct {
		Kind     string  `json:"kind"`
		Metadata objMeta `json:"metadata"`
		Status   struct {
			Phase string `json:"phase"`
		} `json:"status"`
	}
	waitSandbox struct {
		Kind     string  `json:"kind"`
		Metadata objMeta `json:"metadata"`
		Status   struct {
			Conditions []condition `json:"conditions"`
		} `json:"status"`
	}
	// event is a core/v1 Event (kubectl get events -o json).
	event struct {
		Metadata       objMeta `json:"metadata"`
		Type           string  `json:"type"`
		Reason         string  `json:"reason"`
		Message        string  `json:"message"`
		Count          int     `json:"count"`
		InvolvedObject struct {
			Kind      string `json:"kind"`
			Name      string `json:"name"`
			UID       string `json:"uid"`
			FieldPath string `json:"fieldPath"`
		} `json:"involvedObject"`
	}
	nodeInfo struct {
		name          string
		allocatable   map[string]string
		unschedulable bool
		taints        []toleration // key, value, effect
	}
)

// seen is what the watches have shown so far.
type seen struct {
	name    string
	pods    map[string]*waitPod // by name, the current one
	claim   *waitClaim
	sandbox *waitSandbox
	events  []event // in the order seen, by event UID once
	evSeen  map[string]int
	notes   []string

	// nodes are read once a pod does not fit (unschedulable).
	nodes     []nodeInfo
	nodesErr  error
	graceOver bool
}

func newSeen(name string) *seen {
	return &seen{name: name, pods: map[string]*waitPod{}, evSeen: map[string]int{}}
}

func (s *seen) note(n string) { s.notes = append(s.notes, n) }

// apply takes one watch event in. Objects of other shapes are ignored:
// the watches select by name, and a wait only needs what it reads.
func (s *seen) apply(u update) {
	deleted := u.Type == "DELETED"
	switch u.kind {
	case "pods":
		var p waitPod
		if json.Unmarshal(u.Obj, &p) != nil || p.Kind != "Pod" {
			return
		}
		cur := s.pods[p.Metadata.Name]
		switch {
		case deleted:
			if cur != nil && cur.Metadata.UID == p.Metadata.UID {
				delete(s.pods, p.Metadata.Name)
			}
		case cur != nil && cur.Metadata.UID != p.Metadata.UID && p.Metadata.DeletionTimestamp != "":
			// An earlier pod of the name, going: the current one stays.
		default:
			s.pods[p.Metadata.Name] = &p
		}
	case "claims":
		var c waitClaim
		if json.Unmarshal(u.Obj, &c) != nil || c.Kind != "PersistentVolumeClaim" {
			return
		}
		if deleted {
			if s.claim != nil && s.claim.Metadata.UID == c.Metadata.UID {
				s.claim = nil
			}
			return
		}
		s.claim = &c
	case "sandboxes":
		var sb waitSandbox
		if json.Unmarshal(u.Obj, &sb) != nil || sb.Kind != "Sandbox" {
			return
		}
		if deleted {
			if s.sandbox != nil && s.sandbox.Metadata.UID == sb.Metadata.UID {
				s.sandbox = nil
			}
			return
		}
		s.sandbox = &sb
	case "events":
		var e event
		if json.Unmarshal(u.Obj, &e) != nil || deleted {
			return
		}
		if i, ok := s.evSeen[e.Metadata.UID]; ok && e.Metadata.UID != "" {
			s.events[i] = e
			return
		}
		s.evSeen[e.Metadata.UID] = len(s.events)
		s.events = append(s.events, e)
	}
}

// ready reports whether every awaited object is Ready.
func (s *seen) ready(want []string) bool {
	for _, o := range want {
		kind, n, _ := strings.Cut(o, "/")
		switch kind {
		case "pod":
			p := s.pods[n]
			if p == nil || p.Metadata.DeletionTimestamp != "" || !conditionTrue(p.Status.Conditions, "Ready") {
				return false
			}
		default:
			if s.sandbox == nil || !conditionTrue(s.sandbox.Status.Conditions, "Ready") {
				return false
			}
		}
	}
	return true
}

// uids are the current objects' UIDs: the sandbox's pods, its claim and
// its Sandbox.
func (s *seen) uids() map[string]bool {
	u := map[string]bool{}
	for _, p := range s.pods {
		u[p.Metadata.UID] = true
	}
	if s.claim != nil {
		u[s.claim.Metadata.UID] = true
	}
	if s.sandbox != nil {
		u[s.sandbox.Metadata.UID] = true
	}
	delete(u, "")
	return u
}

// currentWarnings are the Warning events of the objects with uids, one
// line each (repeats once), the last ten.
func currentWarnings(events []event, uids map[string]bool) []string {
	var lines []string
	seen := map[string]bool{}
	for _, e := range events {
		if e.Type != "Warning" || !uids[e.InvolvedObject.UID] {
			continue
		}
		line := untrusted.Line(fmt.Sprintf("%s %s: %s: %s", e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Reason, e.Message))
		if !seen[line] {
			seen[line] = true
			lines = append(lines, line)
		}
	}
	if len(lines) > 10 {
		lines = lines[len(lines)-10:]
	}
	return lines
}

// awaitedPods are the names of the pods the wait depends on: those it
// names, and the Sandbox's own when it awaits the Sandbox.
func (s *seen) awaitedPods(want []string) []string {
	var names []string
	for _, o := range want {
		kind, n, _ := strings.Cut(o, "/")
		if kind == "pod" {
			names = append(names, n)
		} else {
			names = append(names, SandboxPodName(s.name))
		}
	}
	sort.Strings(names)
	return names
}

// terminal is the cause that fails the wait now, if any. needNodes is set
// when a pod does not fit and the nodes must be read to tell whether it
// ever can.
func (s *seen) terminal(want []string) (err error, needNodes bool) {
	fail := func(obj, reason, msg string) error {
		return &NotReadyError{Sandbox: s.name, Object: obj, Reason: reason, Message: untrusted.Line(msg), Warnings: currentWarnings(s.events, s.uids())}
	}
	for _, n := range s.awaitedPods(want) {
		p := s.pods[n]
		if p == nil || p.Metadata.DeletionTimestamp != "" {
			continue
		}
		if reason, msg := podCause(p); reason != "" {
			return fail("pod/"+n, reason, msg), false
		}
		if msg := missingImage(p, s.events); msg != "" {
			return fail("pod/"+n, "ErrImagePull", msg), false
		}
		if c := conditionOf(p.Status.Conditions, "PodScheduled"); c != nil && c.Status == "False" && c.Reason == "Unschedulable" {
			if strings.Contains(c.Message, "didn't find available persistent volumes to bind") {
				// A claim waiting for its first consumer whose class has
				// no provisioner: no volume appears by itself.
				return fail("pod/"+n, "Unschedulable", c.Message), false
			}
			if strings.Contains(c.Message, "Insufficient ") {
				if s.nodes == nil && s.nodesErr == nil {
					needNodes = true
					continue
				}
				if why := s.unschedulable(p); why != "" {
					return fail("pod/"+n, "Unschedulable", why+"; the scheduler says: "+c.Message), false
				}
			}
		}
	}
	if s.claim != nil && s.claim.Status.Phase != "Bound" {
		if reason, msg := claimCause(s.claim, s.events); reason != "" {
			return fail("persistentvolumeclaim/"+s.claim.Metadata.Name, reason, msg), false
		}
	}
	return nil, needNodes
}

// podCause is a pod's state that will not clear by itself:
//   - an image the registry says it does not have (an ErrImagePull
//     whose message is containerd's for a registry's 404, imageMissing:
//     a name or tag does not fix itself; missingImage sees the first one
//     sooner, in its event);
//   - another image kubelet could not pull, once it reports backing off
//     (ImagePullBackOff, after the first ErrImagePull: a registry's
//     hiccup is retried once), or cannot pull (ErrImageNeverPull:
//     imagePullPolicy Never and not on the node; InvalidImageName);
//   - CreateContainerConfigError: the container's configuration refers to
//     what is not there; sbx makes everything its pods refer to before
//     them, so nothing will appear;
//   - CrashLoopBackOff once the container was restarted twice: it
//     exits, again, and the same command on the same volumes will exit
//     again (the exit code is shown, not the container's termination
//     message: that is the sandbox's to write);
//   - phase Failed (evicted, or a pod that does not restart).
func podCause(p *waitPod) (reason, msg string) {
	if p.Status.Phase == "Failed" {
		return "Failed", strings.TrimSpace(p.Status.Reason + " " + p.Status.Message)
	}
	for _, cs := range append(append([]containerStatus{}, p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...) {
		w := cs.State.Waiting
		if w == nil {
			continue
		}
		switch w.Reason {
		case "ErrImagePull":
			if imageMissing(w.Message) {
				return w.Reason, "container " + cs.Name + ": " + w.Message + " (the registry has no such image or tag)"
			}
		case "ImagePullBackOff", "ErrImageNeverPull", "InvalidImageName", "CreateContainerConfigError":
			return w.Reason, "container " + cs.Name + ": " + w.Message
		case "CrashLoopBackOff":
			if cs.RestartCount < 2 {
				// One exit may be a race at start: kubelet's
				// restart is awaited.
				continue
			}
			msg := "container " + cs.Name + " keeps exiting"
			if t := cs.LastState.Terminated; t != nil {
				msg += fmt.Sprintf(" (last: %s, exit code %d)", t.Reason, t.ExitCode)
			}
			return w.Reason, msg
		}
	}
	return "", ""
}

// missingImage is the kubelet's first report that a container of pod p
// has an image the registry does not have: its Warning event Failed
// ("Failed to pull image "REF": " and containerd's error, imageMissing),
// sent as the pull fails. The pod's own status says ErrImagePull only at
// the kubelet's next sync of the pod, after its back-off (10 s and more:
// seen on the test cluster for a pod with init containers, as the
// sandbox's has).
func missingImage(p *waitPod, events []event) string {
	for _, e := range events {
		if e.InvolvedObject.UID != p.Metadata.UID || e.Type != "Warning" || e.Reason != "Failed" {
			continue
		}
		if strings.HasPrefix(e.Message, "Failed to pull image ") && imageMissing(e.Message) {
			return containerOf(e.InvolvedObject.FieldPath) + e.Message + " (the registry has no such image or tag)"
		}
	}
	return ""
}

// containerOf names the container of an event's fieldPath
// ("spec.containers{agent}", "spec.initContainers{x}") as podCause does,
// "container agent: ", or "" for another path.
func containerOf(fieldPath string) string {
	_, rest, ok := strings.Cut(fieldPath, "{")
	name, _, closed := strings.Cut(rest, "}")
	if !ok || !closed || name == "" {
		return ""
	}
	return "container " + name + ": "
}

// imageMissing reports whether a pull error (an ErrImagePull status's
// message, a Failed event's) is containerd's for a registry that answered
// it has no such manifest (404): `rpc error: code = NotFound desc =
// failed to pull and unpack image "REF": failed to resolve reference
// "REF": REF: not found` (testdata/wait/pull-notfound.json and
// events-notfound.json, recorded on the test cluster: containerd 1.6.20,
// a registry without the repository). A refused or cut
// connection, a timeout or a server error reads otherwise, and waits for
// the back-off.
func imageMissing(msg string) bool {
	return strings.Contains(msg, "failed to resolve reference") && strings.HasSuffix(strings.TrimSpace(msg), ": not found")
}

// claimCause is an unbound claim's cause that will not clear by itself,
// from its Warning events (the PersistentVolume controller's): a
// StorageClass that does not exist (ProvisioningFailed
// `storageclass.storage.k8s.io "X" not found`), or no class at all and no
// volume (FailedBinding "no persistent volumes available for this claim
// and no storage class is set"). A provisioner's failure (other
// ProvisioningFailed) is retried by it and may pass: it is reported at
// the time limit.
func claimCause(c *waitClaim, events []event) (reason, msg string) {
	if c.Status.Phase == "Lost" {
		return "Lost", "its volume is gone"
	}
	for _, e := range events {
		if e.InvolvedObject.UID != c.Metadata.UID || e.Type != "Warning" {
			continue
		}
		switch {
		case e.Reason == "ProvisioningFailed" && strings.HasPrefix(e.Message, "storageclass.storage.k8s.io ") && strings.HasSuffix(e.Message, " not found"):
			return e.Reason, e.Message + " (kubernetes.storageClass names a StorageClass the cluster does not have; `kubectl get storageclass` lists them)"
		case e.Reason == "FailedBinding" && strings.Contains(e.Message, "no storage class is set"):
			return e.Reason, e.Message + " (the cluster has no default StorageClass: name one in kubernetes.storageClass)"
		}
	}
	return "", ""
}

// unschedulable says why a pod the scheduler found Insufficient room for
// can never be scheduled, "" when it may yet be.
//
// "Insufficient memory" (or cpu) means no node has that much free now:
// it clears when other pods end, so it alone is not terminal. What does
// not clear is a request larger than every node's allocatable (what the
// node offers pods at all), counting only nodes the pod may use: not
// cordoned, and no NoSchedule/NoExecute taint it does not tolerate, except
// the node lifecycle's own (node.kubernetes.io/*, the cloud provider's
// uninitialized), which go away. A node autoscaler may still add a bigger
// node: cluster-autoscaler records TriggeredScaleUp on the pod, Karpenter
// Nominated, within their scan or batch window (10 s by default); either
// keeps the wait going. So a pod that fits no node fails after
// scaleUpGrace without such an answer, or at once when cluster-autoscaler
// says it will not scale up (NotTriggerScaleUp). Nodes that cannot be
// read leave the wait to its time limit.
func (s *seen) unschedulable(p *waitPod) string {
	if s.nodesErr != nil {
		return ""
	}
	notTriggered := false
	for _, e := range s.events {
		if e.InvolvedObject.UID != p.Metadata.UID {
			continue
		}
		switch e.Reason {
		case "TriggeredScaleUp", "Nominated":
			return ""
		case "NotTriggerScaleUp":
			notTriggered = true
		}
	}
	if !s.graceOver && !notTriggered {
		return ""
	}
	req, err := podRequests(p)
	if err != nil {
		return ""
	}
	var best []string
	for _, n := range s.nodes {
		if n.unschedulable || !tolerates(p.Spec.Tolerations, n.taints) {
			continue
		}
		fits := true
		for res, want := range req {
			have, err := quantity(n.allocatable[res])
			if err != nil || n.allocatable[res] == "" || have < want {
				fits = false
			}
		}
		if fits {
			return ""
		}
		best = append(best, n.name+": "+n.allocatable["memory"]+" memory, "+n.allocatable["cpu"]+" cpu")
	}
	var asks []string
	for _, res := range []string{"cpu", "memory"} {
		if q, ok := req[res]; ok {
			asks = append(asks, res+" "+formatQuantity(res, q))
		}
	}
	why := "it requests " + strings.Join(asks, " and ") + ", more than any node it may run on offers pods at all"
	if len(best) > 0 {
		why += " (allocatable: " + strings.Join(best, "; ") + ")"
	} else {
		why += " (there is no such node)"
	}
	return why
}

// podRequests is what the scheduler asks of a node for a pod: the sum of
// its containers' requests or the largest init container's, whichever is
// more, plus the pod's overhead (the scheduler's rule for
// resource requests, k8s.io/component-helpers resource.PodRequests).
func podRequests(p *waitPod) (map[string]float64, error) {
	sum := map[string]float64{}
	for _, c := range p.Spec.Containers {
		for res, q := range c.Resources.Requests {
			v, err := quantity(q)
			if err != nil {
				return nil, err
			}
			sum[res] += v
		}
	}
	for _, c := range p.Spec.InitContainers {
		for res, q := range c.Resources.Requests {
			v, err := quantity(q)
			if err != nil {
				return nil, err
			}
			sum[res] = max(sum[res], v)
		}
	}
	for res, q := range p.Spec.Overhead {
		v, err := quantity(q)
		if err != nil {
			return nil, err
		}
		sum[res] += v
	}
	out := map[string]float64{}
	for _, res := range []string{"cpu", "memory"} {
		if v, ok := sum[res]; ok {
			out[res] = v
		}
	}
	return out, nil
}

// tolerates reports whether tolerations tolerate every taint that keeps a
// pod off a node for good.
func tolerates(tols []toleration, taints []toleration) bool {
	for _, t := range taints {
		if t.Effect != "NoSchedule" && t.Effect != "NoExecute" {
			continue
		}
		if strings.HasPrefix(t.Key, "node.kubernetes.io/") || t.Key == "node.cloudprovider.kubernetes.io/uninitialized" {
			continue
		}
		ok := false
		for _, tol := range tols {
			if tol.Effect != "" && tol.Effect != t.Effect {
				continue
			}
			switch {
			case tol.Operator == "Exists" && (tol.Key == "" || tol.Key == t.Key):
				ok = true
			case (tol.Operator == "" || tol.Operator == "Equal") && tol.Key == t.Key && tol.Value == t.Value:
				ok = true
			}
		}
		if !ok {
			return false
		}
	}
	return true
}

// quantity reads a resource.Quantity as a number: cores for cpu, bytes
// for memory ("250m", "2", "1k", "512Mi", "24581220Ki", "1e3").
func quantity(q string) (float64, error) {
	if m, ok := strings.CutSuffix(q, "m"); ok {
		n, err := strconv.ParseFloat(m, 64)
		if err != nil || n < 0 {
			return 0, fmt.Errorf("quantity %q", q)
		}
		return n / 1000, nil
	}
	units := []struct {
		suffix string
		mult   float64
	}{{"Ki", 1 << 10}, {"Mi", 1 << 20}, {"Gi", 1 << 30}, {"Ti", 1 << 40}, {"Pi", 1 << 50}, {"Ei", 1 << 60},
		{"k", 1e3}, {"M", 1e6}, {"G", 1e9}, {"T", 1e12}, {"P", 1e15}, {"E", 1e18}}
	for _, u := range units {
		if n, ok := strings.CutSuffix(q, u.suffix); ok {
			f, err := strconv.ParseFloat(n, 64)
			if err != nil || f < 0 {
				return 0, fmt.Errorf("quantity %q", q)
			}
			return f * u.mult, nil
		}
	}
	f, err := strconv.ParseFloat(q, 64)
	if err != nil || f < 0 {
		return 0, fmt.Errorf("quantity %q", q)
	}
	return f, nil
}

func formatQuantity(res string, v float64) string {
	if res == "cpu" {
		return strconv.FormatFloat(v, 'f', -1, 64)
	}
	return strconv.FormatFloat(v/(1<<30), 'f', 1, 64) + "Gi"
}

// timedOut is the error after the time limit: how each awaited object
// stood, and the current objects' warnings.
func (s *seen) timedOut(want []string) *NotReadyError {
	var st []string
	for _, o := range want {
		kind, n, _ := strings.Cut(o, "/")
		if kind != "pod" {
			st = append(st, s.sandboxState())
			n = SandboxPodName(s.name)
		}
		st = append(st, s.podState(n))
	}
	if s.claim != nil {
		st = append(st, "persistentvolumeclaim/"+s.claim.Metadata.Name+": "+s.claim.Status.Phase)
	}
	st = append(st, s.notes...)
	return &NotReadyError{Sandbox: s.name, Seen: st, Warnings: currentWarnings(s.events, s.uids())}
}

func (s *seen) sandboxState() string {
	if s.sandbox == nil {
		return "sandbox " + s.name + ": not seen"
	}
	c := conditionOf(s.sandbox.Status.Conditions, "Ready")
	if c == nil {
		return "sandbox " + s.name + ": no Ready condition yet"
	}
	return untrusted.Line(fmt.Sprintf("sandbox %s: Ready=%s %s %s", s.name, c.Status, c.Reason, c.Message))
}

func (s *seen) podState(n string) string {
	p := s.pods[n]
	if p == nil {
		return "pod/" + n + ": not made"
	}
	parts := []string{p.Status.Phase}
	for _, c := range p.Status.Conditions {
		if c.Status != "True" && c.Message != "" {
			parts = append(parts, c.Type+"="+c.Status+" "+c.Reason+": "+c.Message)
		}
	}
	for _, cs := range append(append([]containerStatus{}, p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...) {
		if w := cs.State.Waiting; w != nil {
			parts = append(parts, "container "+cs.Name+" waiting: "+w.Reason+" "+w.Message)
		}
	}
	return untrusted.Line("pod/" + n + ": " + strings.Join(parts, "; "))
}

// listNodes reads the nodes' allocatable, cordon and taints (core/v1
// Node: spec.unschedulable, spec.taints, status.allocatable).
func (d *Driver) listNodes(ctx context.Context, p place) ([]nodeInfo, error) {
	out, err := d.run(ctx, p, "get", "nodes", "-o", "json")
	if err != nil {
		return nil, err
	}
	return nodeInfos(out)
}

// nodeInfos reads the listing as the wait needs it.
func nodeInfos(out []byte) ([]nodeInfo, error) {
	nodes, err := parseNodes(out)
	if err != nil {
		return nil, err
	}
	ns := make([]nodeInfo, 0, len(nodes))
	for _, n := range nodes {
		ns = append(ns, nodeInfo{name: n.Metadata.Name, allocatable: n.Status.Allocatable, unschedulable: n.Spec.Unschedulable, taints: n.Spec.Taints})
	}
	return ns, nil
}
