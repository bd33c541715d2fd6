package docker

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"time"

	"github.com/sbxhq/sbx/checkpoint"
	"github.com/sbxhq/sbx/driver"
	"github.com/sbxhq/sbx/driver/runner"
	"github.com/sbxhq/sbx/internal/atomicfile"
	"github.com/sbxhq/sbx/reconcile"
)

// The labels of a checkpoint image (set by sbx when it commits one, and
// when it imports one, over whatever the archive said) and of a sandbox
// container made from one.
const (
	// LabelCheckpoint is, on an image, the checkpoint's name; on a sandbox
	// container, the checkpoint it was made from ("" for none: every
	// sandbox container has it, so the label of the image it was made
	// from never shows through).
	LabelCheckpoint = "dev.sbx.checkpoint"
	// LabelCheckpointSandbox, LabelCheckpointCreated and
	// LabelCheckpointOrigin are, on a checkpoint's image, the sandbox it
	// was made from, when, and whether it was made here ("created") or
	// imported ("imported").
	LabelCheckpointSandbox = "dev.sbx.checkpoint.sandbox"
	labelCheckpointDigest  = "dev.sbx.checkpoint.config-digest"
	LabelCheckpointCreated = "dev.sbx.checkpoint.created"
	LabelCheckpointOrigin  = "dev.sbx.checkpoint.origin"
)

var (
	_ driver.Checkpointer = (*Driver)(nil)
	_ driver.Lister       = (*Driver)(nil)
)

// CheckpointLabels are the labels of a checkpoint image.
func CheckpointLabels(cp checkpoint.Checkpoint) map[string]string {
	return map[string]string{
		LabelCheckpoint:        cp.Name,
		LabelCheckpointSandbox: cp.Sandbox,
		labelCheckpointDigest:  cp.ConfigDigest,
		LabelCheckpointCreated: cp.Created.UTC().Format(time.RFC3339),
		LabelCheckpointOrigin:  cp.Origin,
	}
}

// CheckpointCalls commit the sandbox container's filesystem as the
// checkpoint's image, pausing the container meanwhile (docker commit's
// default) and leaving it as it was, running or stopped. What a commit
// takes is the container's own layer: the workspace and the mounts are
// bind mounts and the socket volume a volume, so none of them is in it;
// secrets reach processes only through their exec's environment, never
// the container's configuration. The image's configuration is the
// container's with every dev.sbx.* label replaced by the checkpoint's and
// the sandbox's own env (what sandbox.yaml and sbx gave it beyond the
// template) emptied: a restore gets both from sandbox.yaml again.
func (d *Driver) CheckpointCalls(cp checkpoint.Checkpoint, live *reconcile.Live, output string) ([]reconcile.Call, error) {
	if live == nil || !live.Exists {
		return nil, fmt.Errorf("sandbox %q does not exist", cp.Sandbox)
	}
	if !live.Managed {
		return nil, fmt.Errorf("sandbox %q was not created by sbx", cp.Sandbox)
	}
	c := ContainerName(cp.Sandbox)
	calls := []reconcile.Call{{
		Desc: fmt.Sprintf("commit %s as %s, paused meanwhile: its own layer, without the workspace, mounts or volumes; its labels and env replaced (Engine API)", c, checkpoint.Ref(cp.Name)),
		Run:  func(ctx context.Context) error { return d.commit(ctx, c, cp) },
	}}
	if output != "" {
		save := []string{d.opts.Docker, "save", checkpoint.Ref(cp.Name)}
		calls = append(calls, reconcile.Call{Desc: runner.Quote(save) + " > " + output, Run: func(ctx context.Context) error {
			return d.exportTo(ctx, cp.Name, output)
		}})
	}
	return calls, nil
}

// commit makes the checkpoint's image from the container.
func (d *Driver) commit(ctx context.Context, container string, cp checkpoint.Checkpoint) error {
	in, err := d.api.inspectContainer(ctx, container)
	if err != nil {
		return err
	}
	if in == nil {
		return fmt.Errorf("container %s does not exist", container)
	}
	labels := map[string]string{}
	for k := range in.Config.Labels {
		if strings.HasPrefix(k, checkpoint.LabelPrefix) {
			labels[k] = ""
		}
	}
	for k, v := range CheckpointLabels(cp) {
		labels[k] = v
	}
	// The template's own env stays; what the sandbox was given is emptied
	// (docker commit keeps every variable of the container it is not
	// given a value for).
	base := map[string]bool{}
	if img, err := d.api.inspectImage(ctx, in.Config.Image); err == nil && img != nil {
		for _, e := range img.Config.Env {
			base[e] = true
		}
	}
	var env []string
	for _, e := range in.Config.Env {
		if !base[e] {
			k, _, _ := strings.Cut(e, "=")
			env = append(env, k+"=")
		}
	}
	body, err := json.Marshal(map[string]any{"Labels": labels, "Env": env})
	if err != nil {
		return err
	}
	q := url.Values{"container": {container}, "repo": {checkpoint.Repository}, "tag": {cp.Name}, "pause": {"1"},
		"comment": {"sbx checkpoint of sandbox " + cp.Sandbox}}
	_, err = d.api.do(ctx, http.MethodPost, "/commit", q, bytes.NewReader(body), "application/json")
	return err
}

