package main

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/pglisten"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/postgres"
)

// notifyChannel is the channel the events_notify trigger (migration 0002)
// notifies; the payload is the table's schema.
const notifyChannel = "eventstore_events"

// listener holds a dedicated connection (never a pooled one, never through
// pgbouncer) that LISTENs for appends and wakes the hub. pglisten
// reconnects it after any failure, and it wakes the hub after every
// (re)connect, because notifications sent while it was away are lost.
type listener struct {
	// ln keeps the connection and its state (listening, the last error,
	// the first connection), and runs from startListener to stopListener.
	ln      *pglisten.Listener
	appName string
}

// startListener runs the listener until stopListener, and waits for its
// first connection, at most one connect, probe and second more: a wrong
// DATABASE_LISTEN_URL fails the start.
func (s *store) startListener(ctx context.Context) error {
	// The name lets an operator (and the reconnect test) find the
	// connection in pg_stat_activity; Postgres truncates it to 63 bytes.
	l := &listener{appName: postgres.TruncateName("eventstore-listener " + s.schema)}
	cc, err := postgres.ListenConnConfig(s.cfg.ListenURL, s.cfg.Postgres, l.appName)
	if err != nil {
		return err
	}
	l.ln = &pglisten.Listener{
		Connect:  func(ctx context.Context) (*pgx.Conn, error) { return pgx.ConnectConfig(ctx, cc) },
		Channels: []string{notifyChannel},
		// Wake every subscription: anything appended while no listener
		// was connected is found by their next read.
		OnConnect: func(_ context.Context, _ *pgx.Conn, reconnect bool) error {
			s.hub.wake()
			if reconnect {
				s.logger.Info("listener reconnected")
			}
			return nil
		},
		OnNotification: func(_ context.Context, n *pgconn.Notification) {
			if n.Payload == s.schema {
				s.hub.wake()
			}
		},
		OnDisconnect: func(err error, retryIn time.Duration) {
			s.logger.Warn("listener connection lost; reconnecting", "err", err, "retry_in", retryIn)
		},
		ConnectTimeout: s.cfg.BackendTimeout,
		// The probe's NOTIFY goes through the pool.
		Notify: pglisten.NotifyThrough(s.pool),
	}
	if err := l.ln.Start(); err != nil {
		return err
	}
	if err := postgres.AwaitListening(ctx, s.cfg.BackendTimeout+pglisten.DefaultProbeTimeout+time.Second, l.ln); err != nil {
		_ = l.ln.Close(context.Background()) // no deadline: Run's close of its connection is bounded
		return err
	}
	s.listener = l
	return nil
}

// stopListener ends the listen loop and waits until its connection is
// closed, at most until ctx ends.
func (s *store) stopListener(ctx context.Context) error {
	if s.listener == nil {
		return nil
	}
	return s.listener.ln.Close(ctx)
}
