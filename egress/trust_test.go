package egress

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/sbxhq/sbx/internal/untrusted"
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
		if err := trust(dir, bytes.NewReader(cert), bundles, untrusted.AppendPath); err != nil {
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
		if err := trust(filepath.Join(root, "x"), bytes.NewReader(in), bundles, untrusted.AppendPath); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	// A template without a store gets the bundle with the CA alone.
	if err := trust(filepath.Join(root, "bare"), bytes.NewReader(cert), []string{filepath.Join(root, "absent.crt")}, untrusted.AppendPath); err != nil {
		t.Fatal(err)
	}
	if got := read(filepath.Join(root, "bare", TrustBundle)); strings.TrimSpace(got) != strings.TrimSpace(string(cert)) {
		t.Errorf("the bundle without a store = %q", got)
	}
}

// TestTrustStoreNotWritable: a user who may not write the system store
// (a template that is not root, or a read-only root filesystem) still
// gets the CA and the bundle with it; the store is left alone. Any other
// failure to open the store is an error.
func TestTrustStoreNotWritable(t *testing.T) {
	ca, err := NewCA("t")
	if err != nil {
		t.Fatal(err)
	}
	cert := ca.CertPEM()
	system := "-----BEGIN CERTIFICATE-----\nsystem\n-----END CERTIFICATE-----\n"
	for _, tc := range []struct {
		name string
		err  error
		ok   bool
	}{
		{"permission denied", syscall.EACCES, true},
		{"operation not permitted", syscall.EPERM, true},
		{"read-only file system", syscall.EROFS, true},
		{"input/output error", syscall.EIO, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			store := filepath.Join(root, "ca-certificates.crt")
			if err := os.WriteFile(store, []byte(system), 0o644); err != nil {
				t.Fatal(err)
			}
			refuse := func(path string, data []byte) error {
				return &fs.PathError{Op: "open", Path: path, Err: tc.err}
			}
			dir := filepath.Join(root, "trust")
			err := trust(dir, bytes.NewReader(cert), []string{store}, refuse)
			if !tc.ok {
				if err == nil || !strings.Contains(err.Error(), "adding the CA to the system's roots") {
					t.Fatalf("trust: %v, want the store's error", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got, _ := os.ReadFile(filepath.Join(dir, TrustBundle)); !strings.HasPrefix(string(got), system) || !strings.HasSuffix(string(got), string(cert)) {
				t.Errorf("%s = %q, want the system's roots then the CA", TrustBundle, got)
			}
			if got, _ := os.ReadFile(store); string(got) != system {
				t.Errorf("the store was changed: %q", got)
			}
		})
	}
	// Not as root, a store the user may not write is the file system's
	// own refusal.
	if os.Geteuid() == 0 {
		return
	}
	root := t.TempDir()
	store := filepath.Join(root, "ca-certificates.crt")
	if err := os.WriteFile(store, []byte(system), 0o444); err != nil {
		t.Fatal(err)
	}
	if err := trust(filepath.Join(root, "trust"), bytes.NewReader(cert), []string{store}, untrusted.AppendPath); err != nil {
		t.Errorf("a read-only store: %v", err)
	}
}

// TestSecretFileMain: __secret-file writes its stdin to an absolute path,
// 0600, making the directory (0700), and replaces what was there whole.
func TestSecretFileMain(t *testing.T) {
	path := filepath.Join(t.TempDir(), "home", ".codex", "auth.json")
	var stderr bytes.Buffer
	for _, content := range []string{`{"OPENAI_API_KEY": "sk-sbx-1"}`, `{"OPENAI_API_KEY": "sk-sbx-2"}`} {
		if code := SecretFileMain([]string{path}, strings.NewReader(content), &stderr); code != 0 {
			t.Fatalf("exit %d: %s", code, stderr.String())
		}
		got, err := os.ReadFile(path)
		if err != nil || string(got) != content {
			t.Fatalf("%s = %q, %v; want %q", path, got, err, content)
		}
	}
	for p, want := range map[string]os.FileMode{path: 0o600, filepath.Dir(path): 0o700 | os.ModeDir} {
		if fi, err := os.Stat(p); err != nil || fi.Mode() != want {
			t.Errorf("%s: mode %v, %v; want %v", p, fi.Mode(), err, want)
		}
	}
	if code := SecretFileMain([]string{"relative/auth.json"}, strings.NewReader("x"), &stderr); code != 2 {
		t.Errorf("a relative path: exit %d, want 2", code)
	}
}
