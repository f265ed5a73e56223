package scenario

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
)

// Preconditions: what a point's starting state must be before its load
// begins, proven by reading it, not assumed. A side's figures at a rate
// are that system's only when nothing left by the step before (or by
// another pair) is still being worked off: a queue draining the previous
// step's backlog, a consumer behind, a replication slot reading through
// gigabytes of WAL that other tables wrote (on 3 December 2026 a log
// point started with no-kafka's slot 4.1 GB behind and delivered nothing
// in 2 of its 3 rounds).
const (
	// SlotLagBound is the most WAL no-kafka's slot may be behind the
	// current position when a step starts: a few seconds of its own
	// events at the rates measured (the consumer confirms once a second),
	// far below a backlog of foreign WAL.
	SlotLagBound = 64 << 20
	// preconditionPoll is how often startState reads the state while it
	// waits.
	preconditionPoll = 250 * time.Millisecond
)

// ErrPrecondition wraps why a step could not start from its declared
// state: the step is invalid, not failed.
var ErrPrecondition = errors.New("precondition")

// startState waits, up to bound, until svc's side of p is at its declared
// start: no task queued or running (the queue pair's progress endpoint),
// no event the consumer has yet to deliver, and for no-kafka a slot at
// most SlotLagBound behind. It returns "" when the state holds, else what
// did not, in words, as the point's Precondition. A pair without a
// progress endpoint has nothing to prove here.
func (e *Env) startState(ctx context.Context, p Pair, svc string, bound time.Duration) string {
	if p.Progress == "" {
		return ""
	}
	base := e.URL(svc)
	return waitFor(ctx, bound, preconditionPoll, func(ctx context.Context) string { return e.startWhy(ctx, p, svc, base) })
}

// waitFor calls check every poll until it returns "" (the state holds)
// or bound has passed: it returns "" or check's last answer, saying how
// long it waited.
func waitFor(ctx context.Context, bound, poll time.Duration, check func(context.Context) string) string {
	deadline := time.Now().Add(bound)
	for {
		why := check(ctx)
		if why == "" || time.Now().After(deadline) {
			if why != "" {
				why += fmt.Sprintf(" after waiting %s", bound)
			}
			return why
		}
		select {
		case <-ctx.Done():
			return ctx.Err().Error()
		case <-time.After(poll):
		}
	}
}

// startWhy reads svc's state once: "" when it is the declared start,
// else what is not.
func (e *Env) startWhy(ctx context.Context, p Pair, svc, base string) string {
	raw, err := driver.GetRaw(ctx, base+p.Progress)
	if err != nil {
		return fmt.Sprintf("%s %s unreadable: %v", svc, p.Progress, err)
	}
	var v map[string]any
	if err := json.Unmarshal(raw, &v); err != nil {
		return fmt.Sprintf("%s %s is not JSON: %v", svc, p.Progress, err)
	}
	q, _ := v["queued"].(float64)
	r, _ := v["running"].(float64)
	if q+r > 0 {
		return fmt.Sprintf("%.0f tasks queued or running at the start", q+r)
	}
	if lag, _ := v["lag"].(float64); lag > 0 {
		// no-kafka counts its lag in WAL bytes (every table's), Kafka in
		// records of its own topic.
		if unit, _ := v["lag_unit"].(string); unit != "bytes" {
			return fmt.Sprintf("consumer %.0f %s behind at the start", lag, unit)
		} else if lag > SlotLagBound {
			return fmt.Sprintf("consumer %s of WAL behind at the start", bytesText(lag))
		}
	}
	if svc == LogPair.A.Name {
		if lag, ok := e.slotLag(ctx, svc); ok && lag > SlotLagBound {
			return fmt.Sprintf("replication slot %s behind the current WAL position at the start", bytesText(lag))
		}
	}
	return ""
}

// bytesText is a byte count in binary units ("4.1 GiB", "512 KiB").
func bytesText(b float64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB"}
	i := 0
	for b >= 1024 && i < len(units)-1 {
		b /= 1024
		i++
	}
	if i == 0 {
		return fmt.Sprintf("%.0f B", b)
	}
	return fmt.Sprintf("%.1f %s", b, units[i])
}
