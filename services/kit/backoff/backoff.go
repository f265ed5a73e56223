package backoff

import (
	"context"
	"math/rand/v2"
	"time"
)

// Defaults used for a zero Initial or Max.
const (
	DefaultInitial = 100 * time.Millisecond
	DefaultMax     = 5 * time.Second
)

// Backoff hands out the delays of one retry loop. The zero value is ready
// to use, with DefaultInitial and DefaultMax. A Backoff is not safe for
// concurrent use: give each loop its own.
type Backoff struct {
	// Initial bounds the first delay; DefaultInitial if zero.
	Initial time.Duration
	// Max bounds every delay; DefaultMax if zero (and at least Initial).
	Max time.Duration

	ceiling time.Duration // of the last delay; 0 before the first
}

// Next returns the next delay, drawn from [d/2, d] where d doubles from
// Initial at each call up to Max.
func (b *Backoff) Next() time.Duration {
	initial, limit := b.Initial, b.Max
	if initial <= 0 {
		initial = DefaultInitial
	}
	if limit <= 0 {
		limit = DefaultMax
	}
	limit = max(limit, initial)
	switch {
	case b.ceiling == 0:
		b.ceiling = initial
	case b.ceiling > limit/2:
		b.ceiling = limit
	default:
		b.ceiling *= 2
	}
	half := b.ceiling / 2
	return half + rand.N(b.ceiling-half+1)
}

// Reset makes the next delay start again from Initial; call it after a
// success (a connection that came up, an operation that went through).
func (b *Backoff) Reset() { b.ceiling = 0 }

// Sleep waits for d or until ctx ends, whichever comes first, and returns
// ctx.Err() if ctx ended (also when it had ended before the call).
func Sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// Retry calls op until it returns nil, backing off with b between calls,
// and returns nil then. When ctx ends first it returns op's last error
// without calling op again. Before each wait it calls notify, if not nil,
// with op's error and the delay (to log the retry). op is called at least
// once and runs on the caller's goroutine; it should itself respect ctx.
func Retry(ctx context.Context, b *Backoff, op func() error, notify func(err error, retryIn time.Duration)) error {
	for {
		err := op()
		if err == nil {
			b.Reset()
			return nil
		}
		if ctx.Err() != nil {
			return err
		}
		d := b.Next()
		if notify != nil {
			notify(err, d)
		}
		if Sleep(ctx, d) != nil {
			return err
		}
	}
}
