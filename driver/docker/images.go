package docker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/sbxhq/sbx/driver"
)

// egressRepo is the repository of the proxy images: one tag per sbx
// binary (a hash of it).
const egressRepo = "sbx-egress"

// pruneAfter is how old an unused proxy image of another sbx binary must
// be before this one removes it (when it builds its own, and whenever it
// removes a sandbox): a younger one may belong to an sbx creating a
// sandbox on this daemon right now. A create that finds its image gone
// builds it again (startEgress).
const pruneAfter = 10 * time.Minute

var _ driver.TemplateChecker = (*Driver)(nil)

// TemplatePresent reports whether the daemon has the image (sbx doctor:
// a create pulls a missing one, which fails where no registry answers).
func (d *Driver) TemplatePresent(ctx context.Context, image string) (bool, error) {
	return d.api.imageExists(ctx, image)
}

// pruneImages removes the images of repo that sbx made (labelled
// driver.LabelManaged), other than keep, created before olderThan ago; the
// daemon refuses to remove one a container uses, and that refusal is not
// an error. It returns the tags removed.
func (d *Driver) pruneImages(ctx context.Context, repo, keep string, olderThan time.Duration) ([]string, error) {
	f, _ := json.Marshal(map[string][]string{"reference": {repo}, "label": {driver.LabelManaged + "=true"}})
	data, err := d.api.do(ctx, http.MethodGet, "/images/json", url.Values{"filters": {string(f)}}, nil, "")
	if err != nil {
		return nil, err
	}
	var list []struct {
		RepoTags []string
		Created  int64
	}
	if err := json.Unmarshal(data, &list); err != nil {
		return nil, fmt.Errorf("listing images: %v", err)
	}
	cutoff := time.Now().Add(-olderThan).Unix()
	var removed []string
	for _, img := range list {
		if img.Created > cutoff {
			continue
		}
		for _, tag := range img.RepoTags {
			if tag == keep {
				continue
			}
			_, err := d.api.do(ctx, http.MethodDelete, "/images/"+url.PathEscape(tag), nil, nil, "")
			var ae *apiError
			switch {
			case err == nil:
				removed = append(removed, tag)
			case notFound(err), errors.As(err, &ae) && ae.Status == http.StatusConflict:
				// Gone already, or a container uses it.
			default:
				return removed, err
			}
		}
	}
	return removed, nil
}
