package driver

import (
	"github.com/sbxhq/sbx/egress"
)

// maxRootBundle bounds the bundle read (a distribution's is ~220 kB).
const maxRootBundle = 8 << 20

// HostRoots is the CA bundle a sandbox's proxy verifies the upstreams of
// the tunnels it terminates (to add secrets) with: what the host's own
// TLS clients trust, $SSL_CERT_FILE when set (as Go and OpenSSL read
// it), else the distribution's bundle (egress.SystemBundles). The
// proxies run FROM scratch images with none of their own: it goes to
// them with the secrets (SetProxySecrets). A host file, never one of the
// sandbox's. nil when the host has none.
func HostRoots(lookupEnv func(string) (string, bool)) ([]byte, error) {
	paths := egress.SystemBundles
	if f, ok := lookupEnv("SSL_CERT_FILE"); ok && f != "" {
		paths = []string{f}
	}
	data, _, err := egress.FirstBundle(paths, maxRootBundle)
	return data, err
}
