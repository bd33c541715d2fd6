package docker

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/sbxhq/sbx/spec"
)

// Who the agent runs as. A file that names no user gets, when its
// template's image names none or root, the owner of the workspace on the
// host (as devcontainers' updateRemoteUserUID gives the container's user
// the host user's uid), so that what the agent writes into the repository
// is the user's and not root's. A template's own non-root USER is kept,
// as is root for a workspace root owns. labelUserDefault records what
// was chosen: Config.User alone cannot tell it from a file's user.
//
// A uid the image has no passwd entry for would run with HOME=/ (which it
// cannot write) and no name: before the container first starts, sbx adds
// an entry for it to the container's /etc/passwd, with a home directory
// /home/sbx the uid owns (ensureUser). Docker sets HOME from that entry
// for every process of the container and its execs.
const labelUserDefault = "dev.sbx.user.default"

const (
	sbxHome = "/home/sbx"
	// maxPasswd bounds the /etc/passwd sbx reads out of a template (a
	// checkpoint's is whatever the agent left in it).
	maxPasswd = 1 << 20
)

// chooseUser sets who the sandbox container c, made from its template
// image, runs as when the file names no user: the workspace's owner when
// the image's USER is unset or root and the owner is not root. It leaves
// c as it is when the daemon has no such image (yet): creating the
// container then fails or pulls it, and chooseUser runs again.
func (d *Driver) chooseUser(ctx context.Context, sp *spec.Spec, c *containerSpec) error {
	if sp.User != "" {
		return nil
	}
	uid, gid, ok := ownerOf(sp.Workspace.Path)
	if !ok || uid == 0 {
		return nil
	}
	img, err := d.api.inspectImage(ctx, c.Image)
	if err != nil || img == nil {
		return err
	}
	if !rootUser(img.Config.User) {
		return nil
	}
	c.User = fmt.Sprintf("%d:%d", uid, gid)
	c.Labels[labelUserDefault] = c.User
	return nil
}

// rootUser reports whether an image's USER (user[:group], by name or
// number) is root: unset, "root" or uid 0.
func rootUser(u string) bool {
	name, _, _ := strings.Cut(u, ":")
	return name == "" || name == "root" || name == "0"
}

// numericUser parses a container user "uid" or "uid:gid" (a name is not
// numeric); gid is uid when the user names none.
func numericUser(u string) (uid, gid int, ok bool) {
	us, gs, hasGroup := strings.Cut(u, ":")
	uid, err := strconv.Atoi(us)
	if err != nil || uid < 0 {
		return 0, 0, false
	}
	gid = uid
	if hasGroup {
		if gid, err = strconv.Atoi(gs); err != nil || gid < 0 {
			return 0, 0, false
		}
	}
	return uid, gid, true
}

// ensureUser gives a created, not yet started, container's numeric
// non-root user (c.User) an /etc/passwd entry and a home when its image
// has none for the uid: it reads the image's /etc/passwd (at most
// maxPasswd bytes, a regular file or none), adds a line for the uid and
// puts both back with /home/sbx, owned by the uid, through the daemon's
// archive endpoint. A uid with an entry is left as the image has it.
func (e *engine) ensureUser(ctx context.Context, id, user string) error {
	uid, gid, ok := numericUser(user)
	if !ok || uid == 0 {
		return nil
	}
	passwd, err := e.readPasswd(ctx, id)
	if err != nil {
		return err
	}
	updated, add := withUser(passwd, uid, gid)
	if !add {
		return nil
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	now := time.Now()
	for _, h := range []*tar.Header{
		{Name: "etc/", Typeflag: tar.TypeDir, Mode: 0o755, ModTime: now},
		{Name: "etc/passwd", Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(updated)), ModTime: now},
		{Name: "home/", Typeflag: tar.TypeDir, Mode: 0o755, ModTime: now},
		{Name: strings.TrimPrefix(sbxHome, "/") + "/", Typeflag: tar.TypeDir, Mode: 0o755, Uid: uid, Gid: gid, ModTime: now},
	} {
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if h.Typeflag == tar.TypeReg {
			if _, err := tw.Write(updated); err != nil {
				return err
			}
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	if _, err := e.do(ctx, http.MethodPut, "/containers/"+url.PathEscape(id)+"/archive", url.Values{"path": {"/"}}, &buf, "application/x-tar"); err != nil {
		return fmt.Errorf("giving uid %d a passwd entry and a home in the sandbox: %v", uid, err)
	}
	return nil
}

// readPasswd returns a container's /etc/passwd: nil when there is none,
// or when it is not a regular file (a link or a directory in the image is
// replaced, not followed). One larger than maxPasswd is refused.
func (e *engine) readPasswd(ctx context.Context, id string) ([]byte, error) {
	rc, err := e.archive(ctx, id, "/etc/passwd")
	if notFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	tr := tar.NewReader(rc)
	h, err := tr.Next()
	if err != nil {
		return nil, fmt.Errorf("reading the template's /etc/passwd: %v", err)
	}
	if h.Typeflag != tar.TypeReg {
		return nil, nil
	}
	if h.Size > maxPasswd {
		return nil, fmt.Errorf("the template's /etc/passwd is %d bytes, more than the %d sbx reads", h.Size, maxPasswd)
	}
	data, err := io.ReadAll(io.LimitReader(tr, maxPasswd))
	if err != nil {
		return nil, fmt.Errorf("reading the template's /etc/passwd: %v", err)
	}
	return data, nil
}

// withUser returns passwd with a line for uid added, and whether one was
// needed: none of its entries has the uid. The name is "sbx", or
// "sbx-UID" when another entry has that name; the home is /home/sbx.
func withUser(passwd []byte, uid, gid int) ([]byte, bool) {
	names := map[string]bool{}
	for _, line := range strings.Split(string(passwd), "\n") {
		f := strings.Split(line, ":")
		if len(f) < 3 {
			continue
		}
		if f[2] == strconv.Itoa(uid) {
			return passwd, false
		}
		names[f[0]] = true
	}
	name := "sbx"
	if names[name] {
		name = "sbx-" + strconv.Itoa(uid)
	}
	out := append([]byte(nil), passwd...)
	if len(out) > 0 && out[len(out)-1] != '\n' {
		out = append(out, '\n')
	}
	out = fmt.Appendf(out, "%s:x:%d:%d:sbx agent:%s:/bin/sh\n", name, uid, gid, sbxHome)
	return out, true
}
