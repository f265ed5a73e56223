package waiter_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/waiter"
)

// poll runs h.Poll with a read that reports done once ready is set, and
// returns how many reads it made and Poll's error.
func poll(t testing.TB, ctx context.Context, h *waiter.Hub, o waiter.PollOptions, ready *atomic.Bool) (int, error) {
	t.Helper()
	reads := 0
	err := h.Poll(ctx, "k", o, func(context.Context) (bool, error) {
		reads++
		return ready.Load(), nil
	})
	if n := h.Len(); n != 0 {
		t.Errorf("%d waiters left registered", n)
	}
	return reads, err
}

// TestPollRereadsWithoutAnyWake: an outcome nobody here wakes for (another
// instance reached it) is still seen, by the periodic re-read.
func TestPollRereadsWithoutAnyWake(t *testing.T) {
	t.Parallel()
	var h waiter.Hub
	var ready atomic.Bool
	time.AfterFunc(50*time.Millisecond, func() { ready.Store(true) })
	start := time.Now()
	reads, err := poll(t, context.Background(), &h, waiter.PollOptions{Timeout: 10 * time.Second, Reread: 10 * time.Millisecond}, &ready)
	if err != nil || reads < 2 {
		t.Fatalf("Poll = %v after %d reads, want nil after several", err, reads)
	}
	if waited := time.Since(start); waited > 5*time.Second {
		t.Fatalf("the re-read took %v", waited)
	}
}

// TestPollWakeRereadsAtOnce: a Wake re-reads without waiting for Reread,
// and later wakes are heard too (Poll registers again after each).
func TestPollWakeRereadsAtOnce(t *testing.T) {
	t.Parallel()
	var h waiter.Hub
	var ready atomic.Bool
	go func() {
		for h.Len() == 0 {
			time.Sleep(time.Millisecond)
		}
		h.Wake("k") // a wake with nothing new yet
		for h.Len() == 0 {
			time.Sleep(time.Millisecond)
		}
		ready.Store(true)
		h.Wake("k")
	}()
	reads, err := poll(t, context.Background(), &h, waiter.PollOptions{Timeout: 10 * time.Second, Reread: time.Hour}, &ready)
	if err != nil || reads != 3 {
		t.Fatalf("Poll = %v after %d reads, want nil after 3", err, reads)
	}
}

func TestPollEnds(t *testing.T) {
	t.Parallel()
	var h waiter.Hub
	var never atomic.Bool
	if reads, err := poll(t, context.Background(), &h, waiter.PollOptions{Timeout: 50 * time.Millisecond, Reread: 10 * time.Millisecond}, &never); !errors.Is(err, waiter.ErrTimeout) || reads < 2 {
		t.Errorf("timeout: %v after %d reads", err, reads)
	}
	stop := make(chan struct{})
	time.AfterFunc(20*time.Millisecond, func() { close(stop) })
	if _, err := poll(t, context.Background(), &h, waiter.PollOptions{Timeout: time.Hour, Stop: stop}, &never); !errors.Is(err, waiter.ErrStopped) {
		t.Errorf("stop: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(20*time.Millisecond, cancel)
	if _, err := poll(t, ctx, &h, waiter.PollOptions{Timeout: time.Hour}, &never); !errors.Is(err, context.Canceled) {
		t.Errorf("ctx: %v", err)
	}
	failure := errors.New("backend down")
	if err := h.Poll(context.Background(), "k", waiter.PollOptions{Timeout: time.Hour}, func(context.Context) (bool, error) { return false, failure }); err != failure {
		t.Errorf("read error: %v", err)
	}
}
