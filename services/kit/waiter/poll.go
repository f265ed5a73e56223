package waiter

import (
	"context"
	"errors"
	"time"
)

// DefaultReread is how often Poll re-reads when PollOptions.Reread is zero.
const DefaultReread = 250 * time.Millisecond

// Errors Poll returns when it ends before read reported done.
var (
	// ErrTimeout: PollOptions.Timeout passed (a long poll answers 408).
	ErrTimeout = errors.New("waiter: timed out")
	// ErrStopped: PollOptions.Stop was closed (the service is shutting
	// down; a long poll answers 503 so that the HTTP drain is not held).
	ErrStopped = errors.New("waiter: stopped")
)

// PollOptions bound a Poll.
type PollOptions struct {
	// Timeout is how long to wait for read to report done; it must be
	// positive.
	Timeout time.Duration
	// Reread is the longest time between two reads when no Wake comes;
	// DefaultReread if zero. It is what lets a waiter see an outcome
	// reached by another instance, which wakes nobody here.
	Reread time.Duration
	// Stop, when closed, ends the poll with ErrStopped; nil never does.
	Stop <-chan struct{}
	// Shared, if set, makes the periodic re-read a shared one: the poll
	// registers its key with Shared, whose one batched Check per interval
	// wakes it when its outcome is in, and it reads only at its start and
	// on wake-ups; Reread is then unused. Nil: the poll re-reads on its
	// own every Reread.
	Shared *Rereader
}

// Poll is the one long poll: it calls read at once and then again after
// each Wake of key and at least every o.Reread (or, with o.Shared, when
// the shared re-read finds the outcome in), until read reports done
// (Poll returns nil) or fails (Poll returns its error), o.Timeout passes
// (ErrTimeout), o.Stop closes (ErrStopped) or ctx ends (ctx.Err()). It
// registers for key before each read, so that a Wake between a read and
// the wait is never lost. read runs on the caller's goroutine with ctx;
// it keeps whatever it read for the caller (a 408 shows the latest state).
func (h *Hub) Poll(ctx context.Context, key string, o PollOptions, read func(context.Context) (done bool, err error)) error {
	reread := o.Reread
	if reread <= 0 {
		reread = DefaultReread
	}
	deadline := time.NewTimer(o.Timeout)
	defer deadline.Stop()
	tick := time.NewTimer(reread)
	defer tick.Stop()
	if o.Shared != nil {
		defer o.Shared.add(key)()
		tick.Stop()
	}
	for {
		woken, unregister := h.Wait(key)
		done, err := read(ctx)
		if err != nil || done {
			unregister()
			return err
		}
		if o.Shared == nil {
			tick.Reset(reread)
		}
		select {
		case <-woken:
		case <-tick.C:
		case <-deadline.C:
			err = ErrTimeout
		case <-o.Stop:
			err = ErrStopped
		case <-ctx.Done():
			err = ctx.Err()
		}
		unregister()
		if err != nil {
			return err
		}
	}
}
