package driver

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
)

// BinaryHash names an sbx binary by its content (12 hex digits of its
// SHA-256): the tag of the images the docker and kubernetes drivers build
// from it (sbx-egress, sbx-helper), so that a new sbx never runs an old
// binary in a sandbox's proxy or helper.
func BinaryHash(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil))[:12], nil
}
