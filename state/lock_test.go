package state

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestLockWaitsThenNamesHolder(t *testing.T) {
	dir := Dir(t.TempDir())
	ctx := context.Background()
	first, err := AcquireLock(ctx, dir, "api", LockOptions{Command: "sbx apply"})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = AcquireLock(ctx, dir, "api", LockOptions{Timeout: 300 * time.Millisecond, Poll: 20 * time.Millisecond, Command: "sbx apply -y"})
	if waited := time.Since(start); waited < 300*time.Millisecond {
		t.Errorf("second locker gave up after %s, before its timeout", waited)
	}
	host, _ := os.Hostname()
	want := fmt.Sprintf(`sandbox "api" is locked by pid %d on %s (sbx apply); gave up after 300ms`, os.Getpid(), host)
	if err == nil || err.Error() != want {
		t.Fatalf("got %v, want %q", err, want)
	}

	// Another sandbox is not blocked.
	other, err := AcquireLock(ctx, dir, "web", LockOptions{})
	if err != nil {
		t.Fatal(err)
	}
	other.Release()

	// The waiter gets the lock once the holder releases it.
	go func() {
		time.Sleep(50 * time.Millisecond)
		first.Release()
	}()
	second, err := AcquireLock(ctx, dir, "api", LockOptions{Timeout: 5 * time.Second, Poll: 10 * time.Millisecond, Command: "sbx apply -y"})
	if err != nil {
		t.Fatal(err)
	}
	defer second.Release()
	b, _ := os.ReadFile(filepath.Join(dir.Locks(), "api.lock"))
	if !strings.Contains(string(b), "(sbx apply -y)") {
		t.Errorf("lock file names %q", b)
	}
}

func TestLockHonoursContext(t *testing.T) {
	dir := Dir(t.TempDir())
	first, err := AcquireLock(context.Background(), dir, "api", LockOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer first.Release()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := AcquireLock(ctx, dir, "api", LockOptions{Timeout: time.Minute}); err == nil || !strings.Contains(err.Error(), "context canceled") {
		t.Fatalf("got %v", err)
	}
}
