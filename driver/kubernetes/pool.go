package kubernetes

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/sbxhq/sbx/driver"
	"github.com/sbxhq/sbx/egress"
	"github.com/sbxhq/sbx/reconcile"
	"github.com/sbxhq/sbx/spec"
)

// Warm pools (kubernetes.warmPool: N). agent-sandbox keeps N sandboxes of
// a SandboxTemplate started (SandboxWarmPool), and a SandboxClaim takes
// one in well under a second (kubernetes.md §1.2: 0.43 s). sbx's pool is
// made like a sandbox: the template runs the same pod as the sandbox (its
// workspace an emptyDir, as a run's workspace lives as long as its pod),
// one proxy pod serves the pool, and two NetworkPolicies pin the pool's
// pods to it. The template's own NetworkPolicy management is off: its
// default allows all public egress, and policies add up.
//
// sbx loop --ephemeral claims a sandbox (Claim), copies the workspace in,
// points its bridge at the pool's proxy and probes the policy as a create
// does, runs the loop in it, then copies the workspace back and deletes
// the claim (agent-sandbox deletes the claimed sandbox with it, and the
// pool starts another).

func poolName(name string) string      { return name + ".pool" }
func poolProxyName(name string) string { return name + ".pool-egress" }

// claim is a warm sandbox an ephemeral run holds.
type claim struct {
	place place
	name  string // the SandboxClaim
	pod   string // the claimed sandbox's pod
}

// poolObjects are the pool's proxy, policies, template and pool (in this
// order), its pods pinned to pinTo when set, given the cluster's node
// addresses.
func (d *Driver) poolObjects(sp *spec.Spec, p place, helper string, nodes []string, pinTo string) ([]object, error) {
	image := TemplateImage(sp, d.buildHash(sp, nil))
	proxy, err := proxyPod(sp, poolProxyName(sp.Name), p.namespace, helper, rolePoolProxy, egress.PolicyOf(sp, nodes))
	if err != nil {
		return nil, err
	}
	tmpl := sandboxSpec{PodTemplate: agentPod(sp, "sandbox", image, helper, rolePoolAgent, false, pinTo), NetworkPolicyManagement: "Unmanaged"}
	pool := map[string]any{
		"replicas":           sp.K8s().WarmPool,
		"sandboxTemplateRef": map[string]string{"name": poolName(sp.Name)},
		// A template changed by a replacement replaces the warm sandboxes
		// made from the old one at once.
		"updateStrategy": map[string]string{"type": "Recreate"},
	}
	objs := []object{proxy}
	objs = append(objs, policies(sp, p.namespace, rolePoolAgent, rolePoolProxy, poolName(sp.Name), poolProxyName(sp.Name))...)
	return append(objs,
		object{APIVersion: apiExtensions, Kind: "SandboxTemplate", Metadata: meta{Name: poolName(sp.Name), Namespace: p.namespace, Labels: labels(sp.Name, rolePool)}, Spec: raw(tmpl)},
		object{APIVersion: apiExtensions, Kind: "SandboxWarmPool", Metadata: meta{Name: poolName(sp.Name), Namespace: p.namespace, Labels: labels(sp.Name, rolePool)}, Spec: raw(pool)},
	), nil
}

// poolCalls make the pool as the file wants it, or remove it.
func (d *Driver) poolCalls(sp *spec.Spec, p place, o *observed) ([]reconcile.Call, error) {
	n := sp.Name
	if sp.K8s().WarmPool == 0 {
		return []reconcile.Call{d.command(p, "delete", "sandboxwarmpools.extensions.agents.x-k8s.io,sandboxtemplates.extensions.agents.x-k8s.io,pods,networkpolicies.networking.k8s.io",
			"-l", driver.LabelSandbox+"="+n+","+driver.LabelRole+" in ("+rolePool+","+rolePoolProxy+","+rolePoolAgent+")", "--ignore-not-found", "--cascade=foreground", "--wait=true", "--timeout="+waitTimeout)}, nil
	}
	calls := []reconcile.Call{}
	if o != nil && o.pool != nil {
		// A pool made from another file: its proxy carries that file's
		// policy in its arguments, which a pod cannot change.
		calls = append(calls, d.command(p, "delete", "pod/"+poolProxyName(n), "--ignore-not-found", "--wait=true", "--timeout="+waitTimeout))
	}
	return append(calls, reconcile.Call{
		Desc: strings.Join([]string{
			"kubectl apply --server-side -f -  # Pod " + poolProxyName(n) + " (the pool's egress proxy), NetworkPolicy " + poolName(n) + " and " + poolProxyName(n) +
				", SandboxTemplate " + poolName(n) + ", SandboxWarmPool " + poolName(n) + fmt.Sprintf(" (%d sandboxes)", sp.K8s().WarmPool),
			"kubectl wait --for=condition=Ready pod/" + poolProxyName(n),
			"  # when the namespace admits the egress pin (a dry run, as a create asks), the proxy is made and Ready first, and the template's pods are pinned to its address in their own network namespace",
		}, "\n"),
		Run: func(ctx context.Context) error {
			helper, err := d.helperImage(sp.K8s().Registry)
			if err != nil {
				return err
			}
			nodes, err := d.nodeAddrs(ctx, p)
			if err != nil {
				return err
			}
			noPin, err := d.pinAdmitted(ctx, sp, p, helper)
			if err != nil {
				return err
			}
			objs, err := d.poolObjects(sp, p, helper, nodes, "")
			if err != nil {
				return err
			}
			if noPin == "" {
				// As a create does: the proxy first, then the template
				// whose pods are pinned to its address.
				if err := d.apply(ctx, p, objs[:3]); err != nil {
					return err
				}
				if err := d.waitReady(ctx, p, n, "pod/"+poolProxyName(n)); err != nil {
					return err
				}
				ip, err := d.podIP(ctx, p, poolProxyName(n))
				if err != nil {
					return err
				}
				if objs, err = d.poolObjects(sp, p, helper, nodes, joinHostPort(ip, proxyPort)); err != nil {
					return err
				}
			}
			if err := d.apply(ctx, p, objs); err != nil {
				return err
			}
			return d.waitReady(ctx, p, n, "pod/"+poolProxyName(n))
		},
	}), nil
}

