package main

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/backoff"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/queue"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/pglisten"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/postgres"
)

// notifyChannel names the NOTIFY channel after the schema, so that
// services on different schemas do not wake each other.
func notifyChannel(schema string) string {
	ch := "queue_jobs"
	if schema != "" {
		ch += "." + schema
	}
	return postgres.TruncateName(ch)
}

// newListener returns the listener of the queue's channel: a dedicated
// connection (not from the pool: a pooled connection is shared and LISTEN
// is per session) that pokes the fetcher on every notification. After
// any connection loss pglisten reconnects with backoff and re-LISTENs;
// then OnConnect pokes the fetcher once, which sweeps the table:
// notifications sent while it was away are lost, the rows are not. The
// fetcher's fallback poll covers the rest, so a missed notification
// delays a task but never strands it. The Listener keeps its own state
// (listening, the last error, the first connection), which /readyz and
// the start read.
//
// Every re-LISTEN after the first also rebuilds queue_jobs from the open
// task records (rebuildSQL): a Postgres crash and recovery empties the
// UNLOGGED queue table while this service stays up, and a Postgres restart
// always drops this connection, so the reconnect is the moment to notice.
// The first LISTEN skips it: prepare has just done it at start. A failed
// rebuild drops the connection, so that the next reconnect tries again.
func (q *pgQueue) newListener() (*pglisten.Listener, error) {
	cc, err := postgres.ListenConnConfig(q.cfg.ListenURL, q.cfg.Postgres, listenerName(q.cfg.Postgres.Schema))
	if err != nil { // checked by readConfig already
		return nil, err
	}
	attempts := 0
	return &pglisten.Listener{
		Connect: func(ctx context.Context) (*pgx.Conn, error) {
			if attempts++; attempts > 1 {
				q.stats.Inc(queue.CounterReconnects)
			}
			conn, err := pgx.ConnectConfig(ctx, cc)
			if err != nil {
				return nil, fmt.Errorf("DATABASE_LISTEN_URL: %w", err)
			}
			return conn, nil
		},
		Channels: []string{q.channel},
		// After LISTEN: a task enqueued from here on is either in
		// queue_jobs already (enqueueSQL writes both in one statement) or
		// notified.
		OnConnect: func(ctx context.Context, _ *pgx.Conn, reconnect bool) error {
			if reconnect {
				if err := q.rebuild(ctx); err != nil {
					return err
				}
			}
			q.poke() // sweep: rows queued while nobody listened
			q.wakeCursors()
			return nil
		},
		OnNotification: func(context.Context, *pgconn.Notification) { q.poke(); q.wakeCursors() },
		OnDisconnect: func(err error, retryIn time.Duration) {
			q.log.Warn("LISTEN connection lost; reconnecting", "err", err, "in", retryIn)
		},
		// The probe's NOTIFY goes through the workers' pool.
		Notify:         pglisten.NotifyThrough(q.wpool),
		Backoff:        backoff.Backoff{Initial: 100 * time.Millisecond, Max: 5 * time.Second},
		ConnectTimeout: 2 * q.cfg.Postgres.ConnectTimeout,
	}, nil
}

// listen runs the listener until ctx ends.
func (q *pgQueue) listen(ctx context.Context) {
	_ = q.listener.Run(ctx) // returns when ctx ends
}

// listenerName is the LISTEN connection's application_name, which shows in
// pg_stat_activity (and lets the tests find and terminate it).
func listenerName(schema string) string {
	return postgres.TruncateName("no-rabbitmq listen " + schema)
}

// awaitListening waits for the first LISTEN, so that a wrong
// DATABASE_LISTEN_URL fails the start and /readyz is green once started.
// With WORKERS=0 nothing listens.
func (q *pgQueue) awaitListening(ctx context.Context, d time.Duration) error {
	if q.cfg.Worker.Workers == 0 {
		return nil
	}
	return postgres.AwaitListening(ctx, d, q.listener)
}

// listenReady is the readiness check: nil while the listener listens, or
// with WORKERS=0 (nothing listens).
func (q *pgQueue) listenReady(context.Context) error {
	if q.cfg.Worker.Workers == 0 {
		return nil
	}
	if err := q.listener.ListenErr(); err != nil {
		return fmt.Errorf("LISTEN connection is down (reconnecting): %w", err)
	}
	return nil
}
