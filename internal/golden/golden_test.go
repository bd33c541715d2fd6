package golden

import (
	"os"
	"path/filepath"
	"testing"
)

// recorder is a testing.TB that records whether the check failed.
type recorder struct {
	testing.TB
	failed bool
}

func (r *recorder) Helper()               {}
func (r *recorder) Errorf(string, ...any) { r.failed = true }
func (r *recorder) Fatalf(string, ...any) { r.failed = true; panic(r) }
func (r *recorder) Fatal(...any)          { r.failed = true; panic(r) }
func check(t *testing.T, path, got string) bool {
	r := &recorder{TB: t}
	func() {
		defer func() {
			if p := recover(); p != nil && p != r {
				panic(p)
			}
		}()
		Check(r, path, []byte(got))
	}()
	return !r.failed
}

func TestCheck(t *testing.T) {
	defer func(was bool) { *update = was }(*update)
	*update = false
	path := filepath.Join(t.TempDir(), "sub", "out.golden")
	if check(t, path, "a\n") {
		t.Error("a missing golden file passed")
	}
	*update = true
	ok := check(t, path, "a\n")
	*update = false
	if !ok {
		t.Fatal("-update failed to write the file")
	}
	if b, err := os.ReadFile(path); err != nil || string(b) != "a\n" {
		t.Fatalf("-update wrote %q, %v", b, err)
	}
	if !check(t, path, "a\n") {
		t.Error("the same output failed")
	}
	if check(t, path, "b\n") {
		t.Error("a different output passed")
	}
}
