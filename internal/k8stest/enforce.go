package k8stest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sbxhq/sbx/driver"
	"github.com/sbxhq/sbx/internal/proc"
)

// enforcer emulates, for one test's namespace, a network plugin that
// enforces the driver's NetworkPolicies (this cluster's bridge plugin
// enforces none, kubernetes.md §2.4): for each pod that runs an agent (a
// role in roles: agent, pool-agent) with an address, iptables rules on the
// host let its packets out only to its proxy's port (TCP 3128 of the pod
// with the same sandbox label and the role roles maps it to: egress,
// pool-egress) and drop the rest, in
// FORWARD (pod to pod, across the bridge: br_netfilter is on) and INPUT
// (pod to node). The rules name only addresses of the test's own pods,
// follow pods as they come and go (one watch of the namespace's pods: a
// kubectl get every few hundred milliseconds, in every parallel test,
// kept the API server and the machine's two cores busy), and are removed
// when the test ends. Each rule's comment names the test process
// (enforcerComment), so that a later run removes the rules of a killed
// one (sweepRules) before they drop the packets of a pod that reuses
// an address.
type enforcer struct {
	s       *Space
	roles   map[string]string // an agent pod's role → its proxy pod's
	comment string
	mu      sync.Mutex
	rules   map[string][][]string // by pod uid: the rules installed for it
}

// watchedPod is what the enforcer reads of a pod.
type watchedPod struct {
	Metadata struct {
		Name   string            `json:"name"`
		UID    string            `json:"uid"`
		Labels map[string]string `json:"labels"`
	} `json:"metadata"`
	Status struct {
		PodIP string `json:"podIP"`
	} `json:"status"`
}

// Enforce emulates, for the rest of the test, a network plugin that
// enforces the driver's NetworkPolicies in the space's namespace (enforcer);
// roles maps the role label (driver.LabelRole) of each pod that runs an
// agent to the role of its proxy's pod. The namespace's Pod Security is
// set to baseline, which does not admit the driver's own pin in the pod's
// network namespace (an init container with NET_ADMIN): the tests that
// emulate NetworkPolicy test the NetworkPolicy path, and the pin's tests
// the pin.
func (s *Space) Enforce(roles map[string]string) {
	s.T.Helper()
	if os.Geteuid() != 0 {
		s.T.Fatal("emulating NetworkPolicy enforcement needs root (iptables)")
	}
	s.PodSecurity("baseline")
	sweepRulesOnce.Do(func() { sweepRules(s.T) })
	e := &enforcer{s: s, roles: roles, comment: enforcerComment + proc.Owner() + ":" + s.ID, rules: map[string][][]string{}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			// A watch the API server ends is started again, from a
			// fresh listing; one that fails is retried a second later.
			if err := e.watch(ctx); err != nil && ctx.Err() == nil {
				s.T.Logf("enforcer: watching the pods: %v", err)
				select {
				case <-ctx.Done():
				case <-time.After(time.Second):
				}
			}
		}
	}()
	s.T.Cleanup(func() {
		cancel()
		<-done
		e.mu.Lock()
		defer e.mu.Unlock()
		for uid := range e.rules {
			e.remove(uid)
		}
		if out, _ := exec.Command("iptables", "-w", "-S").Output(); strings.Contains(string(out), e.comment) {
			s.T.Errorf("iptables rules of the test are left:\n%s", out)
		}
	})
}

// PodSecurity sets the Pod Security level the namespace enforces
// (pod-security.kubernetes.io/enforce: privileged, baseline, restricted).
func (s *Space) PodSecurity(level string) {
	s.T.Helper()
	s.Kubectl(s.T, "label", "namespace", s.NS, "pod-security.kubernetes.io/enforce="+level, "--overwrite")
}

// watch follows the namespace's pods (kubectl get --watch: the listing,
// then each change, as events) and syncs the rules after each event,
// until the watch ends or ctx is done.
func (e *enforcer) watch(ctx context.Context) error {
	cmd := e.s.Command(ctx, "-n", e.s.NS, "get", "pods", "--watch", "--output-watch-events", "-o", "json")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	pods := map[string]watchedPod{} // by name
	dec := json.NewDecoder(out)
	var derr error
	for {
		var ev struct {
			Type   string     `json:"type"`
			Object watchedPod `json:"object"`
		}
		if derr = dec.Decode(&ev); derr != nil {
			break
		}
		switch ev.Type {
		case "ADDED", "MODIFIED":
			pods[ev.Object.Metadata.Name] = ev.Object
		case "DELETED":
			delete(pods, ev.Object.Metadata.Name)
		default:
			// ERROR (the watch expired) or a type this test does not
			// know: a fresh watch.
			derr = fmt.Errorf("watch event %q", ev.Type)
		}
		if derr != nil {
			break
		}
		e.sync(pods)
	}
	out.Close()
	werr := cmd.Wait()
	switch {
	case ctx.Err() != nil:
		return nil
	case derr != nil && derr != io.EOF:
		return fmt.Errorf("%v (%v: %s)", derr, werr, strings.TrimSpace(stderr.String()))
	case werr != nil:
		return fmt.Errorf("%v: %s", werr, strings.TrimSpace(stderr.String()))
	}
	return nil
}

