package kittest

import (
	"sync"
	"testing"
	"time"
)

// TestOwnGoroutinesCountsOnlyTheTests: goroutines started from the test
// after OwnGoroutines (and from those) are counted, others are not, and
// ended ones stop being counted.
func TestOwnGoroutinesCountsOnlyTheTests(t *testing.T) {
	t.Parallel()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	t.Cleanup(func() { close(stop); wg.Wait() })
	// Started before: not the test's.
	wg.Go(func() { <-stop })
	count := OwnGoroutines(t)
	base := count()
	if base < 1 {
		t.Fatalf("OwnGoroutines counts %d goroutines, want at least the test's own", base)
	}
	end := make(chan struct{})
	var mine sync.WaitGroup
	for range 3 {
		mine.Go(func() {
			// Started from one of the test's: the test's too.
			mine.Go(func() { <-end })
			<-end
		})
	}
	Eventually(t, 5*time.Second, "the 6 goroutines counted", func() bool { return count() == base+6 })
	close(end)
	mine.Wait()
	Eventually(t, 5*time.Second, "the ended goroutines not counted", func() bool { return count() == base })
}
