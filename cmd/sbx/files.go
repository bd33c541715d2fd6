package main

import (
	"os"
	"path/filepath"
)

// replaceFile writes data to path through a new file in the same
// directory renamed over it: whatever was at path, a symbolic link
// included, is replaced, never written through. (The workspace, where
// sandbox.yaml and saved plans usually live, is the sandbox's to write: a
// link planted there must not make sbx overwrite a host file.)
func replaceFile(path string, data []byte, perm os.FileMode) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, err = f.Write(data)
	if err == nil {
		err = f.Chmod(perm)
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
