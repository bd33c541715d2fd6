package kubernetes

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/sbxhq/sbx/driver/runner"
)

// A create that fails removes its workspace claim. The volume the claim
// was bound to then follows its reclaim policy (core/v1
// PersistentVolumeSpec.persistentVolumeReclaimPolicy): Delete removes it
// with the claim; Retain keeps it Released, its spec.claimRef still
// naming the deleted claim, and no claim binds it again until someone
// removes that reference by hand. Nothing the user wanted was made, so
// the create gives such a volume back: it removes the reference, as an
// administrator would, and the volume is Available for the next apply
// (its files, a copy of the workspace, stay in it: that is what Retain
// promises).

// boundVolume is the volume a sandbox's workspace claim is bound to and
// the claim's UID, or "" when the claim is gone or not bound. It reads
// `kubectl get persistentvolumeclaims/NAME -o json` (core/v1
// PersistentVolumeClaim: metadata.uid, spec.volumeName).
func (d *Driver) boundVolume(ctx context.Context, p place, name string) (volume, uid string, err error) {
	args := []string{"get", "persistentvolumeclaims/" + ClaimName(name), "--ignore-not-found", "-o", "json"}
	out, err := d.run(ctx, p, args...)
	if err != nil || len(out) == 0 {
		return "", "", err
	}
	return parseBoundVolume(out)
}

func parseBoundVolume(out []byte) (volume, uid string, err error) {
	var c struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Metadata   struct {
			UID string `json:"uid"`
		} `json:"metadata"`
		Spec struct {
			VolumeName string `json:"volumeName"`
		} `json:"spec"`
	}
	if err := json.Unmarshal(out, &c); err != nil || c.APIVersion != "v1" || c.Kind != "PersistentVolumeClaim" || c.Metadata.UID == "" {
		return "", "", fmt.Errorf("kubectl get persistentvolumeclaims -o json: not a v1 PersistentVolumeClaim with a uid (%v)", err)
	}
	return c.Spec.VolumeName, c.Metadata.UID, nil
}

// releaseVolume makes volume, which the create's claim (uid) was bound to
// and which that claim's deletion left Released under Retain, Available
// again. The patch tests that the volume still names that claim, so a
// volume another claim has bound meanwhile is left alone; a volume whose
// policy is not Retain is left to it.
func (d *Driver) releaseVolume(ctx context.Context, p place, volume, uid string) error {
	out, err := d.run(ctx, p, "get", "persistentvolumes/"+volume, "--ignore-not-found", "-o", "json")
	if err != nil {
		return err
	}
	if len(out) == 0 {
		return nil // deleted under the Delete policy
	}
	var pv struct {
		Kind string `json:"kind"`
		Spec struct {
			Reclaim  string `json:"persistentVolumeReclaimPolicy"`
			ClaimRef *struct {
				UID string `json:"uid"`
			} `json:"claimRef"`
		} `json:"spec"`
	}
	if err := json.Unmarshal(out, &pv); err != nil || pv.Kind != "PersistentVolume" {
		return fmt.Errorf("kubectl get persistentvolumes/%s -o json: not a PersistentVolume (%v)", volume, err)
	}
	if pv.Spec.Reclaim != "Retain" || pv.Spec.ClaimRef == nil || pv.Spec.ClaimRef.UID != uid {
		return nil
	}
	_, err = d.run(ctx, p, releasePatch(volume, uid)...)
	return err
}

// releasePatch is the kubectl command that removes a volume's reference
// to the claim uid (JSON patch, RFC 6902: the test op makes the removal
// conditional).
func releasePatch(volume, uid string) []string {
	patch, _ := json.Marshal([]map[string]any{
		{"op": "test", "path": "/spec/claimRef/uid", "value": uid},
		{"op": "remove", "path": "/spec/claimRef"},
	})
	return []string{"patch", "persistentvolumes/" + volume, "--type=json", "-p", string(patch)}
}

// releaseError is a Retain volume the create could not give back: what
// the user runs to do it.
func (d *Driver) releaseError(p place, volume, uid string, err error) error {
	return fmt.Errorf("the workspace volume %s stays Released (reclaim policy Retain) and bound to the deleted claim: %v; to reuse it, run %s",
		volume, err, runner.Quote(d.kubectl(place{context: p.context}, releasePatch(volume, uid)...)))
}
