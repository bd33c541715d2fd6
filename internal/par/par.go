// Package par runs independent pieces of work on every CPU.
package par

import (
	"runtime"
	"sync"
	"sync/atomic"
)

// Each runs f(0) … f(n-1) on as many goroutines as there are CPUs for
// Go (at most n), and returns when all have returned. With one CPU or
// one piece it runs them in order on the caller's goroutine.
func Each(n int, f func(i int)) {
	workers := min(n, runtime.GOMAXPROCS(0))
	if workers <= 1 {
		for i := range n {
			f(i)
		}
		return
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				f(i)
			}
		}()
	}
	wg.Wait()
}
