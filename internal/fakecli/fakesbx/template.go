package fakesbx

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/sbxhq/sbx/internal/fakecli"
	"github.com/sbxhq/sbx/internal/fakecli/fakestate"
)

// imageRef splits an image reference into the repository sbx stores and a
// tag: a bare name lives under docker.io/library/ (evidence §3.1: "Tags
// are stored as docker.io/library/<tag>").
func imageRef(ref string) (repo, tag string) {
	repo, tag = ref, "latest"
	if i := strings.LastIndex(ref, ":"); i > strings.LastIndex(ref, "/") {
		repo, tag = ref[:i], ref[i+1:]
	}
	first, _, found := strings.Cut(repo, "/")
	switch {
	case !found:
		repo = "docker.io/library/" + repo
	case !strings.ContainsAny(first, ".:") && first != "localhost":
		repo = "docker.io/" + repo
	}
	return repo, tag
}

// findTemplate returns the index of the image ref names (by reference,
// short or full, or ID), or -1.
func findTemplate(st *fakestate.State, ref string) int {
	repo, tag := imageRef(ref)
	for i, t := range st.Templates {
		if t.ID == ref || t.Repository == repo && t.Tag == tag {
			return i
		}
	}
	return -1
}

// addTemplate stores (or replaces) an image.
func (a *app) addTemplate(st *fakestate.State, ref, flavor string) fakestate.Template {
	repo, tag := imageRef(ref)
	h := sha256.Sum256([]byte(fmt.Sprintf("%s:%s\x00%d", repo, tag, st.Seq)))
	st.Seq++
	t := fakestate.Template{Repository: repo, Tag: tag, ID: hex.EncodeToString(h[:])[:12], Flavor: flavor,
		CreatedAt: a.Now, Size: 512 << 20}
	if i := findTemplate(st, ref); i >= 0 {
		st.Templates[i] = t
	} else {
		st.Templates = append(st.Templates, t)
	}
	return t
}

// templateSave is `sbx template save SANDBOX TAG [-o FILE]` (evidence
// §3.1, the v0.47.0 capture): the sandbox must be stopped; a running one
// is refused after the prompt to stop it. -o also writes a tar that
// `template load` reads back.
func (a *app) templateSave(args []string) error {
	fs := fakecli.Flags("template save")
	output := fs.StringP("output", "o", "", "Also export the image to a tar file")
	args, err := a.parse(fs, args)
	if err != nil {
		return err
	}
	if err := argsCheck(args, 2, 2); err != nil {
		return err
	}
	var t fakestate.Template
	if err := a.Store.Update(func(st *fakestate.State) error {
		sb, err := a.lookup(st, args[0])
		if err != nil {
			return err
		}
		if sb.Status == "running" {
			ok := false
			if a.Version.AtLeast(vConfirm) {
				ok, err = a.confirm(false, fmt.Sprintf("Sandbox %s is running and must be stopped before saving. Stop it now?", sb.Name), "sbx stop "+sb.Name)
				if err != nil {
					return err
				}
			}
			if !ok {
				return &fakecli.Error{Msg: "cannot save a running sandbox; stop it first with:", Hint: "sbx stop " + sb.Name, Code: 1}
			}
			sb.Status, sb.Detached = "stopped", false
		}
		t = a.addTemplate(st, args[1], sb.Agent)
		return nil
	}); err != nil {
		return err
	}
	fmt.Fprintln(a.Stdout, "Snapshotting image in sandbox ...")
	if *output != "" {
		fmt.Fprintf(a.Stdout, "Exporting image to %s ...\n", *output)
		if err := writeImageTar(*output, args[1]); err != nil {
			return errf("%v", err)
		}
		fmt.Fprintf(a.Stdout, "Exported to %s\n", *output)
	}
	fmt.Fprintf(a.Stdout, "\nSave complete. To use the image as a template:\n    sbx run --pull never -t %s:%s AGENT [WORKSPACE]\n", t.Repository, t.Tag)
	return nil
}

