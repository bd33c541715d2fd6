package k8stest

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sbxhq/sbx/internal/proc"
)

// ownerAnnotation says which process made a test namespace:
// HOST/PID/START (proc.Start), so that a later run on the same machine
// tells a namespace a killed run left (go test's timeout, Ctrl-C) from one
// a live run is using, and removes the first: a leftover's sandboxes hold
// the node's memory and its volumes, and the next run's pods cannot be
// scheduled.
const ownerAnnotation = "dev.sbx.test/owner"

// staleUnowned is how old a test namespace without an owner (made before
// owners were recorded) must be to be taken for a leftover.
const staleUnowned = time.Hour

var sweepOnce sync.Once

// sweep removes, once per process, the test namespaces killed runs left
// on the cluster (their owner is gone, or they have none and are old) and
// the test volumes that were bound in them.
func (e *Env) sweep(t testing.TB) {
	sweepOnce.Do(func() { e.sweepNow(t) })
}

// sweepNow is sweep's work.
func (e *Env) sweepNow(t testing.TB) {
	{
		ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
		defer cancel()
		out, err := e.kubectl(ctx, "", "get", "namespaces", "-l", "dev.sbx.test=k8stest", "-o", "json")
		if err != nil {
			t.Logf("listing leftover test namespaces: %v", err)
			return
		}
		var list struct {
			Items []struct {
				Metadata struct {
					Name              string            `json:"name"`
					Annotations       map[string]string `json:"annotations"`
					CreationTimestamp time.Time         `json:"creationTimestamp"`
				} `json:"metadata"`
			} `json:"items"`
		}
		if err := json.Unmarshal([]byte(out), &list); err != nil {
			t.Logf("listing leftover test namespaces: %v", err)
			return
		}
		gone := map[string]bool{}
		for _, ns := range list.Items {
			m := ns.Metadata
			o, ok := m.Annotations[ownerAnnotation]
			if (ok && proc.Gone(o)) || (!ok && time.Since(m.CreationTimestamp) > staleUnowned) {
				gone[m.Name] = true
			}
		}
		if len(gone) == 0 {
			return
		}
		var names []string
		for n := range gone {
			names = append(names, n)
		}
		t.Logf("removing test namespaces killed runs left: %s", strings.Join(names, ", "))
		if _, err := e.kubectl(ctx, "", append([]string{"delete", "namespaces", "--wait=false"}, names...)...); err != nil {
			t.Logf("removing them: %v", err)
		}
		e.sweepVolumes(ctx, t, gone)
	}
}

// sweepVolumes deletes the test volumes (labelled dev.sbx.test) that were
// bound in the namespaces gone.
func (e *Env) sweepVolumes(ctx context.Context, t testing.TB, gone map[string]bool) {
	out, err := e.kubectl(ctx, "", "get", "persistentvolumes", "-l", "dev.sbx.test", "-o", "json")
	if err != nil {
		t.Logf("listing test volumes: %v", err)
		return
	}
	var list struct {
		Items []struct {
			Metadata struct {
				Name string `json:"name"`
			} `json:"metadata"`
			Spec struct {
				ClaimRef *struct {
					Namespace string `json:"namespace"`
				} `json:"claimRef"`
			} `json:"spec"`
		} `json:"items"`
	}
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		t.Logf("listing test volumes: %v", err)
		return
	}
	var pvs []string
	for _, pv := range list.Items {
		if c := pv.Spec.ClaimRef; c != nil && gone[c.Namespace] {
			pvs = append(pvs, pv.Metadata.Name)
		}
	}
	if len(pvs) > 0 {
		if _, err := e.kubectl(ctx, "", append([]string{"delete", "persistentvolumes", "--wait=false"}, pvs...)...); err != nil {
			t.Logf("removing the test volumes of leftover namespaces: %v", err)
		}
	}
}
