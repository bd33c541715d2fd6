package egress

import (
	"os"
	"testing"
)

// TestMain runs ServiceInitMain instead of the tests when the tests of
// the service init start the test binary as a process of its own.
func TestMain(m *testing.M) {
	if os.Getenv("SBX_SERVICE_INIT_HELPER") == "1" {
		serviceInitHelper()
	}
	os.Exit(m.Run())
}
