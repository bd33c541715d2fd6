package spec_test

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/sbxhq/sbx/internal/fixture"
	"github.com/sbxhq/sbx/spec"
)

// TestHostileOverlayBounded plays the agent writing sandbox.local.yaml,
// which sbx reads on the host: overlays under MaxFileSize made to be
// costly (a mapping of 60,000 keys ending in a duplicate, a flow list of
// 10,000 entries, nesting as deep as go-yaml takes and one level deeper,
// block nesting as deep as the size bound allows) are each answered with
// a problem, promptly and within a bounded allocation. go-yaml refuses
// nesting past 10,000 levels itself; spec bounds the file's size
// (TestTooLarge) and alias expansion (TestAliasBombBounded).
func TestHostileOverlayBounded(t *testing.T) {
	sch := compile(t)
	tests := []struct {
		name, overlay, want string
		alloc               uint64 // the bound, about 1.5 times what was measured
	}{
		{"wide", wide(), "sandbox.local.yaml:60002:3: env.K0: duplicate key \"K0\" (first defined at line 2)", 208 << 20},
		{"deep flow, as deep as go-yaml takes", "mounts: " + nested(9990), "sandbox.local.yaml:1:10: mounts[0]: expected object or string, got list", 16 << 20},
		{"deep flow, past go-yaml's bound", "mounts: " + nested(10001), "sandbox.local.yaml: YAML syntax error: exceeded max depth of 10000", 16 << 20},
		{"deep block", deepBlock(1400), "sandbox.local.yaml:1:1: a: unknown key \"a\"", 16 << 20},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if len(tt.overlay) > spec.MaxFileSize {
				t.Fatalf("overlay of %d bytes, over MaxFileSize", len(tt.overlay))
			}
			dir := t.TempDir()
			base := filepath.Join(dir, "sandbox.yaml")
			for name, content := range map[string]string{"sandbox.yaml": "version: 1\nagent: claude\n", "sandbox.local.yaml": tt.overlay} {
				if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			var err error
			fixture.Promptly(t, func() { _, err = spec.Load([]string{base}, spec.Options{Schema: sch}) })
			runtime.ReadMemStats(&after)
			want := filepath.Join(dir, tt.want)
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("Load = %.300v, want a problem %s", err, want)
			}
			alloc := after.TotalAlloc - before.TotalAlloc
			t.Logf("loading the overlay (%d bytes) allocated %d MiB", len(tt.overlay), alloc>>20)
			if alloc > tt.alloc {
				t.Errorf("loading the overlay allocated %d MiB, want under %d MiB", alloc>>20, tt.alloc>>20)
			}
		})
	}
}

// wide is a mapping of 60,000 keys whose last repeats the first, and a
// flow list of 10,000 entries.
func wide() string {
	var b strings.Builder
	b.WriteString("env:\n")
	for i := range 60000 {
		fmt.Fprintf(&b, "  K%d: v\n", i)
	}
	b.WriteString("  K0: again\nmounts: [")
	for i := range 10000 {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "/m%d", i)
	}
	b.WriteString("]\n")
	return b.String()
}

// nested is n flow lists, each inside the last.
func nested(n int) string {
	return strings.Repeat("[", n) + strings.Repeat("]", n) + "\n"
}

// deepBlock is n block mappings, each inside the last.
func deepBlock(n int) string {
	var b strings.Builder
	for i := range n {
		b.WriteString(strings.Repeat(" ", i) + "a:\n")
	}
	return b.String()
}
