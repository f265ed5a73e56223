package cluster

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/backoff"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/pglisten"
)

// TestListenerFollowsPromotion: the kit's LISTEN listener on the
// multi-host URL receives a NOTIFY sent on the primary; after the
// synchronous standby is promoted (a switchover, then a failover) it
// reconnects, to the new primary, and a NOTIFY sent there reaches it.
func TestListenerFollowsPromotion(t *testing.T) {
	url := clusterURL(t)
	requireRoot(t)
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	for _, how := range promotions {
		t.Run(how.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
			defer cancel()
			r := wholePG(t, ctx, url)
			channel := uniqueName(t, "promote_listen_")
			got := make(chan string, 64)
			var reconnects atomic.Int32
			l := &pglisten.Listener{
				Connect:  func(ctx context.Context) (*pgx.Conn, error) { return pgx.ConnectConfig(ctx, cfg.Copy()) },
				Channels: []string{channel},
				OnConnect: func(_ context.Context, _ *pgx.Conn, reconnect bool) error {
					if reconnect {
						reconnects.Add(1)
					}
					return nil
				},
				OnNotification: func(_ context.Context, n *pgconn.Notification) { got <- n.Payload },
				OnDisconnect: func(err error, retryIn time.Duration) {
					t.Logf("listener: connection lost or refused (%v); again in %v", err, retryIn)
				},
				Backoff: backoff.Backoff{Initial: 100 * time.Millisecond, Max: time.Second},
			}
			if err := l.Start(); err != nil {
				t.Fatal(err)
			}
			defer func() {
				if err := l.Close(context.Background()); err != nil {
					t.Error(err)
				}
			}()
			if err := l.Await(ctx, 30*time.Second); err != nil {
				t.Fatal(err)
			}
			if on := notifyVia(t, ctx, cfg, channel, "before"); on != r.primary {
				t.Fatalf("NOTIFY through the multi-host URL ran on %s, want the primary %s", on, r.primary)
			}
			waitPayload(t, got, "before")

			newPrimary := promoteSync(t, ctx, url, r, how)
			// The listener lost its connection (the old primary stopped or
			// died) and listens again once it reached the new primary.
			deadline := time.Now().Add(2 * time.Minute)
			for reconnects.Load() == 0 || !l.Listening() {
				if time.Now().After(deadline) {
					t.Fatalf("the listener has not listened again 2 minutes after the promotion (reconnects %d, listening %v, last error %v)",
						reconnects.Load(), l.Listening(), l.Err())
				}
				time.Sleep(100 * time.Millisecond)
			}
			if on := notifyVia(t, ctx, cfg, channel, "after"); on != newPrimary {
				t.Fatalf("NOTIFY through the multi-host URL ran on %s, want the new primary %s", on, newPrimary)
			}
			waitPayload(t, got, "after")
		})
	}
}

// TestListenerOnAStandbyIsRefused: a listener whose connection string
// names a standby alone fails to start with pglisten.ErrStandby, whose
// message says LISTEN needs the primary, rather than waiting for
// notifications that are never delivered there.
func TestListenerOnAStandbyIsRefused(t *testing.T) {
	url := clusterURL(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	r := wholePG(t, ctx, url)
	sb, _ := r.top.Standby("sync")
	cfg := hostConfig(t, url, sb.Host)
	l := &pglisten.Listener{
		Connect:  func(ctx context.Context) (*pgx.Conn, error) { return pgx.ConnectConfig(ctx, cfg.Copy()) },
		Channels: []string{uniqueName(t, "promote_standby_")},
		Backoff:  backoff.Backoff{Initial: 100 * time.Millisecond, Max: time.Second},
	}
	if err := l.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close(context.Background()) }()
	err := l.Await(ctx, 5*time.Second)
	if err == nil {
		t.Fatalf("a listener on the standby %s (%s) listened", sb.Name, sb.Host)
	}
	if !errors.Is(err, pglisten.ErrStandby) {
		t.Fatalf("a listener on the standby %s: %v; want pglisten.ErrStandby", sb.Name, err)
	}
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "25006" {
		t.Errorf("the error does not carry the server's refusal (SQLSTATE 25006): %v", err)
	}
	t.Logf("listener on the standby %s: %v", sb.Name, err)
}

// notifyVia sends payload on channel through a new connection with cfg (the
// multi-host URL: the primary) and returns the node it ran on.
func notifyVia(t testing.TB, ctx context.Context, cfg *pgx.ConnConfig, channel, payload string) string {
	t.Helper()
	var last error
	for range 20 {
		on, err := func() (string, error) {
			ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
			defer cancel()
			conn, err := pgx.ConnectConfig(ctx, cfg.Copy())
			if err != nil {
				return "", err
			}
			defer conn.Close(context.WithoutCancel(ctx))
			var on string
			err = conn.QueryRow(ctx, "SELECT pg_notify($1, $2)::text, current_setting('cluster_name')", channel, payload).Scan(nil, &on)
			return on, err
		}()
		if err == nil {
			return on
		}
		last = err
		time.Sleep(500 * time.Millisecond)
	}
	t.Fatalf("NOTIFY %s: %v", channel, last)
	return ""
}

// waitPayload waits (up to a minute) for payload among the notifications.
func waitPayload(t testing.TB, got <-chan string, payload string) {
	t.Helper()
	timeout := time.After(time.Minute)
	for {
		select {
		case p := <-got:
			if p == payload {
				return
			}
		case <-timeout:
			t.Fatalf("the notification %q did not reach the listener within a minute", payload)
		}
	}
}
