package main

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/queue"
)

// listen keeps a dedicated connection (not from the pool: a pooled
// connection is shared and LISTEN is per session) listening on the queue's
// channel and pokes the fetcher on every notification. After any
// connection loss it reconnects with backoff, re-LISTENs and then pokes
// the fetcher once, which sweeps the table: notifications sent while it was
// away are lost, the rows are not. The fetcher's fallback poll covers the
// rest, so a missed notification delays a task but never strands it.
//
// Every re-LISTEN after the first also rebuilds queue_jobs from the open
// task records (rebuildSQL): a Postgres crash and recovery empties the
// UNLOGGED queue table while this service stays up, and a Postgres restart
// always drops this connection, so the reconnect is the moment to notice.
// The first LISTEN skips it: prepare has just done it at start.
func (q *pgQueue) listen(ctx context.Context) {
	backoff := 100 * time.Millisecond
	first, everConnected := true, false
	for ctx.Err() == nil {
		if !first {
			q.stats.Inc(queue.CounterReconnects)
		}
		first = false
		connected, err := q.listenOnce(ctx, everConnected)
		q.listening.Store(false)
		if ctx.Err() != nil {
			return
		}
		if connected {
			everConnected = true
			backoff = 100 * time.Millisecond
		}
		q.log.Warn("LISTEN connection lost; reconnecting", "err", err, "in", backoff)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 5*time.Second)
	}
}

// listenOnce connects, listens and waits for notifications until the
// connection fails or ctx ends; with rebuild it first re-queues open tasks
// missing from queue_jobs. connected reports whether LISTEN (and the
// rebuild) succeeded; a failed rebuild drops the connection, so that the
// next reconnect tries again.
func (q *pgQueue) listenOnce(ctx context.Context, rebuild bool) (connected bool, err error) {
	cc, err := pgx.ParseConfig(q.cfg.ListenURL)
	if err != nil {
		return false, err
	}
	cc.ConnectTimeout = q.cfg.Postgres.ConnectTimeout
	cc.RuntimeParams["application_name"] = listenerName(q.cfg.Postgres.Schema)
	cctx, cancel := context.WithTimeout(ctx, 2*q.cfg.Postgres.ConnectTimeout)
	conn, err := pgx.ConnectConfig(cctx, cc)
	if err != nil {
		cancel()
		return false, fmt.Errorf("connect (DATABASE_LISTEN_URL): %w", err)
	}
	defer func() { _ = conn.Close(context.Background()) }()
	_, err = conn.Exec(cctx, "LISTEN "+pgx.Identifier{q.channel}.Sanitize())
	cancel()
	if err != nil {
		return false, fmt.Errorf("LISTEN: %w", err)
	}
	// After LISTEN: a task enqueued from here on is either in queue_jobs
	// already (enqueueSQL writes both in one statement) or notified.
	if rebuild {
		if err := q.rebuild(ctx); err != nil {
			return false, err
		}
	}
	q.listening.Store(true)
	q.poke() // sweep: rows queued while nobody listened
	for {
		if _, err := conn.WaitForNotification(ctx); err != nil {
			return true, err
		}
		q.poke()
	}
}

// listenerName is the LISTEN connection's application_name, which shows in
// pg_stat_activity (and lets the tests find and terminate it).
func listenerName(schema string) string {
	name := "no-rabbitmq listen " + schema
	if len(name) > 63 {
		name = name[:63]
	}
	return name
}

// awaitListening waits for the first LISTEN, so that a wrong
// DATABASE_LISTEN_URL fails the start and /readyz is green once started.
func (q *pgQueue) awaitListening(ctx context.Context, d time.Duration) error {
	if q.cfg.Worker.Workers == 0 {
		return nil
	}
	deadline := time.Now().Add(d)
	for !q.listening.Load() {
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("no LISTEN connection within %v (DATABASE_LISTEN_URL)", d)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return nil
}