// Pooled reports whether the file keeps a warm pool.
func (d *Driver) Pooled(sp *spec.Spec) bool { return sp.K8s().WarmPool > 0 }

// Claim takes a warm sandbox for sp's run: a SandboxClaim against the
// pool, then the workspace copied in, the bridge pointed at the pool's
// proxy and, unless egress is advisory, the enforcement probe, as a
// create does. Exec, NetLog and Denials for sp's name go to it until
// release, which copies the workspace back (Pull) and deletes the claim.
func (d *Driver) Claim(ctx context.Context, sp *spec.Spec, w io.Writer) (func(context.Context) error, error) {
	p := d.placeOf(sp)
	b := make([]byte, 4)
	rand.Read(b)
	cn := sp.Name + ".run-" + hex.EncodeToString(b)
	c := map[string]any{"warmPoolRef": map[string]string{"name": poolName(sp.Name)}}
	doc, err := applyList(object{APIVersion: apiExtensions, Kind: "SandboxClaim", Metadata: meta{Name: cn, Namespace: p.namespace, Labels: labels(sp.Name, "claim")}, Spec: raw(c)})
	if err != nil {
		return nil, err
	}
	drop := func(ctx context.Context) error {
		_, err := d.run(ctx, p, "delete", "sandboxclaims.extensions.agents.x-k8s.io/"+cn, "--ignore-not-found", "--cascade=foreground", "--wait=true", "--timeout="+waitTimeout)
		return err
	}
	fail := func(err error) (func(context.Context) error, error) {
		cleanup, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
		defer cancel()
		if dErr := drop(cleanup); dErr != nil {
			return nil, fmt.Errorf("%w (and deleting the claim %s: %v)", err, cn, dErr)
		}
		return nil, err
	}
	start := time.Now()
	// The pool's proxy address is looked up while the claim is made.
	type addr struct {
		ip  string
		err error
	}
	proxy := make(chan addr, 1)
	go func() {
		ip, err := d.podIP(ctx, p, poolProxyName(sp.Name))
		proxy <- addr{ip, err}
	}()
	if _, err := d.runInput(ctx, p, bytes.NewReader(doc), "create", "-f", "-"); err != nil {
		<-proxy
		return nil, err
	}
	// kubectl wait -o json prints the claim as it was when Ready.
	out, err := d.run(ctx, p, "wait", "--for=condition=Ready", "sandboxclaims.extensions.agents.x-k8s.io/"+cn, "--timeout="+waitTimeout, "-o", "json")
	if err != nil {
		<-proxy
		return fail(err)
	}
	pod, err := claimedPod(cn, out)
	a := <-proxy
	if err == nil {
		err = a.err
	}
	if err != nil {
		return fail(err)
	}
	ip := a.ip
	if err := d.prepareAt(ctx, sp, p, pod, ip, true, ""); err != nil {
		return fail(err)
	}
	fmt.Fprintf(w, "sbx: claimed warm sandbox %s from the pool of %q in %s\n", pod, sp.Name, time.Since(start).Round(time.Millisecond))
	d.mu.Lock()
	d.claims[sp.Name] = &claim{place: p, name: cn, pod: pod}
	d.mu.Unlock()
	return func(ctx context.Context) error {
		_, pullErr := d.Pull(ctx, sp, w)
		d.mu.Lock()
		delete(d.claims, sp.Name)
		d.mu.Unlock()
		if err := drop(ctx); err != nil {
			return err
		}
		return pullErr
	}, nil
}

// claimedPod reads the claimed sandbox's name from SandboxClaim cn as
// kubectl printed it (status.sandbox.name); its pod has its name.
func claimedPod(cn string, out []byte) (string, error) {
	var o object
	var st struct {
		Sandbox struct {
			Name string `json:"name"`
		} `json:"sandbox"`
	}
	if err := json.Unmarshal(out, &o); err != nil || o.Kind != "SandboxClaim" {
		return "", fmt.Errorf("kubectl wait sandboxclaim %s -o json: not a SandboxClaim (%v)", cn, err)
	}
	if err := json.Unmarshal(o.Status, &st); err != nil || st.Sandbox.Name == "" {
		return "", fmt.Errorf("sandboxclaim %s is Ready but names no sandbox (status.sandbox.name)", cn)
	}
	return SandboxPodName(st.Sandbox.Name), nil
}
