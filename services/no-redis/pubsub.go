package main

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/backoff"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/cache"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/pglisten"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/postgres"
)

// PubSubChannel is the Postgres channel every instance's pub/sub
// messages travel on, whatever their contract channel: payloads are
// "<schema> <channel> <message>". One LISTEN per process carries every
// channel and every subscriber (the handlers' fan-out routes them).
const PubSubChannel = "cache_pubsub"

// NotifyPayloadMax is the longest NOTIFY payload Postgres takes, in
// bytes: it must be shorter than 8000 (NOTIFY_PAYLOAD_MAX_LENGTH).
const NotifyPayloadMax = 7999

// pgPubSub is the pub/sub role on Postgres: Publish is one
// SELECT pg_notify(...) through the pool, in a transaction of its own,
// which takes Postgres's cluster-wide notify lock at commit (NOTIFYs of
// all sessions commit one at a time); the process' listener (see
// newListener) hands this schema's notifications to the Sink. Nothing
// is kept for a listener that is not connected: a lost connection ends
// every subscription (Sink.Lost). Safe for concurrent use.
type pgPubSub struct {
	pool   *pgxpool.Pool
	schema string
	limit  int
	// ln is the process' listener; set before it starts.
	ln *pglisten.Listener
	// sink is set by Attach, before the listener starts (so before any
	// notification is handed to it).
	sink cache.Sink
}

var _ cache.PubSub = (*pgPubSub)(nil)

// MessageLimit is the largest message of the pub/sub role, in bytes:
// NotifyPayloadMax less the payload's header at its longest (a schema
// name of postgres.MaxNameBytes, a channel of cache.MaxChannelLen, two
// spaces), the same whatever the schema.
const MessageLimit = NotifyPayloadMax - postgres.MaxNameBytes - cache.MaxChannelLen - 2

// newPubSub returns the role for schema.
func newPubSub(pool *pgxpool.Pool, schema string) *pgPubSub {
	return &pgPubSub{pool: pool, schema: schema, limit: MessageLimit}
}

func (p *pgPubSub) Publish(ctx context.Context, channel string, msg []byte) error {
	if len(msg) > p.limit {
		return fmt.Errorf("pub/sub: a %d-byte message is over the %d a NOTIFY payload leaves", len(msg), p.limit)
	}
	_, err := p.pool.Exec(ctx, "SELECT pg_notify($1, $2)", PubSubChannel, p.schema+" "+channel+" "+string(msg))
	return postgres.MapError("pg_notify", err)
}

// Attach implements cache.PubSub.
func (p *pgPubSub) Attach(s cache.Sink) { p.sink = s }

// Listening implements cache.PubSub: the process' listener listens.
func (p *pgPubSub) Listening() bool { return p.ln.Listening() }

// MessageLimit implements cache.PubSub.
func (p *pgPubSub) MessageLimit() int { return p.limit }

// Close does nothing: the listener and the pool belong to the service.
func (p *pgPubSub) Close() error { return nil }

// receive hands one notification of PubSubChannel to the Sink, when it is
// this schema's.
func (p *pgPubSub) receive(payload string) {
	schema, rest, ok := strings.Cut(payload, " ")
	if !ok || schema != p.schema || p.sink == nil {
		return
	}
	channel, msg, ok := strings.Cut(rest, " ")
	if !ok {
		return
	}
	p.sink.Message(channel, []byte(msg))
}

func (p *pgPubSub) lost(err error) {
	if p.sink != nil {
		p.sink.Lost(err)
	}
}

// newListener returns the process' one LISTEN connection, not yet
// running: PubSubChannel for the pub/sub role, and in ModeLocal the
// products trigger's Channel for the in-process cache (local, nil
// otherwise), each notification dispatched by its channel. Its state
// (Listening) gates the local cache (read and filled only while it
// listens) and the subscriptions (refused while it does not); when it is
// lost, the local cache is flushed and every subscription ends.
func newListener(cc *pgx.ConnConfig, pool *pgxpool.Pool, local *localStore, ps *pgPubSub, logger *slog.Logger) *pglisten.Listener {
	channels := []string{PubSubChannel}
	if local != nil {
		channels = append(channels, Channel)
	}
	log := logger.With("component", "listener")
	return &pglisten.Listener{
		Connect: func(ctx context.Context) (*pgx.Conn, error) {
			conn, err := pgx.ConnectConfig(ctx, cc)
			if err != nil {
				return nil, fmt.Errorf("DATABASE_LISTEN_URL: %w", err)
			}
			return conn, nil
		},
		Channels: channels,
		// After LISTEN: every change committed from here on is notified.
		// On a reconnect, what changed while nobody listened is unknown:
		// the local cache was flushed when the connection was lost, and is
		// flushed again here (values filled meanwhile were refused, but a
		// fill that raced the loss is dropped too).
		OnConnect: func(_ context.Context, _ *pgx.Conn, reconnect bool) error {
			if reconnect && local != nil {
				local.flush("listener reconnected")
			}
			return nil
		},
		OnNotification: func(_ context.Context, n *pgconn.Notification) {
			switch n.Channel {
			case PubSubChannel:
				ps.receive(n.Payload)
			case Channel:
				if local != nil {
					local.invalidate(n.Payload)
				}
			}
		},
		// Listening is already false: the local cache refuses, and so do
		// new subscriptions.
		OnLost: func(err error) {
			if local != nil {
				local.flush("listener lost")
			}
			ps.lost(err)
		},
		OnDisconnect: func(err error, retryIn time.Duration) {
			log.Warn("LISTEN connection lost; the local cache is bypassed and subscriptions refused until it is back", "err", err, "in", retryIn)
		},
		// The probe's NOTIFY goes through the pool.
		Notify:         pglisten.NotifyThrough(pool),
		Backoff:        backoff.Backoff{Initial: 100 * time.Millisecond, Max: 5 * time.Second},
		ConnectTimeout: 2 * cc.ConnectTimeout,
	}
}
