// Package atomicfile replaces files whole: readers see the old content or
// the new, never a torn write, and a symbolic link at the path is
// replaced, never written through. sbx writes into directories the agent
// can write (the workspace, where sandbox.yaml, saved plans and exports
// live): a link planted there must not make sbx overwrite a host file.
package atomicfile

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
)

// Replace writes what write yields to path through a new file in the same
// directory, synced and renamed over path. On failure nothing is left but
// what was at path before.
func Replace(path string, perm os.FileMode, write func(w io.Writer) error) error {
	return replace(path, perm, true, write)
}

// ReplaceBytes is Replace of data, without the sync: for small state that
// is rewritten often (a crash loses the last update, never the file).
func ReplaceBytes(path string, data []byte, perm os.FileMode) error {
	return replace(path, perm, false, func(w io.Writer) error {
		_, err := io.Copy(w, bytes.NewReader(data))
		return err
	})
}

func replace(path string, perm os.FileMode, sync bool, write func(w io.Writer) error) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	err = write(f)
	if err == nil {
		err = f.Chmod(perm)
	}
	if err == nil && sync {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
	}
	return err
}
