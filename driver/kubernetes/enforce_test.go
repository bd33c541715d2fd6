package kubernetes

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/sbxhq/sbx/driver"
)

// enforcer emulates, for one test's namespace, a network plugin that
// enforces the driver's NetworkPolicies (this cluster's bridge plugin
// enforces none, kubernetes.md §2.4): for each sandbox pod (role agent or
// pool-agent) with an address, iptables rules on the host let its packets
// out only to its proxy's port (TCP 3128 of the pod with the same
// sandbox label and role egress or pool-egress) and drop the rest, in
// FORWARD (pod to pod, across the bridge: br_netfilter is on) and INPUT
// (pod to node). The rules name only addresses of the test's own pods,
// follow pods as they come and go (one watch of the namespace's pods: a
// kubectl get every few hundred milliseconds, in every parallel test,
// kept the API server and the machine's two cores busy), and are removed
// when the test ends.
type enforcer struct {
	c       *cluster
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

func (c *cluster) enforce() {
	c.t.Helper()
	if os.Geteuid() != 0 {
		c.t.Fatal("emulating NetworkPolicy enforcement needs root (iptables)")
	}
	e := &enforcer{c: c, comment: "sbx-test-" + c.class, rules: map[string][][]string{}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			// A watch the API server ends is started again, from a
			// fresh listing; one that fails is retried a second later.
			if err := e.watch(ctx); err != nil && ctx.Err() == nil {
				c.t.Logf("enforcer: watching the pods: %v", err)
				select {
				case <-ctx.Done():
				case <-time.After(time.Second):
				}
			}
		}
	}()
	c.t.Cleanup(func() {
		cancel()
		<-done
		e.mu.Lock()
		defer e.mu.Unlock()
		for uid := range e.rules {
			e.remove(uid)
		}
		if out, _ := exec.Command("iptables", "-w", "-S").Output(); strings.Contains(string(out), e.comment) {
			c.t.Errorf("iptables rules of the test are left:\n%s", out)
		}
	})
}

// watch follows the namespace's pods (kubectl get --watch: the listing,
// then each change, as events) and syncs the rules after each event,
// until the watch ends or ctx is done.
func (e *enforcer) watch(ctx context.Context) error {
	cmd := e.c.Command(ctx, "-n", e.c.ns, "get", "pods", "--watch", "--output-watch-events", "-o", "json")
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
		if r := p.Metadata.Labels[driver.LabelRole]; (r == roleEgress || r == rolePoolProxy) && p.Status.PodIP != "" {
			proxies[p.Metadata.Labels[driver.LabelSandbox]+"/"+r] = p.Status.PodIP
		}
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	live := map[string]bool{}
	for _, p := range pods {
		role, ip, uid := p.Metadata.Labels[driver.LabelRole], p.Status.PodIP, p.Metadata.UID
		if (role != roleAgent && role != rolePoolAgent) || ip == "" {
			continue
		}
		proxyRole := roleEgress
		if role == rolePoolAgent {
			proxyRole = rolePoolProxy
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
				e.c.t.Errorf("iptables -I %s: %v: %s", strings.Join(r, " "), err, out)
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

func (e *enforcer) remove(uid string) {
	for _, r := range e.rules[uid] {
		if out, err := exec.Command("iptables", append([]string{"-w", "-D"}, r...)...).CombinedOutput(); err != nil {
			e.c.t.Errorf("iptables -D %s: %v: %s", strings.Join(r, " "), err, out)
		}
	}
	delete(e.rules, uid)
}
