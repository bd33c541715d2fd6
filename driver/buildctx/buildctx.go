// Package buildctx fingerprints a template's build context the way docker
// build sees it: every file the .dockerignore does not exclude, by path,
// mode and content, plus the Dockerfile, build args and target. A changed
// hash is what makes sbx rebuild a template and replace the sandbox.
package buildctx

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"

	"github.com/moby/patternmatcher"
	"github.com/moby/patternmatcher/ignorefile"

	"github.com/sbxhq/sbx/spec"
)

// Hash returns "sha256:HEX" of the build: the context's files (honouring
// .dockerignore with docker's own matcher), the Dockerfile, args and target.
func Hash(b *spec.Build) (string, error) {
	excludes, err := readIgnore(b.Context)
	if err != nil {
		return "", err
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
	err = filepath.WalkDir(b.Context, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(b.Context, path)
		if err != nil || rel == "." {
			return err
		}
		rel = filepath.ToSlash(rel)
		// The Dockerfile is always sent, even when ignored.
		if ok, err := pm.MatchesOrParentMatches(rel); err != nil {
			return err
		} else if ok && rel != filepath.ToSlash(b.Dockerfile) {
			if d.IsDir() && !pm.Exclusions() {
				return filepath.SkipDir
			}
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		fmt.Fprintf(h, "%s\x00%o\x00", rel, info.Mode())
		switch {
		case info.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(path)
			if err != nil {
				return err
			}
			fmt.Fprintf(h, "link\x00%s\x00", target)
		case info.Mode().IsRegular():
			f, err := os.Open(path)
			if err != nil {
				return err
			}
			_, err = io.Copy(h, f)
			f.Close()
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("hashing build context %s: %v", b.Context, err)
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil)), nil
}

func readIgnore(dir string) ([]string, error) {
	f, err := os.Open(filepath.Join(dir, ".dockerignore"))
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ignorefile.ReadAll(f)
}
