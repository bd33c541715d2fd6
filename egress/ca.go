package egress

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net/netip"
	"sync"
	"time"
)

// CA is a sandbox's certificate authority: the proxy signs with it the
// certificates it shows the sandbox for the hosts it adds secrets for
// (Intercept). The sandbox trusts its certificate; its key stays with the
// proxy and sbx, never in the sandbox. Made with crypto/x509, as Go's own
// httptest and every Go TLS-terminating proxy make theirs.
type CA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	der  []byte

	mu     sync.Mutex
	leaves map[string]*tls.Certificate // by host
}

// caValidity is how long a sandbox's CA is valid: a sandbox lives for
// months at most, and a new CA is one apply away.
const caValidity = 5 * 365 * 24 * time.Hour

// leafValidity is how long a host's certificate is valid; the proxy
// makes a new one once it is half gone.
const leafValidity = 7 * 24 * time.Hour

// NewCA makes a CA named for the sandbox.
func NewCA(sandbox string) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "sbx sandbox " + sandbox, Organization: []string{"sbx"}},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(caValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &CA{cert: cert, key: key, der: der, leaves: map[string]*tls.Certificate{}}, nil
}

// ParseCA reads a CA that MarshalPEM wrote.
func ParseCA(data []byte) (*CA, error) {
	var certDER, keyDER []byte
	for {
		var b *pem.Block
		b, data = pem.Decode(data)
		if b == nil {
			break
		}
		switch b.Type {
		case "CERTIFICATE":
			certDER = b.Bytes
		case "EC PRIVATE KEY":
			keyDER = b.Bytes
		default:
			return nil, fmt.Errorf("CA: unexpected PEM block %q", b.Type)
		}
	}
	if certDER == nil || keyDER == nil {
		return nil, errors.New("CA: want a CERTIFICATE and an EC PRIVATE KEY block")
	}
	cert, err := x509.ParseCertificate(certDER)
	if err != nil {
		return nil, fmt.Errorf("CA: %v", err)
	}
	key, err := x509.ParseECPrivateKey(keyDER)
	if err != nil {
		return nil, fmt.Errorf("CA: %v", err)
	}
	if !cert.IsCA || !key.PublicKey.Equal(cert.PublicKey) {
		return nil, errors.New("CA: the certificate is not a CA of this key")
	}
	return &CA{cert: cert, key: key, der: certDER, leaves: map[string]*tls.Certificate{}}, nil
}

// MarshalPEM is the CA's certificate and key, for the proxy alone.
func (ca *CA) MarshalPEM() ([]byte, error) {
	keyDER, err := x509.MarshalECPrivateKey(ca.key)
	if err != nil {
		return nil, err
	}
	out := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.der})
	return append(out, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})...), nil
}

// CertPEM is the CA's certificate alone: what the sandbox trusts.
func (ca *CA) CertPEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.der})
}

// leaf returns the certificate the proxy shows for host (a name, or an
// IP literal's text), made on first use and again once half its validity
// is gone.
func (ca *CA) leaf(host string) (*tls.Certificate, error) {
	ca.mu.Lock()
	defer ca.mu.Unlock()
	if c := ca.leaves[host]; c != nil && time.Until(c.Leaf.NotAfter) > leafValidity/2 {
		return c, nil
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: host},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(leafValidity),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	if a, err := netip.ParseAddr(host); err == nil {
		tmpl.IPAddresses = append(tmpl.IPAddresses, a.AsSlice())
	} else {
		tmpl.DNSNames = []string{host}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		return nil, err
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	c := &tls.Certificate{Certificate: [][]byte{der, ca.der}, PrivateKey: key, Leaf: leaf}
	ca.leaves[host] = c
	return c, nil
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		panic(err) // crypto/rand does not fail
	}
	return n
}
