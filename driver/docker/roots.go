package docker

import (
	"crypto/sha256"
	"encoding/hex"

	"github.com/sbxhq/sbx/driver"
)

// egressTagOf is the proxy image's tag for an sbx binary and the CA
// bundle it trusts: a hash of both.
func egressTagOf(binary string, roots []byte) (string, error) {
	h, err := driver.BinaryHash(binary)
	if err != nil {
		return "", err
	}
	if len(roots) == 0 {
		return egressRepo + ":" + h, nil
	}
	sum := sha256.Sum256(append([]byte(h+"\x00"), roots...))
	return egressRepo + ":" + hex.EncodeToString(sum[:])[:12], nil
}

// EgressImage is the proxy's image for an sbx binary and the environment
// sbx runs in (its SSL_CERT_FILE): tests that trust a CA of their own
// remove the image it makes.
func EgressImage(binary string, lookupEnv func(string) (string, bool)) (string, error) {
	tag, _, err := egressImageOf(binary, lookupEnv)
	return tag, err
}

// egressImageOf is the proxy's image and the CA bundle in it: the one
// the host trusts (driver.HostRoots).
func egressImageOf(binary string, lookupEnv func(string) (string, bool)) (tag string, roots []byte, err error) {
	if roots, err = driver.HostRoots(lookupEnv); err != nil {
		return "", nil, err
	}
	tag, err = egressTagOf(binary, roots)
	return tag, roots, err
}
