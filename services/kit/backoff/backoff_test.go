package backoff_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/backoff"
)

func TestNextDoublesWithJitterUpToTheCap(t *testing.T) {
	t.Parallel()
	b := backoff.Backoff{Initial: 10 * time.Millisecond, Max: 80 * time.Millisecond}
	ceilings := []time.Duration{10, 20, 40, 80, 80, 80, 80}
	for round := range 200 {
		for i, c := range ceilings {
			c *= time.Millisecond
			if d := b.Next(); d < c/2 || d > c {
				t.Fatalf("round %d, delay %d: %v, want within [%v, %v]", round, i, d, c/2, c)
			}
		}
		b.Reset()
	}
	// The jitter draws: 200 draws of the capped delay are not all equal.
	seen := map[time.Duration]bool{}
	for range 200 {
		seen[b.Next()] = true
	}
	if len(seen) < 10 {
		t.Errorf("only %d distinct delays: no jitter", len(seen))
	}
}

func TestZeroValueUsesDefaultsAndNeverOverflows(t *testing.T) {
	t.Parallel()
	var b backoff.Backoff
	if d := b.Next(); d < backoff.DefaultInitial/2 || d > backoff.DefaultInitial {
		t.Errorf("first delay %v", d)
	}
	huge := backoff.Backoff{Initial: time.Second, Max: 1<<63 - 1}
	for i := range 100 {
		if d := huge.Next(); d <= 0 {
			t.Fatalf("delay %d overflowed: %v", i, d)
		}
	}
}

func TestSleepEndsWithTheContext(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(20*time.Millisecond, cancel)
	start := time.Now()
	if err := backoff.Sleep(ctx, time.Minute); !errors.Is(err, context.Canceled) {
		t.Fatalf("Sleep = %v, want context.Canceled", err)
	}
	if waited := time.Since(start); waited > 5*time.Second {
		t.Fatalf("Sleep returned %v after the cancel", waited)
	}
	if err := backoff.Sleep(ctx, time.Minute); !errors.Is(err, context.Canceled) {
		t.Fatalf("Sleep on an ended context = %v", err)
	}
	if err := backoff.Sleep(context.Background(), time.Millisecond); err != nil {
		t.Fatalf("Sleep = %v", err)
	}
}

func TestRetryUntilSuccess(t *testing.T) {
	t.Parallel()
	b := backoff.Backoff{Initial: time.Millisecond, Max: 4 * time.Millisecond}
	calls, notified := 0, 0
	err := backoff.Retry(context.Background(), &b, func() error {
		calls++
		if calls < 5 {
			return errors.New("not yet")
		}
		return nil
	}, func(err error, d time.Duration) {
		notified++
		if err == nil || d <= 0 || d > 4*time.Millisecond {
			t.Errorf("notify(%v, %v)", err, d)
		}
	})
	if err != nil || calls != 5 || notified != 4 {
		t.Fatalf("Retry = %v after %d calls, %d notifications; want nil after 5, 4", err, calls, notified)
	}
	if d := b.Next(); d > time.Millisecond {
		t.Errorf("a success did not reset the backoff: next delay %v", d)
	}
}

func TestRetryStopsWhenTheContextEnds(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	b := backoff.Backoff{Initial: time.Hour}
	failure := errors.New("down")
	calls := 0
	start := time.Now()
	err := backoff.Retry(ctx, &b, func() error { calls++; return failure }, nil)
	if !errors.Is(err, failure) || calls != 1 {
		t.Fatalf("Retry = %v after %d calls; want the op's error after 1", err, calls)
	}
	if time.Since(start) > 5*time.Second {
		t.Fatal("Retry slept through the context's end")
	}
}
