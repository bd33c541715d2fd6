package sbx

import (
	"context"
	"errors"
	"fmt"
	"io"
	"regexp"
	"time"

	"github.com/sbxhq/sbx/checkpoint"
	"github.com/sbxhq/sbx/driver"
	"github.com/sbxhq/sbx/driver/cliutil"
	"github.com/sbxhq/sbx/reconcile"
)

var _ driver.Checkpointer = (*Driver)(nil)

// keepRunningVersion is the first release whose `sbx run -d --name N` of an
// existing sandbox "keeps it running after sessions disconnect, until you
// stop or remove it" (release notes 0.47.0, manage.md, evidence §3.2).
// Before it a started sandbox stops itself again when idle.
var keepRunningVersion = cliutil.Version{0, 47, 0}

// startCalls start a stopped sandbox. Docker's sbx has no start command:
// `run -d --name N` is its way, from 0.47.0 (evidence §3.2). Earlier
// releases stop a sandbox again once idle, whatever starts it, so there
// sbx says what does start it instead of pretending.
func (d *Driver) startCalls(name string) ([]reconcile.Call, error) {
	if v, ok := d.cli.Known(); ok && v.Less(keepRunningVersion) {
		return nil, fmt.Errorf("Docker's sbx %s cannot keep a sandbox running without a session (sbx run -d keeps an existing sandbox running from %s on, evidence §3.2); it starts by itself on the next 'sbx shell' or 'sbx loop' (sbx exec starts a stopped sandbox)", v, keepRunningVersion)
	}
	return []reconcile.Call{d.call(true, "run", "-d", "--name", name)}, nil
}

// CheckpointCalls save the sandbox as a template of Docker's sbx, which
// needs it stopped ("cannot save a running sandbox", the v0.47.0 capture,
// evidence §2.1): a running sandbox is stopped, saved with `sbx template
// save SANDBOX TAG` (-o writes the archive too) and started again where
// the release can keep it running (startCalls). A saved template excludes
// the mounted workspaces, /var/lib/docker and the agent's configuration
// files (evidence §3.1).
func (d *Driver) CheckpointCalls(cp checkpoint.Checkpoint, live *reconcile.Live, output string) ([]reconcile.Call, error) {
	if live == nil || !live.Exists {
		return nil, fmt.Errorf("sandbox %q does not exist", cp.Sandbox)
	}
	running := live.Status == "running"
	var calls []reconcile.Call
	if running {
		calls = append(calls, d.call(true, "stop", cp.Sandbox))
	}
	args := []string{"template", "save", cp.Sandbox, checkpoint.Ref(cp.Name)}
	if output != "" {
		args = append(args, "-o", output)
	}
	calls = append(calls, d.call(true, args...))
	if running {
		start, err := d.startCalls(cp.Sandbox)
		if err != nil {
			last := &calls[len(calls)-1]
			last.Desc += "  # the sandbox stays stopped until the next exec: this sbx cannot start it and keep it running"
			return calls, nil
		}
		calls = append(calls, start...)
	}
	return calls, nil
}

// Checkpoints lists the templates tagged sbx-checkpoint:NAME (`sbx template
// ls --json`, parseTemplates).
func (d *Driver) Checkpoints(ctx context.Context) (map[string]checkpoint.Image, error) {
	args := []string{"template", "ls", "--json"}
	out, err := d.cli.Output(ctx, args...)
	if err != nil {
		return nil, err
	}
	images, err := parseTemplates(d.cli.Source(ctx, args...), out)
	if err != nil {
		return nil, err
	}
	cps := map[string]checkpoint.Image{}
	for _, img := range images {
		if img.Repository != "docker.io/library/"+checkpoint.Repository && img.Repository != checkpoint.Repository {
			continue
		}
		if checkpoint.ValidName(img.Tag) == nil {
			cps[img.Tag] = checkpoint.Image{ID: img.ID, Created: img.Created}
		}
	}
	return cps, nil
}

// RemoveCheckpoint is `sbx template rm TAG` (0.27.0), with -f from the
// release that asks for confirmation everywhere (forceVersion). A template
// already gone ("template 'x' not found", the v0.47.0 capture) is fine.
func (d *Driver) RemoveCheckpoint(ctx context.Context, name string) error {
	v, err := d.cli.Version(ctx)
	if err != nil {
		return err
	}
	args := []string{"template", "rm"}
	if !v.Less(forceVersion) {
		args = append(args, "-f")
	}
	err = d.call(true, append(args, checkpoint.Ref(name))...).Run(ctx)
	if err != nil && templateNotFound.MatchString(err.Error()) {
		return nil
	}
	return err
}

// templateNotFound matches the error of a template that does not exist
// ([3P-measured v0.47.0] "error: template 'hura-base:x' not found").
var templateNotFound = regexp.MustCompile(`template '[^']*' not found`)

// ExportCheckpoint cannot be done: Docker's sbx writes a template's archive
// only while it saves it.
func (d *Driver) ExportCheckpoint(ctx context.Context, name string, w io.Writer) error {
	return errors.New("Docker's sbx cannot export a saved template: its template commands are save, load, ls and rm (evidence §3.1), and only save writes an archive (-o); write it when saving: sbx checkpoint create NAME --output FILE")
}

// ImportCheckpoint is `sbx template load FILE TAG` (the v0.47.0 help:
// "Load an image from a tar file into the sandbox runtime's image store").
func (d *Driver) ImportCheckpoint(ctx context.Context, name, archive string) error {
	return d.call(true, "template", "load", archive, checkpoint.Ref(name)).Run(ctx)
}

// savedTemplate is one image of `sbx template ls --json`.
type savedTemplate struct {
	ID, Repository, Tag string
	Created             time.Time
}

// parseTemplates reads `sbx template ls --json` (evidence §1.8,
// [3P-measured v0.47.0]): {"images": [{id, repository
// ("docker.io/library/m101-tpl"), tag, flavor, created_at, size}]}. Read:
// id, repository and tag; created_at when it is RFC 3339. size is masked
// in the capture, so its form is unknown and it is not read.
func parseTemplates(src cliutil.Source, out []byte) ([]savedTemplate, error) {
	doc, root := cliutil.Decode(src, out)
	var list []savedTemplate
	for _, e := range root.Object().Field("images").Array(func(i int) string { return fmt.Sprintf("image %d", i+1) }) {
		o := e.Object()
		t := savedTemplate{ID: o.Field("id").String(), Repository: o.Field("repository").String(), Tag: o.Field("tag").String()}
		if v, ok := o.Opt("created_at"); ok {
			t.Created, _ = time.Parse(time.RFC3339, v.String())
		}
		list = append(list, t)
	}
	return list, doc.Err()
}
