//go:build unix

package state

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestLockHandedDown: a lock's file handed to another holder (a child
// process gets another descriptor of the same open file) keeps the lock
// after the first holder closes its copy with Disown; a descriptor of the
// lock file that does not hold it cannot be adopted.
func TestLockHandedDown(t *testing.T) {
	dir := Dir(t.TempDir())
	ctx := context.Background()
	first, err := AcquireLock(ctx, dir, "api", LockOptions{Command: "sbx loop"})
	if err != nil {
		t.Fatal(err)
	}
	fd, err := syscall.Dup(int(first.File().Fd()))
	if err != nil {
		t.Fatal(err)
	}
	child := os.NewFile(uintptr(fd), "inherited")
	if err := first.Disown(); err != nil {
		t.Fatal(err)
	}
	if _, err := AcquireLock(ctx, dir, "api", LockOptions{}); err == nil {
		t.Fatal("the lock was freed when its first holder disowned it")
	}
	second, err := AdoptLock(child, "sbx loop --detach")
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir.Locks(), "api.lock")); !strings.Contains(string(b), "(sbx loop --detach)") {
		t.Errorf("lock file names %q", b)
	}
	// Another open file of the lock does not hold it.
	f, err := os.Open(filepath.Join(dir.Locks(), "api.lock"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := AdoptLock(f, "x"); err == nil || !strings.Contains(err.Error(), "another process holds it") {
		t.Errorf("adopting a lock held elsewhere: %v", err)
	}
	second.Release()
	third, err := AcquireLock(ctx, dir, "api", LockOptions{})
	if err != nil {
		t.Fatalf("after release: %v", err)
	}
	third.Release()
}
