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
)

// rootBundles are where Linux distributions keep the bundle of the CA
// certificates their TLS clients trust: the list Go's crypto/x509 reads
// (root_linux.go), in its order.
var rootBundles = []string{
	"/etc/ssl/certs/ca-certificates.crt",                // Debian, Ubuntu, Gentoo, Arch
	"/etc/pki/tls/certs/ca-bundle.crt",                  // Fedora, RHEL 6
	"/etc/ssl/ca-bundle.pem",                            // openSUSE
	"/etc/pki/tls/cacert.pem",                           // OpenELEC
	"/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem", // CentOS, RHEL 7
	"/etc/ssl/cert.pem",                                 // Alpine
}

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
	paths := rootBundles
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
