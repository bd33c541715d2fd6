package driver

import (
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"fmt"
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

// CheckStatic reports whether path is a static Linux executable, which the
// containers can run whatever their image holds.
func CheckStatic(path string) error {
	f, err := elf.Open(path)
	if err != nil {
		return fmt.Errorf("%s is not a Linux executable (%v); the docker driver needs a static Linux build of sbx: CGO_ENABLED=0 GOOS=linux go build ./cmd/sbx, then set SBX_STATIC_BINARY to it", path, err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return fmt.Errorf("%s is dynamically linked; the docker driver needs a static build of sbx: CGO_ENABLED=0 go build ./cmd/sbx, then set SBX_STATIC_BINARY to it", path)
		}
	}
	return nil
}

// Labels (Docker labels, Kubernetes labels and annotations) on everything
// the docker and kubernetes drivers create: one set of keys, so that one
// grep, and one sweep, finds both.
const (
	LabelManaged = "dev.sbx.managed"
	LabelSandbox = "dev.sbx.sandbox"
	LabelRole    = "dev.sbx.role"
	LabelRecord  = "dev.sbx.record"
	// LabelOwner and LabelOwnerWorkspace are the host user and the
	// workspace a sandbox belongs to (reconcile.Owner), set by sbx when
	// it creates the sandbox: sbx ls tells the current user's sandboxes
	// from others' by them, without reading anything of the others'.
	// (Kubernetes keeps them as annotations: a path is no label value.)
	LabelOwner          = "dev.sbx.owner"
	LabelOwnerWorkspace = "dev.sbx.owner.workspace"
)
