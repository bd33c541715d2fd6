package egress

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestTrust: __ca-trust writes the CA and a bundle of the system's roots
// and the CA, adds the CA to the system store once (a second run, as
// every exec makes one, adds nothing), and takes only a CA's certificate:
// not a key, not two blocks.
func TestTrust(t *testing.T) {
	ca, err := NewCA("t")
	if err != nil {
		t.Fatal(err)
	}
	cert := ca.CertPEM()
	root := t.TempDir()
	store := filepath.Join(root, "etc", "ca-certificates.crt")
	if err := os.MkdirAll(filepath.Dir(store), 0o755); err != nil {
		t.Fatal(err)
	}
	system := "-----BEGIN CERTIFICATE-----\nsystem\n-----END CERTIFICATE-----\n"
	if err := os.WriteFile(store, []byte(system), 0o644); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, "trust")
	bundles := []string{filepath.Join(root, "absent.crt"), store}
	for range 2 {
		if err := trust(dir, bytes.NewReader(cert), bundles); err != nil {
			t.Fatal(err)
		}
	}
	read := func(p string) string {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	if got := read(filepath.Join(dir, TrustCert)); got != string(cert) {
		t.Errorf("%s = %q, want the CA", TrustCert, got)
	}
	if got := read(filepath.Join(dir, TrustBundle)); !strings.HasPrefix(got, system) || !strings.HasSuffix(got, string(cert)) {
		t.Errorf("%s = %q, want the system's roots then the CA", TrustBundle, got)
	}
	if got := read(store); strings.Count(got, string(bytes.TrimSpace(cert))) != 1 || !strings.HasPrefix(got, system) {
		t.Errorf("the system store = %q, want its roots and the CA once", got)
	}
	key, err := ca.MarshalPEM()
	if err != nil {
		t.Fatal(err)
	}
	for name, in := range map[string][]byte{"the CA with its key": key, "two certificates": append(append([]byte{}, cert...), cert...), "nothing": nil} {
		if err := trust(filepath.Join(root, "x"), bytes.NewReader(in), bundles); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	// A template without a store gets the bundle with the CA alone.
	if err := trust(filepath.Join(root, "bare"), bytes.NewReader(cert), []string{filepath.Join(root, "absent.crt")}); err != nil {
		t.Fatal(err)
	}
	if got := read(filepath.Join(root, "bare", TrustBundle)); strings.TrimSpace(got) != strings.TrimSpace(string(cert)) {
		t.Errorf("the bundle without a store = %q", got)
	}
}
