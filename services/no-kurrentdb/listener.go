package main

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// notifyChannel is the channel the events_notify trigger (migration 0002)
// notifies; the payload is the table's schema.
const notifyChannel = "eventstore_events"

// listener holds a dedicated connection (never a pooled one, never through
// pgbouncer) that LISTENs for appends and wakes the hub. It reconnects
// after any failure, and wakes the hub after every (re)connect, because
// notifications sent while it was away are lost.
type listener struct {
	cancel  context.CancelFunc
	done    chan struct{}
	appName string
}

// startListener connects once (a wrong DATABASE_LISTEN_URL fails the start)
// and runs the listen loop until stopListener.
func (s *store) startListener(ctx context.Context) error {
	cc, err := pgx.ParseConfig(s.cfg.ListenURL)
	if err != nil {
		return fmt.Errorf("DATABASE_LISTEN_URL: %w", err)
	}
	if s.cfg.Postgres.ConnectTimeout > 0 {
		cc.ConnectTimeout = s.cfg.Postgres.ConnectTimeout
	}
	// The name lets an operator (and the reconnect test) find the
	// connection in pg_stat_activity; Postgres truncates it to 63 bytes.
	l := &listener{done: make(chan struct{}), appName: truncate("eventstore-listener "+s.schema, 63)}
	cc.RuntimeParams["application_name"] = l.appName
	conn, err := s.listen(ctx, cc)
	if err != nil {
		return fmt.Errorf("LISTEN (DATABASE_LISTEN_URL): %w", err)
	}
	lctx, cancel := context.WithCancel(context.Background())
	l.cancel = cancel
	s.listener = l
	go func() {
		defer close(l.done)
		backoff := 100 * time.Millisecond
		for {
			if conn != nil {
				err := s.receive(lctx, conn)
				_ = conn.Close(context.Background())
				conn = nil
				if lctx.Err() != nil {
					return
				}
				s.logger.Warn("listener connection lost; reconnecting", "err", err)
				backoff = 100 * time.Millisecond
			}
			if err := sleep(lctx, backoff); err != nil {
				return
			}
			c, err := s.listen(lctx, cc)
			if err != nil {
				if lctx.Err() != nil {
					return
				}
				s.logger.Warn("listener reconnect failed", "err", err, "retry_in", backoff)
				backoff = min(backoff*2, 5*time.Second)
				continue
			}
			s.logger.Info("listener reconnected")
			conn = c
		}
	}()
	return nil
}

// listen connects and LISTENs, then wakes every subscription: anything
// appended while no listener was connected is found by their next read.
func (s *store) listen(ctx context.Context, cc *pgx.ConnConfig) (*pgx.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.BackendTimeout)
	defer cancel()
	conn, err := pgx.ConnectConfig(ctx, cc)
	if err != nil {
		return nil, err
	}
	if _, err := conn.Exec(ctx, "LISTEN "+notifyChannel); err != nil {
		_ = conn.Close(context.Background())
		return nil, err
	}
	s.hub.wake()
	return conn, nil
}

// receive waits for notifications until the connection fails or ctx ends.
func (s *store) receive(ctx context.Context, conn *pgx.Conn) error {
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		if n.Payload == s.schema {
			s.hub.wake()
		}
	}
}

// stopListener ends the listen loop and closes its connection.
func (s *store) stopListener(ctx context.Context) error {
	if s.listener == nil {
		return nil
	}
	s.listener.cancel()
	select {
	case <-s.listener.done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("listener did not stop: %w", ctx.Err())
	}
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}