// writeImageTar writes a minimal image archive naming ref, in the layout
// `docker image save` writes (manifest.json with RepoTags).
func writeImageTar(path, ref string) error {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	manifest, _ := json.Marshal([]map[string]any{{"Config": "config.json", "RepoTags": []string{ref}, "Layers": []string{}}})
	// The configuration holds what every image's does (the OCI image
	// configuration's platform and rootfs), of no layers.
	config := `{"architecture":"amd64","os":"linux","rootfs":{"type":"layers","diff_ids":[]}}`
	for _, f := range []struct{ name, body string }{{"manifest.json", string(manifest)}, {"config.json", config}} {
		if err := tw.WriteHeader(&tar.Header{Name: f.name, Mode: 0o644, Size: int64(len(f.body))}); err != nil {
			return err
		}
		if _, err := io.WriteString(tw, f.body); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return os.WriteFile(path, buf.Bytes(), 0o644)
}

// imageTarRef reads the image reference of a `docker image save` archive:
// manifest.json's first RepoTag.
func imageTarRef(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return "", errors.New("not an image archive: no manifest.json")
		}
		if err != nil {
			return "", fmt.Errorf("not an image archive: %v", err)
		}
		if h.Name != "manifest.json" {
			continue
		}
		var m []struct{ RepoTags []string }
		if err := json.NewDecoder(tr).Decode(&m); err != nil || len(m) == 0 || len(m[0].RepoTags) == 0 {
			return "", errors.New("not an image archive: manifest.json names no image")
		}
		return m[0].RepoTags[0], nil
	}
}

// templateLoad is `sbx template load FILE [NAME]`: "Load an image from a
// tar file into the sandbox runtime's image store" (v0.47.0 help). Its
// output is UNCONFIRMED.
func (a *app) templateLoad(args []string) error {
	args, err := a.parse(fakecli.Flags("template load"), args)
	if err != nil {
		return err
	}
	if err := argsCheck(args, 1, 2); err != nil {
		return err
	}
	ref, err := imageTarRef(args[0])
	if err != nil {
		return errf("load %s: %v", args[0], err)
	}
	if len(args) == 2 {
		ref = args[1]
	}
	var t fakestate.Template
	if err := a.Store.Update(func(st *fakestate.State) error {
		t = a.addTemplate(st, ref, "")
		return nil
	}); err != nil {
		return err
	}
	fmt.Fprintf(a.Stdout, "Loaded %s:%s\n", t.Repository, t.Tag)
	return nil
}

// templateJSON is one image of `sbx template ls --json` (evidence §1.8,
// [3P-measured v0.47.0]): {"images": [{id (12 characters), repository,
// tag, flavor, created_at, size}]}. size is masked as a string in the
// capture; the fake prints a size in bytes as a string (UNCONFIRMED).
type templateJSON struct {
	ID         string `json:"id"`
	Repository string `json:"repository"`
	Tag        string `json:"tag"`
	Flavor     string `json:"flavor,omitempty"`
	CreatedAt  string `json:"created_at"`
	Size       string `json:"size"`
}

func (a *app) templateLs(args []string) error {
	fs := fakecli.Flags("template ls")
	jsonFlag := fs.Bool("json", false, "Output in JSON format")
	quiet := fs.BoolP("quiet", "q", false, "Only display image IDs")
	args, err := a.parse(fs, args)
	if err != nil {
		return err
	}
	if err := argsCheck(args, 0, 0); err != nil {
		return err
	}
	var ts []fakestate.Template
	if err := a.Store.View(func(st *fakestate.State) error { ts = st.Templates; return nil }); err != nil {
		return err
	}
	switch {
	case *quiet:
		for _, t := range ts {
			fmt.Fprintln(a.Stdout, t.ID)
		}
		return nil
	case *jsonFlag:
		out := []templateJSON{}
		for _, t := range ts {
			out = append(out, templateJSON{ID: t.ID, Repository: t.Repository, Tag: t.Tag, Flavor: t.Flavor,
				CreatedAt: t.CreatedAt.Format(time.RFC3339), Size: strconv.FormatInt(t.Size, 10)})
		}
		return a.JSON(map[string]any{"images": out})
	}
	rows := [][]string{{"REPOSITORY", "TAG", "IMAGE ID", "FLAVOR"}} // UNCONFIRMED layout
	for _, t := range ts {
		rows = append(rows, []string{t.Repository, t.Tag, t.ID, t.Flavor})
	}
	return fakecli.Table(a.Stdout, rows)
}

// templateRm is `sbx template rm TAG|ID [-f]`; "Removed: m101-tpl:v1" in
// the v0.47.0 capture.
func (a *app) templateRm(args []string) error {
	fs := fakecli.Flags("template rm")
	fs.BoolP("force", "f", false, "Skip confirmation")
	args, err := a.parse(fs, args)
	if err != nil {
		return err
	}
	if err := argsCheck(args, 1, -1); err != nil {
		return err
	}
	if err := a.Store.Update(func(st *fakestate.State) error {
		for _, ref := range args {
			i := findTemplate(st, ref)
			if i < 0 {
				return errf("template '%s' not found", ref)
			}
			st.Templates = append(st.Templates[:i], st.Templates[i+1:]...)
		}
		return nil
	}); err != nil {
		return err
	}
	for _, ref := range args {
		fmt.Fprintf(a.Stdout, "Removed: %s\n", ref)
	}
	return nil
}
