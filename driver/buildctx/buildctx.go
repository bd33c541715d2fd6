// Package buildctx fingerprints a template's build context the way docker
// build sees it: every file the .dockerignore does not exclude, by path,
// mode and content, plus the Dockerfile, build args and target. A changed
// hash is what makes sbx rebuild a template and replace the sandbox.
package buildctx

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"

	"github.com/moby/patternmatcher"
	"github.com/moby/patternmatcher/ignorefile"

	"github.com/sbxhq/sbx/internal/untrusted"
	"github.com/sbxhq/sbx/spec"
)

// Bounds on what Hash reads from a context the agent may be able to write.
const (
	maxIgnoreFile = 1 << 20
	maxContext    = 8 << 30 // bytes of file content hashed
)

// Hash returns "sha256:HEX" of the build: the context's files (honouring
// .dockerignore with docker's own matcher), the Dockerfile, args and target.
// Nothing outside the context is read: the walk never follows a symlink
// (it hashes the link's text), never opens anything but a regular file,
// and a Dockerfile or .dockerignore that is a symlink leading out of the
// context, or not a regular file, is an error.
func Hash(b *spec.Build) (string, error) {
	root, err := os.OpenRoot(b.Context)
	if err != nil {
		return "", fmt.Errorf("build context: %v", err)
	}
	defer root.Close()
	f, _, err := untrusted.Open(root, b.Dockerfile)
	if err != nil {
		return "", fmt.Errorf("build context %s: Dockerfile: %v", b.Context, err)
	}
	f.Close()
	excludes, err := readIgnore(root)
	if err != nil {
		return "", fmt.Errorf("build context %s: %v", b.Context, err)
	}
	pm, err := patternmatcher.New(excludes)
	if err != nil {
		return "", fmt.Errorf("%s: %v", filepath.Join(b.Context, ".dockerignore"), err)
	}
	h := sha256.New()
	fmt.Fprintf(h, "dockerfile\x00%s\x00target\x00%s\x00", b.Dockerfile, b.Target)
	keys := make([]string, 0, len(b.Args))
	for k := range b.Args {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(h, "arg\x00%s=%s\x00", k, b.Args[k])
	}
	budget := int64(maxContext)
	err = untrusted.Walk(context.Background(), root, func(e *untrusted.Entry) error {
		if e.Err != nil {
			return e.Err
		}
		rel := e.Path
		// The Dockerfile is always sent, even when ignored.
		if ok, err := pm.MatchesOrParentMatches(rel); err != nil {
			return err
		} else if ok && rel != filepath.ToSlash(b.Dockerfile) {
			if e.Info.IsDir() && !pm.Exclusions() {
				return fs.SkipDir
			}
			return nil
		}
		fmt.Fprintf(h, "%s\x00%o\x00", rel, e.Info.Mode())
		switch {
		case e.Info.Mode()&fs.ModeSymlink != 0:
			target, err := e.Readlink()
			if err != nil {
				return err
			}
			fmt.Fprintf(h, "link\x00%s\x00", target)
		case e.Info.Mode().IsRegular():
			f, _, err := e.Open()
			if err != nil {
				return err
			}
			n, err := io.Copy(h, io.LimitReader(f, budget+1))
			f.Close()
			if err != nil {
				return err
			}
			if budget -= n; budget < 0 {
				return fmt.Errorf("more than %d bytes of files", int64(maxContext))
			}
		}
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("hashing build context %s: %v", b.Context, err)
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil)), nil
}

func readIgnore(root *os.Root) ([]string, error) {
	data, err := untrusted.ReadFile(root, ".dockerignore", maxIgnoreFile)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return ignorefile.ReadAll(bytes.NewReader(data))
}

// DockerArgs are the arguments of `docker build` for b, tagged tag: the
// Dockerfile, build args and target, and no network unless the file gives
// the build one (template.build.network): a build gets no more network
// than the sandbox it makes, whose egress is the allow-list.
func DockerArgs(b *spec.Build, tag string) []string {
	args := []string{"build", "-t", tag, "-f", filepath.Join(b.Context, b.Dockerfile)}
	if !b.Network {
		args = append(args, "--network", "none")
	}
	keys := make([]string, 0, len(b.Args))
	for k := range b.Args {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		args = append(args, "--build-arg", k+"="+b.Args[k])
	}
	if b.Target != "" {
		args = append(args, "--target", b.Target)
	}
	return append(args, b.Context)
}
