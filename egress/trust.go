package egress

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/sbxhq/sbx/internal/atomicfile"
	"github.com/sbxhq/sbx/internal/untrusted"
	"github.com/spf13/pflag"
)

// TrustVerb is the hidden verb of the static binary that makes a
// sandbox's commands trust its CA: run inside the sandbox, as root, by
// the driver, with the CA's certificate (PEM, never its key) on stdin.
const TrustVerb = "__ca-trust"

// Trust files, in the directory TrustMain is given.
const (
	TrustCert   = "sbx-ca.pem"        // the CA alone: NODE_EXTRA_CA_CERTS adds it to Node's roots
	TrustBundle = "sbx-ca-bundle.pem" // the system's roots and the CA: for variables that replace the roots
)

// TrustEnv is the environment that makes the common clients trust the
// CA whose files TrustMain wrote in dir: Node (the agents' CLIs) adds
// NODE_EXTRA_CA_CERTS to its roots; OpenSSL (curl, Python's ssl, Rust's
// native-tls and rustls-native-certs), Python's requests and git each
// replace their roots with a file, so they get the bundle, which keeps
// the system's roots.
func TrustEnv(dir string) map[string]string {
	bundle := dir + "/" + TrustBundle
	return map[string]string{
		"NODE_EXTRA_CA_CERTS": dir + "/" + TrustCert,
		"SSL_CERT_FILE":       bundle,
		"REQUESTS_CA_BUNDLE":  bundle,
		"CURL_CA_BUNDLE":      bundle,
		"GIT_SSL_CAINFO":      bundle,
	}
}

// SystemBundles are where Linux distributions keep the roots their TLS
// clients trust, as one PEM file, in the order Go's crypto/x509 looks for
// them (root_linux.go): Debian, Ubuntu, Gentoo and Arch; Fedora and RHEL
// 6; openSUSE; OpenELEC; CentOS and RHEL 7; Alpine.
var SystemBundles = []string{
	"/etc/ssl/certs/ca-certificates.crt",
	"/etc/pki/tls/certs/ca-bundle.crt",
	"/etc/ssl/ca-bundle.pem",
	"/etc/pki/tls/cacert.pem",
	"/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem",
	"/etc/ssl/cert.pem",
}

// FirstBundle reads the first of paths that exists (a bundle of roots),
// bounded to max bytes, without blocking on a FIFO (untrusted.ReadPath):
// its data and path, or nothing when none exists.
func FirstBundle(paths []string, max int64) ([]byte, string, error) {
	for _, p := range paths {
		data, err := untrusted.ReadPath(p, max)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, "", err
		}
		return data, p, nil
	}
	return nil, "", nil
}

// maxTrustInput bounds the certificate read from stdin and the system
// bundle read inside the sandbox (Debian's is about 200 KiB).
const maxTrustInput = 8 << 20

// TrustMain is __ca-trust DIR: it reads the CA's certificate on stdin,
// writes DIR/sbx-ca.pem and DIR/sbx-ca-bundle.pem (the template's system
// roots, if it has any, then the CA), and adds the CA to the template's
// system store where it has one (the first of SystemBundles) and may
// write it, once, so that clients that read only the store trust it
// too. Everything it reads is the sandbox's own; it runs on every exec
// that gets secrets, so a store the agent rewrote
// (update-ca-certificates) gets the CA again.
func TrustMain(args []string, stdin io.Reader, stderr io.Writer) int {
	fs := pflag.NewFlagSet("sbx "+TrustVerb, pflag.ContinueOnError)
	fs.SetOutput(stderr)
	if err := fs.Parse(args); err != nil || fs.NArg() != 1 {
		fmt.Fprintf(stderr, "usage: sbx %s DIR < CA.pem\n", TrustVerb)
		return 2
	}
	if err := trust(fs.Arg(0), stdin, SystemBundles, untrusted.AppendPath); err != nil {
		fmt.Fprintf(stderr, "sbx %s: %v\n", TrustVerb, err)
		return 1
	}
	return 0
}

func trust(dir string, stdin io.Reader, bundles []string, appendTo appendFile) error {
	cert, err := io.ReadAll(io.LimitReader(stdin, maxTrustInput+1))
	if err != nil {
		return err
	}
	if err := checkCert(cert); err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := atomicfile.ReplaceBytes(filepath.Join(dir, TrustCert), cert, 0o644); err != nil {
		return err
	}
	// The template's, or whatever the agent put there.
	system, store, err := FirstBundle(bundles, maxTrustInput)
	if err != nil {
		return fmt.Errorf("the system's roots: %v", err)
	}
	bundle := append(append([]byte{}, system...), '\n')
	if err := atomicfile.ReplaceBytes(filepath.Join(dir, TrustBundle), append(bundle, cert...), 0o644); err != nil {
		return err
	}
	if store == "" || bytes.Contains(system, bytes.TrimSpace(cert)) {
		return nil
	}
	err = appendTo(store, append([]byte("\n"), cert...))
	if errors.Is(err, fs.ErrPermission) || errors.Is(err, syscall.EROFS) {
		// A template whose user is not root (the kubernetes driver runs
		// the template's USER) may not write the store: its clients
		// trust the CA through the bundle (TrustEnv) only.
		return nil
	}
	if err != nil {
		return fmt.Errorf("adding the CA to the system's roots: %v", err)
	}
	return nil
}

// appendFile appends data to the file at path (untrusted.AppendPath);
// trust's tests give another.
type appendFile func(path string, data []byte) error

// checkCert accepts one PEM certificate of a CA, nothing else: a key
// never comes this way.
func checkCert(data []byte) error {
	if len(data) > maxTrustInput {
		return errors.New("the CA's certificate is too large")
	}
	b, rest := pem.Decode(data)
	if b == nil || b.Type != "CERTIFICATE" || len(bytes.TrimSpace(rest)) != 0 {
		return errors.New("stdin is not one PEM certificate")
	}
	c, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		return err
	}
	if !c.IsCA {
		return errors.New("the certificate is not a CA's")
	}
	return nil
}

// SecretFileVerb is the hidden verb of the static binary that writes a
// file secret inside the sandbox (its credentials already placeholders):
// run by the driver as the sandbox's user, the file on stdin.
const SecretFileVerb = "__secret-file"

// MaxSecretFile bounds a file secret.
const MaxSecretFile = 1 << 20

// SecretFileMain is __secret-file PATH: it writes stdin to PATH, mode
// 0600, through a file renamed over it, making its directory (0700) if
// it is missing.
func SecretFileMain(args []string, stdin io.Reader, stderr io.Writer) int {
	fs := pflag.NewFlagSet("sbx "+SecretFileVerb, pflag.ContinueOnError)
	fs.SetOutput(stderr)
	if err := fs.Parse(args); err != nil || fs.NArg() != 1 || !filepath.IsAbs(fs.Arg(0)) {
		fmt.Fprintf(stderr, "usage: sbx %s /PATH < FILE\n", SecretFileVerb)
		return 2
	}
	err := func() error {
		data, err := io.ReadAll(io.LimitReader(stdin, MaxSecretFile+1))
		if err != nil {
			return err
		}
		if len(data) > MaxSecretFile {
			return fmt.Errorf("more than %d bytes", MaxSecretFile)
		}
		if err := os.MkdirAll(filepath.Dir(fs.Arg(0)), 0o700); err != nil {
			return err
		}
		return atomicfile.ReplaceBytes(fs.Arg(0), data, 0o600)
	}()
	if err != nil {
		fmt.Fprintf(stderr, "sbx %s: %v\n", SecretFileVerb, err)
		return 1
	}
	return 0
}
