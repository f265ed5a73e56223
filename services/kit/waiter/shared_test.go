package waiter_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/waiter"
)

// TestSharedRereadDoesNotScaleWithWaiters: N waiters of keys whose
// outcome never comes make one Check per interval between them, whatever
// N, and each reads its own key once. When one outcome comes in, only
// its waiters read again; when all leave, the re-read goroutine ends.
func TestSharedRereadDoesNotScaleWithWaiters(t *testing.T) {
	t.Parallel()
	for _, n := range []int{10, 1000} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			t.Parallel()
			var h waiter.Hub
			var ready sync.Map
			var checked atomic.Int64
			s := waiter.NewRereader(&h, 20*time.Millisecond, time.Second, func(_ context.Context, keys []string) ([]string, error) {
				checked.Add(int64(len(keys)))
				var done []string
				for _, k := range keys {
					if _, ok := ready.Load(k); ok {
						done = append(done, k)
					}
				}
				return done, nil
			})
			var reads atomic.Int64
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var wg sync.WaitGroup
			errs := make([]error, n)
			for i := range n {
				key := fmt.Sprint("k", i)
				wg.Go(func() {
					errs[i] = h.Poll(ctx, key, waiter.PollOptions{Timeout: time.Minute, Shared: s}, func(context.Context) (bool, error) {
						reads.Add(1)
						_, ok := ready.Load(key)
						return ok, nil
					})
				})
			}
			waitFor(t, func() bool { return reads.Load() == int64(n) })
			before := s.Checks()
			time.Sleep(200 * time.Millisecond) // about 10 intervals
			checks := s.Checks() - before
			if checks < 2 || checks > 15 {
				t.Errorf("%d waiters made %d checks in 200ms at a 20ms interval, want about 10", n, checks)
			}
			if r := reads.Load(); r != int64(n) {
				t.Errorf("%d waiters read %d times while nothing changed, want %d (one each)", n, r, n)
			}
			// One outcome in: the next check wakes its waiter only.
			ready.Store("k0", true)
			waitFor(t, func() bool { return reads.Load() == int64(n)+1 })
			time.Sleep(60 * time.Millisecond)
			if r := reads.Load(); r != int64(n)+1 {
				t.Errorf("reads %d after one outcome, want %d", r, n+1)
			}
			cancel()
			wg.Wait()
			if errs[0] != nil {
				t.Errorf("the waiter of the outcome: %v", errs[0])
			}
			for i := 1; i < n; i++ {
				if !errors.Is(errs[i], context.Canceled) {
					t.Fatalf("waiter %d: %v, want canceled", i, errs[i])
				}
			}
			waitFor(t, func() bool { return !s.Running() && h.Len() == 0 })
		})
	}
}

// TestSharedRereadFailureWakesEveryone: a failed check wakes every
// waiter, whose own read then reports the backend's error at once.
func TestSharedRereadFailureWakesEveryone(t *testing.T) {
	t.Parallel()
	var h waiter.Hub
	down := errors.New("backend down")
	var failing atomic.Bool
	s := waiter.NewRereader(&h, 10*time.Millisecond, time.Second, func(context.Context, []string) ([]string, error) {
		if failing.Load() {
			return nil, down
		}
		return nil, nil
	})
	var wg sync.WaitGroup
	errs := make([]error, 5)
	for i := range errs {
		wg.Go(func() {
			errs[i] = h.Poll(context.Background(), fmt.Sprint(i), waiter.PollOptions{Timeout: time.Minute, Shared: s}, func(context.Context) (bool, error) {
				if failing.Load() {
					return false, down
				}
				return false, nil
			})
		})
	}
	time.Sleep(30 * time.Millisecond)
	failing.Store(true)
	wg.Wait()
	for i, err := range errs {
		if !errors.Is(err, down) {
			t.Errorf("waiter %d: %v, want the backend's error", i, err)
		}
	}
}

// TestSharedRereadLeavesNoGoroutine: after a burst of waiters leaves,
// the goroutine count is back near where it was within a few intervals.
func TestSharedRereadLeavesNoGoroutine(t *testing.T) {
	var h waiter.Hub
	s := waiter.NewRereader(&h, 10*time.Millisecond, time.Second, func(context.Context, []string) ([]string, error) { return nil, nil })
	base := runtime.NumGoroutine()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for i := range 500 {
		wg.Go(func() {
			_ = h.Poll(ctx, fmt.Sprint(i), waiter.PollOptions{Timeout: time.Minute, Shared: s}, func(context.Context) (bool, error) { return false, nil })
		})
	}
	waitFor(t, func() bool { return h.Len() == 500 })
	cancel()
	wg.Wait()
	waitFor(t, func() bool { return runtime.NumGoroutine() <= base+2 && !s.Running() })
}

func waitFor(t testing.TB, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached within 5s")
		}
		time.Sleep(2 * time.Millisecond)
	}
}
