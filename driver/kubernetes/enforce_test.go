package kubernetes

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"
)

// enforcer emulates, for one test's namespace, a network plugin that
// enforces the driver's NetworkPolicies (this cluster's bridge plugin
// enforces none, kubernetes.md §2.4): for each sandbox pod (role agent or
// pool-agent) with an address, iptables rules on the host let its packets
// out only to its proxy's port (TCP 3128 of the pod with the same
// sandbox label and role egress or pool-egress) and drop the rest, in
// FORWARD (pod to pod, across the bridge: br_netfilter is on) and INPUT
// (pod to node). The rules name only addresses of the test's own pods,
// follow pods as they come and go, and are removed when the test ends.
type enforcer struct {
	c       *cluster
	comment string
	mu      sync.Mutex
	rules   map[string][][]string // by pod uid: the rules installed for it
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
			e.sync()
			select {
			case <-ctx.Done():
			case <-time.After(150 * time.Millisecond):
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

// sync installs rules for new sandbox pods and removes those of pods that
// are gone.
func (e *enforcer) sync() {
	pods := e.c.pods()
	proxies := map[string]string{} // sandbox/role → proxy address
	for _, p := range pods {
		if r := p.labels[LabelRole]; (r == roleEgress || r == rolePoolProxy) && p.ip != "" {
			proxies[p.labels[LabelSandbox]+"/"+r] = p.ip
		}
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	live := map[string]bool{}
	for _, p := range pods {
		role := p.labels[LabelRole]
		if (role != roleAgent && role != rolePoolAgent) || p.ip == "" {
			continue
		}
		proxyRole := roleEgress
		if role == rolePoolAgent {
			proxyRole = rolePoolProxy
		}
		proxy := proxies[p.labels[LabelSandbox]+"/"+proxyRole]
		if proxy == "" {
			continue
		}
		live[p.uid] = true
		if _, ok := e.rules[p.uid]; ok {
			continue
		}
		var rules [][]string
		for _, chain := range []string{"FORWARD", "INPUT"} {
			rules = append(rules, []string{chain, "-s", p.ip, "-m", "comment", "--comment", e.comment, "-j", "DROP"})
		}
		rules = append(rules, []string{"FORWARD", "-s", p.ip, "-d", proxy, "-p", "tcp", "--dport", "3128", "-m", "comment", "--comment", e.comment, "-j", "ACCEPT"})
		for _, r := range rules {
			if out, err := exec.Command("iptables", append([]string{"-w", "-I", r[0], "1"}, r[1:]...)...).CombinedOutput(); err != nil {
				e.c.t.Errorf("iptables -I %s: %v: %s", strings.Join(r, " "), err, out)
			}
		}
		e.rules[p.uid] = rules
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
