package pglisten

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/backoff"
)

// Notify modes: the two values of a service's NOTIFY_MODE.
const (
	// ModeCommit sends pg_notify inside every committing transaction: the
	// wake-up is exact, but every such commit takes Postgres's
	// cluster-wide notify lock, which serializes commits and defeats
	// group commit.
	ModeCommit = "commit"
	// ModeDebounced commits without pg_notify and pokes a Debouncer
	// afterwards, which notifies at most once per interval, in a
	// transaction of its own.
	ModeDebounced = "debounced"
)

// Debouncer defaults and bounds.
const (
	// DefaultInterval is Debouncer.Interval's default: a few milliseconds
	// keep the added delivery latency below a round trip's noise under
	// load while the notify lock is taken a few hundred times a second at
	// most, whatever the commit rate.
	DefaultInterval = 5 * time.Millisecond
	// MinInterval and MaxInterval bound the interval a service accepts.
	MinInterval, MaxInterval = time.Millisecond, time.Second
	// DefaultNotifyTimeout bounds each NOTIFY when Debouncer.Timeout is
	// zero.
	DefaultNotifyTimeout = 2 * time.Second
)

// Execer runs one statement; *pgxpool.Pool and *pgx.Conn satisfy it.
type Execer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// Debouncer coalesces wake-ups into few NOTIFYs. A writer commits without
// pg_notify and calls Poke after the commit; the Debouncer runs
// SELECT pg_notify(Channel, Payload) in a transaction of its own: at once
// if it has been idle for Interval (an isolated commit waits one extra
// round trip, not an interval), otherwise at the end of the current
// interval, once for every poke that arrived meanwhile. So at most one
// NOTIFY per Interval takes Postgres's notify lock, whatever the commit
// rate, and a notification is always sent after the commit that asked for
// it, so a listener that reads on it sees the committed rows.
//
// A failed NOTIFY is reported to OnError and retried with a backoff (from
// Interval up to a second) until one succeeds; a notification is only
// "look again", and listeners keep their fallback poll, so a lost one
// costs latency, never data.
//
// Fill the fields before the first Poke and do not change them afterwards.
// Poke is safe for concurrent use and never blocks; the first Poke starts
// the Debouncer's one goroutine. Close stops it, safe to call more than
// once and from several goroutines.
type Debouncer struct {
	// DB runs the NOTIFYs; required. A small pool of its own (one
	// connection, postgres.OpenReserved) keeps them from queueing behind
	// the requests they announce. Through pgbouncer in transaction mode
	// NOTIFY works (unlike LISTEN).
	DB Execer
	// Channel is the channel to notify; required.
	Channel string
	// Payload is every notification's payload; may be empty.
	Payload string
	// Interval is the least time between two NOTIFYs; DefaultInterval if
	// zero.
	Interval time.Duration
	// Timeout bounds each NOTIFY; DefaultNotifyTimeout if zero.
	Timeout time.Duration
	// OnError, if set, is called with every failed NOTIFY, on the
	// Debouncer's goroutine.
	OnError func(error)

	startOnce, stopOnce sync.Once
	poke                chan struct{} // capacity 1: a pending NOTIFY
	stop, done          chan struct{}
	stopCtx             context.Context // Close's ctx, set before stop is closed
	sent, pokes         atomic.Int64
}

// start makes the channels and starts the goroutine, once.
func (d *Debouncer) start() {
	d.startOnce.Do(func() {
		d.poke = make(chan struct{}, 1)
		d.stop = make(chan struct{})
		d.done = make(chan struct{})
		go d.run()
	})
}

// Poke asks for a NOTIFY after the caller's commit. It never blocks; pokes
// until the next NOTIFY is sent coalesce into it. Pokes after Close are
// dropped.
func (d *Debouncer) Poke() {
	d.start()
	d.pokes.Add(1)
	select {
	case d.poke <- struct{}{}:
	default:
	}
}

// Sent is the number of NOTIFYs sent so far.
func (d *Debouncer) Sent() int64 { return d.sent.Load() }

// Pokes is the number of Poke calls so far.
func (d *Debouncer) Pokes() int64 { return d.pokes.Load() }

// Close stops the Debouncer: a pending NOTIFY is sent at once (not at its
// interval's end), bounded by ctx and Timeout, then the goroutine ends.
// It returns ctx's error if ctx ends first (the goroutine still ends
// within Timeout). Close the Debouncer before the pool it uses.
func (d *Debouncer) Close(ctx context.Context) error {
	d.start()
	d.stopOnce.Do(func() {
		d.stopCtx = ctx
		close(d.stop)
	})
	select {
	case <-d.done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("pglisten: debouncer did not flush: %w", ctx.Err())
	}
}

func (d *Debouncer) interval() time.Duration {
	if d.Interval > 0 {
		return d.Interval
	}
	return DefaultInterval
}

// run sends a NOTIFY per burst of pokes, at most one per interval, until
// Close.
func (d *Debouncer) run() {
	defer close(d.done)
	interval := d.interval()
	retry := backoff.Backoff{Initial: interval, Max: time.Second}
	for {
		select {
		case <-d.stop:
			d.flush()
			return
		case <-d.poke:
		}
		next := time.Now().Add(interval)
		if err := d.send(context.Background()); err != nil {
			d.report(err)
			d.rearm()
			next = time.Now().Add(retry.Next())
		} else {
			retry.Reset()
		}
		// Hold off until the interval ends: pokes meanwhile wait in the
		// channel's one slot and become the next NOTIFY.
		if wait := time.Until(next); wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-d.stop:
				t.Stop()
				d.flush()
				return
			case <-t.C:
			}
		}
	}
}

// rearm keeps a failed NOTIFY pending, unless a poke already is.
func (d *Debouncer) rearm() {
	select {
	case d.poke <- struct{}{}:
	default:
	}
}

// flush sends the pending NOTIFY, if any, within Close's ctx.
func (d *Debouncer) flush() {
	select {
	case <-d.poke:
		if err := d.send(d.stopCtx); err != nil {
			d.report(err)
		}
	default:
	}
}

func (d *Debouncer) send(ctx context.Context) error {
	timeout := d.Timeout
	if timeout <= 0 {
		timeout = DefaultNotifyTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if _, err := d.DB.Exec(ctx, "SELECT pg_notify($1, $2)", d.Channel, d.Payload); err != nil {
		return fmt.Errorf("pglisten: NOTIFY %s: %w", d.Channel, err)
	}
	d.sent.Add(1)
	return nil
}

func (d *Debouncer) report(err error) {
	if d.OnError != nil {
		d.OnError(err)
	}
}
