package k8stest

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sbxhq/sbx/internal/fixture"
	"github.com/sbxhq/sbx/internal/proc"
)

// ownerAnnotation says which process made a test namespace:
// HOST/PID/START (proc.Start), so that a later run on the same machine
// tells a namespace a killed run left (go test's timeout, Ctrl-C) from one
// a live run is using, and removes the first: a leftover's sandboxes hold
// the node's memory and its volumes, and the next run's pods cannot be
// scheduled.
const ownerAnnotation = "dev.sbx.test/owner"

var sweepOnce sync.Once

// sweep removes, once per process, the test namespaces killed runs left
// on the cluster (their owner is gone, or they are older than
// fixture.StaleAfter: an owner of another machine, or none, says nothing)
// and the test volumes that were bound in them or are as old, and waits
// until the namespaces are gone: until then their sandboxes hold the
// node's memory, and this run's pods could not be scheduled.
func (e *Env) sweep(t testing.TB) {
	sweepOnce.Do(func() { e.sweepNow(t) })
}

// sweepNow is sweep's work.
func (e *Env) sweepNow(t testing.TB) {
	e.sweepAt(t, "dev.sbx.test", time.Now().Add(-fixture.StaleAfter))
}

// sweepAt removes the namespaces and volumes that carry the label
// selector and are leftovers at cutoff.
func (e *Env) sweepAt(t testing.TB, selector string, cutoff time.Time) {
	{
		ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
		defer cancel()
		out, err := e.kubectl(ctx, "", "get", "namespaces", "-l", selector, "-o", "json")
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
			if (ok && proc.Gone(o)) || m.CreationTimestamp.Before(cutoff) {
				gone[m.Name] = true
			}
		}
		e.sweepVolumes(ctx, t, selector, gone, cutoff)
		if len(gone) == 0 {
			return
		}
		var names []string
		for n := range gone {
			names = append(names, n)
		}
		t.Logf("removing test namespaces killed runs left: %s", strings.Join(names, ", "))
		wait, cancel := context.WithTimeout(context.Background(), sweepWait+callTimeout)
		defer cancel()
		if _, err := e.kubectl(wait, "", append([]string{"delete", "namespaces", "--ignore-not-found", "--wait=true", "--timeout=" + sweepWait.String()}, names...)...); err != nil {
			t.Logf("removing them: %v", err)
		}
	}
}

// sweepWait bounds how long a sweep waits for the leftover namespaces to
// go (a killed scale test leaves hundreds of Sandboxes).
const sweepWait = 5 * time.Minute

// sweepVolumes deletes the test volumes (labelled selector) that were
// bound in the namespaces gone, or were made before cutoff.
func (e *Env) sweepVolumes(ctx context.Context, t testing.TB, selector string, gone map[string]bool, cutoff time.Time) {
	out, err := e.kubectl(ctx, "", "get", "persistentvolumes", "-l", selector, "-o", "json")
	if err != nil {
		t.Logf("listing test volumes: %v", err)
		return
	}
	var list struct {
		Items []struct {
			Metadata struct {
				Name              string    `json:"name"`
				CreationTimestamp time.Time `json:"creationTimestamp"`
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
		if c := pv.Spec.ClaimRef; (c != nil && gone[c.Namespace]) || pv.Metadata.CreationTimestamp.Before(cutoff) {
			pvs = append(pvs, pv.Metadata.Name)
		}
	}
	if len(pvs) > 0 {
		if _, err := e.kubectl(ctx, "", append([]string{"delete", "persistentvolumes", "--wait=false"}, pvs...)...); err != nil {
			t.Logf("removing the test volumes of leftover namespaces: %v", err)
		}
	}
}