// imageInfo is the part of an image's inspection the driver reads.
type imageInfo struct {
	ID     string `json:"Id"`
	Config struct {
		User       string
		Env        []string
		Labels     map[string]string
		Entrypoint []string
		Cmd        []string
	}
}

// Checkpoints lists the images tagged sbx-checkpoint:NAME (one Engine API
// request). Their labels are not read: the tag is the name, and sbx's
// record of each is its catalog.
func (d *Driver) Checkpoints(ctx context.Context) (map[string]checkpoint.Image, error) {
	f, _ := json.Marshal(map[string][]string{"reference": {checkpoint.Repository}})
	data, err := d.api.do(ctx, http.MethodGet, "/images/json", url.Values{"filters": {string(f)}}, nil, "")
	if err != nil {
		return nil, err
	}
	var list []struct {
		ID       string `json:"Id"`
		RepoTags []string
		Created  int64
		Size     int64
	}
	if err := json.Unmarshal(data, &list); err != nil {
		return nil, fmt.Errorf("listing checkpoint images: %v", err)
	}
	out := map[string]checkpoint.Image{}
	for _, img := range list {
		for _, t := range img.RepoTags {
			if name, ok := strings.CutPrefix(t, checkpoint.Repository+":"); ok && checkpoint.ValidName(name) == nil {
				out[name] = checkpoint.Image{ID: img.ID, Size: img.Size, Created: time.Unix(img.Created, 0)}
			}
		}
	}
	return out, nil
}

// RemoveCheckpoint removes the checkpoint's tag (and the image, when no
// other tag or container holds it). A sandbox made from it holds it: the
// daemon refuses, and the error says which.
func (d *Driver) RemoveCheckpoint(ctx context.Context, name string) error {
	_, err := d.api.do(ctx, http.MethodDelete, "/images/"+checkpoint.Ref(name), nil, nil, "")
	var ae *apiError
	switch {
	case notFound(err):
		return nil
	case errors.As(err, &ae) && ae.Status == http.StatusConflict:
		return fmt.Errorf("checkpoint %q is in use: a sandbox was made from it (destroy it, or apply another template first): %s", name, ae.Message)
	}
	return err
}

// ExportCheckpoint writes `docker save` of the checkpoint's image to w.
func (d *Driver) ExportCheckpoint(ctx context.Context, name string, w io.Writer) error {
	var stderr bytes.Buffer
	args := []string{d.opts.Docker, "save", checkpoint.Ref(name)}
	if err := d.opts.Runner.Run(ctx, runner.Cmd{Args: args, Stdout: w, Stderr: &stderr}); err != nil {
		return fmt.Errorf("%s: %v: %s", runner.Quote(args), err, strings.TrimSpace(stderr.String()))
	}
	return nil
}

// exportTo writes the checkpoint's archive to a private path sbx chose.
func (d *Driver) exportTo(ctx context.Context, name, path string) error {
	return atomicfile.Replace(path, 0o600, func(w io.Writer) error { return d.ExportCheckpoint(ctx, name, w) })
}

// ImportCheckpoint loads a sanitized archive (`docker load`), which names
// the image sbx-checkpoint:NAME.
func (d *Driver) ImportCheckpoint(ctx context.Context, name, archive string) error {
	if _, err := d.docker(ctx, "load", "-q", "-i", archive); err != nil {
		return err
	}
	cps, err := d.Checkpoints(ctx)
	if err != nil {
		return err
	}
	if _, ok := cps[name]; !ok {
		return fmt.Errorf("docker load did not make %s", checkpoint.Ref(name))
	}
	return nil
}

// Managed lists the sandboxes whose containers carry sbx's labels, with
// their state and owner labels (one Engine API request: GET
// /containers/json, ContainerSummary's Labels and State, Engine API
// v1.41).
func (d *Driver) Managed(ctx context.Context) ([]driver.Listed, error) {
	q := labelFilter(driver.LabelManaged + "=true")
	q.Set("all", "1")
	data, err := d.api.do(ctx, http.MethodGet, "/containers/json", q, nil, "")
	if err != nil {
		return nil, err
	}
	var list []struct {
		Labels map[string]string
		State  string
	}
	if err := json.Unmarshal(data, &list); err != nil {
		return nil, fmt.Errorf("listing containers: %v", err)
	}
	var out []driver.Listed
	for _, c := range list {
		if c.Labels[driver.LabelRole] == "sandbox" && c.Labels[driver.LabelSandbox] != "" {
			out = append(out, driver.Listed{Name: c.Labels[driver.LabelSandbox], Status: c.State,
				Owner: reconcile.Owner{Workspace: c.Labels[driver.LabelOwnerWorkspace], User: c.Labels[driver.LabelOwner]}})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}
