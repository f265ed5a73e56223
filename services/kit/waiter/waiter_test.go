package waiter

import (
	"sync"
	"testing"
	"time"
)

func TestWakeWakesOnlyItsKeyAndUnregisters(t *testing.T) {
	t.Parallel()
	var h Hub
	a1, doneA1 := h.Wait("a")
	a2, doneA2 := h.Wait("a")
	b, doneB := h.Wait("b")
	defer doneA1()
	defer doneA2()
	h.Wake("a", "nobody")
	for _, c := range []<-chan struct{}{a1, a2} {
		select {
		case <-c:
		case <-time.After(time.Second):
			t.Fatal("a waiter of a was not woken")
		}
	}
	select {
	case <-b:
		t.Fatal("b was woken by a")
	default:
	}
	doneB()
	if n := h.Len(); n != 0 {
		t.Fatalf("%d waiters left registered", n)
	}
	h.Wake("b") // nobody left: must not panic on a closed channel
}

func TestConcurrentWaitAndWake(t *testing.T) {
	t.Parallel()
	var h Hub
	var wg sync.WaitGroup
	for i := range 200 {
		key := string(rune('a' + i%5))
		wg.Go(func() {
			c, done := h.Wait(key)
			defer done()
			select {
			case <-c:
			case <-time.After(50 * time.Millisecond):
			}
		})
		wg.Go(func() { h.Wake(key) })
	}
	wg.Wait()
	if n := h.Len(); n != 0 {
		t.Fatalf("%d waiters left registered", n)
	}
}