// sync installs rules for new sandbox pods and removes those of pods that
// are gone.
func (e *enforcer) sync(pods map[string]watchedPod) {
	proxies := map[string]string{} // sandbox/role → proxy address
	for _, p := range pods {
		r := p.Metadata.Labels[driver.LabelRole]
		for _, proxyRole := range e.roles {
			if r == proxyRole && p.Status.PodIP != "" {
				proxies[p.Metadata.Labels[driver.LabelSandbox]+"/"+r] = p.Status.PodIP
			}
		}
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	live := map[string]bool{}
	for _, p := range pods {
		role, ip, uid := p.Metadata.Labels[driver.LabelRole], p.Status.PodIP, p.Metadata.UID
		proxyRole, agent := e.roles[role]
		if !agent || ip == "" {
			continue
		}
		proxy := proxies[p.Metadata.Labels[driver.LabelSandbox]+"/"+proxyRole]
		if proxy == "" {
			continue
		}
		live[uid] = true
		if _, ok := e.rules[uid]; ok {
			continue
		}
		var rules [][]string
		for _, chain := range []string{"FORWARD", "INPUT"} {
			rules = append(rules, []string{chain, "-s", ip, "-m", "comment", "--comment", e.comment, "-j", "DROP"})
		}
		rules = append(rules, []string{"FORWARD", "-s", ip, "-d", proxy, "-p", "tcp", "--dport", "3128", "-m", "comment", "--comment", e.comment, "-j", "ACCEPT"})
		for _, r := range rules {
			if out, err := exec.Command("iptables", append([]string{"-w", "-I", r[0], "1"}, r[1:]...)...).CombinedOutput(); err != nil {
				e.s.T.Errorf("iptables -I %s: %v: %s", strings.Join(r, " "), err, out)
			}
		}
		e.rules[uid] = rules
	}
	for uid := range e.rules {
		if !live[uid] {
			e.remove(uid)
		}
	}
}

// enforcerComment starts the comment of every rule an enforcer installs;
// OWNER:ID follows (proc.Owner, the Space's ID).
const enforcerComment = "sbx-test-enforcer:"

var sweepRulesOnce sync.Once

// sweepRules removes the rules enforcers of test processes that are gone
// left (a killed run's Cleanup never ran): a pod address is handed out
// again, and a left rule dropped every packet the new pod sent to the
// node, its readiness probe's replies included.
func sweepRules(t testing.TB) {
	out, err := exec.Command("iptables", "-w", "-S").Output()
	if err != nil {
		t.Logf("listing the rules killed runs left: %v", err)
		return
	}
	for _, r := range staleRules(string(out), proc.Gone) {
		if out, err := exec.Command("iptables", append([]string{"-w", "-D"}, r...)...).CombinedOutput(); err != nil {
			t.Logf("removing a rule a killed run left (%s): %v: %s", strings.Join(r, " "), err, out)
		}
	}
}

// staleRules returns, as iptables -D arguments, the rules in listing
// (iptables -S) whose comment says an enforcer of an owner gone made
// them.
func staleRules(listing string, gone func(owner string) bool) [][]string {
	var stale [][]string
	for _, line := range strings.Split(listing, "\n") {
		f := strings.Fields(line)
		if len(f) < 2 || f[0] != "-A" {
			continue
		}
		// iptables quotes a comment with any character but letters,
		// digits and '-' (an owner's '/'); an enforcer's has no space.
		for i, a := range f {
			if u, err := strconv.Unquote(a); err == nil && strings.HasPrefix(a, `"`) {
				f[i] = u
			}
		}
		for i, a := range f[:len(f)-1] {
			c, ok := strings.CutPrefix(f[i+1], enforcerComment)
			if a != "--comment" || !ok {
				continue
			}
			if owner, _, ok := strings.Cut(c, ":"); ok && gone(owner) {
				stale = append(stale, f[1:])
			}
			break
		}
	}
	return stale
}

func (e *enforcer) remove(uid string) {
	for _, r := range e.rules[uid] {
		if out, err := exec.Command("iptables", append([]string{"-w", "-D"}, r...)...).CombinedOutput(); err != nil {
			e.s.T.Errorf("iptables -D %s: %v: %s", strings.Join(r, " "), err, out)
		}
	}
	delete(e.rules, uid)
}
