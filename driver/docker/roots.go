package docker

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"

	"github.com/sbxhq/sbx/driver"
	"github.com/sbxhq/sbx/egress"
)

// maxRootBundle bounds the bundle read (a distribution's is ~220 kB).
const maxRootBundle = 8 << 20

// hostRoots is the CA bundle the proxy verifies the upstreams of the
// tunnels it terminates with (to add secrets): what the host's own TLS
// clients trust, $SSL_CERT_FILE when set (as Go and OpenSSL read it),
// else the distribution's bundle. The proxy's image is FROM scratch and
// has none of its own. A host file, never one of the sandbox's. nil when
// the host has none: the proxy then verifies nothing and so terminates
// nothing (intercept refuses).
func hostRoots(lookupEnv func(string) (string, bool)) ([]byte, error) {
	paths := egress.SystemBundles
	if f, ok := lookupEnv("SSL_CERT_FILE"); ok && f != "" {
		paths = []string{f}
	}
	for _, p := range paths {
		f, err := os.Open(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		data, err := io.ReadAll(io.LimitReader(f, maxRootBundle+1))
		f.Close()
		if err != nil {
			return nil, err
		}
		if len(data) > maxRootBundle {
			return nil, fmt.Errorf("%s: CA bundle over %d bytes", p, maxRootBundle)
		}
		return data, nil
	}
	return nil, nil
}

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

func egressImageOf(binary string, lookupEnv func(string) (string, bool)) (tag string, roots []byte, err error) {
	if roots, err = hostRoots(lookupEnv); err != nil {
		return "", nil, err
	}
	tag, err = egressTagOf(binary, roots)
	return tag, roots, err
}
