package queue

import (
	"context"
	"fmt"
	"time"
)

// Defaults shared by both sides.
const (
	// DefaultRetryBase is RETRY_BASE: the first retry's delay.
	DefaultRetryBase = 200 * time.Millisecond
	// MaxRetryDelay caps the exponential backoff.
	MaxRetryDelay = 30 * time.Second
	// DefaultMaxAttempts is MAX_ATTEMPTS: deliveries before a task is dead.
	DefaultMaxAttempts = 5
	// DefaultWorkers is WORKERS.
	DefaultWorkers = 8
)

// Backoff returns the delay before the retry that follows failed attempt
// number attempt (1-based): base, 2·base, 4·base, ... capped at
// MaxRetryDelay.
func Backoff(base time.Duration, attempt int) time.Duration {
	d := base
	for i := 1; i < attempt && d < MaxRetryDelay; i++ {
		d *= 2
	}
	return min(d, MaxRetryDelay)
}

// Work is the simulated task both sides run: it sleeps work (WORK_MS), then
// fails if this attempt is within the task's fail_times. It returns
// ctx.Err() if ctx ends first (the worker is crashing or stopping).
func Work(ctx context.Context, work time.Duration, attempt, failTimes int) error {
	if work > 0 {
		t := time.NewTimer(work)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		}
	} else if err := ctx.Err(); err != nil {
		return err
	}
	if attempt <= failTimes {
		return fmt.Errorf("simulated failure: attempt %d of the %d the task asked to fail", attempt, failTimes)
	}
	return nil
}

// Outcome is what the result of an attempt makes of a task.
type Outcome int

const (
	// OutcomeDone: the attempt succeeded; the task is done.
	OutcomeDone Outcome = iota
	// OutcomeRetry: the attempt failed and the task has attempts left; it
	// runs again after Backoff(RETRY_BASE, attempt).
	OutcomeRetry
	// OutcomeDead: the attempt failed and was the last the task gets
	// (MAX_ATTEMPTS); the task is dead.
	OutcomeDead
)

// Decide returns the outcome of attempt number attempt (1-based, as
// recorded in the task's attempts) that ended with err (Work's answer),
// when a task gets maxAttempts deliveries. Both sides decide with it.
func Decide(err error, attempt, maxAttempts int) Outcome {
	switch {
	case err == nil:
		return OutcomeDone
	case attempt >= maxAttempts:
		return OutcomeDead
	default:
		return OutcomeRetry
	}
}

// AwaitOrAbort waits until done is closed. If ctx ends first it calls
// abort, which makes whatever closes done give up the tasks it holds (as
// in a crash), and still waits for done, so that a Stop never returns
// while its workers run. Both services' Stop use it.
func AwaitOrAbort(ctx context.Context, done <-chan struct{}, abort func()) {
	select {
	case <-done:
	case <-ctx.Done():
		abort()
		<-done
	}
}
