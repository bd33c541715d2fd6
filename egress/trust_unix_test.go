//go:build unix

package egress

import (
	"bytes"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/sbxhq/sbx/internal/untrusted"
)

// TestTrustFIFO: a FIFO the agent put where the system's roots are does
// not hold __ca-trust (and so the exec sbx waits for): it is refused.
func TestTrustFIFO(t *testing.T) {
	ca, err := NewCA("t")
	if err != nil {
		t.Fatal(err)
	}
	store := filepath.Join(t.TempDir(), "ca-certificates.crt")
	if err := syscall.Mkfifo(store, 0o644); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		done <- trust(filepath.Join(t.TempDir(), "trust"), bytes.NewReader(ca.CertPEM()), []string{store}, untrusted.AppendPath)
	}()
	if err := <-done; err == nil {
		t.Error("a FIFO as the system's roots was accepted")
	}
}
