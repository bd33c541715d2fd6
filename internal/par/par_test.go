package par

import (
	"runtime"
	"sync/atomic"
	"testing"
)

// TestEach: every index runs exactly once, whatever the CPUs.
func TestEach(t *testing.T) {
	for _, procs := range []int{1, 2, 8} {
		prev := runtime.GOMAXPROCS(procs)
		for _, n := range []int{0, 1, 2, 7, 500} {
			runs := make([]atomic.Int32, n)
			Each(n, func(i int) { runs[i].Add(1) })
			for i := range runs {
				if got := runs[i].Load(); got != 1 {
					t.Errorf("GOMAXPROCS %d, n %d: f(%d) ran %d times", procs, n, i, got)
				}
			}
		}
		runtime.GOMAXPROCS(prev)
	}
}
