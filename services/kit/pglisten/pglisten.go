package pglisten

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/backoff"
)

// DefaultConnectTimeout bounds connecting and LISTENing when
// Listener.ConnectTimeout is zero.
const DefaultConnectTimeout = 10 * time.Second

// DefaultProbeTimeout bounds the probe's round trip when
// Listener.ProbeTimeout is zero.
const DefaultProbeTimeout = 5 * time.Second

// ErrDeaf is the probe's error: a notification sent on another connection
// did not reach the listening one. The usual cause is a LISTEN connection
// through a pooler in transaction mode (pgbouncer): LISTEN succeeds on
// some server connection, which the pooler then hands to other clients,
// and nothing ever arrives.
var ErrDeaf = errors.New("pglisten: LISTEN receives no notifications (a connection pooler in transaction mode, such as pgbouncer, between the listener and Postgres? LISTEN needs a direct connection)")

// ErrStandby is the error of a connection to a standby (a server in
// recovery): Postgres refuses LISTEN there ("cannot execute LISTEN during
// recovery", SQLSTATE 25006), and a notification is delivered only on the
// server that committed it, the primary. A multi-host connection string
// with target_session_attrs=read-write always lands on the primary, and
// lands on the new one after a promotion.
var ErrStandby = errors.New("pglisten: LISTEN refused by a standby (the server is in recovery): LISTEN needs the primary (connect to its address, or through a multi-host URL with target_session_attrs=read-write)")

// Listener LISTENs on Channels over a connection of its own and reconnects
// whenever it is lost. Fill the fields, then either call Run once, on a
// goroutine the caller owns, until its ctx ends; or call Start once and
// Close when done, which run and stop Run on a goroutine of the
// Listener's own. The fields must not change while Run runs. Every hook
// is called on Run's goroutine, one at a time, never concurrently: a hook
// that blocks stalls the listener (and the delivery of notifications),
// so hand long work to another goroutine. Run owns the connections it
// opens and closes each one when it is lost and when Run returns; hooks
// must not keep or close them.
//
// The Listener reports its own state, safe to read from any goroutine
// at any time (before, during and after Run): Listening (a connection
// listens now), Err (why the last one failed or was lost), ListenErr
// (nil while listening, else why not: a readiness check), Listened (a
// channel closed once the first connection listened) and Await (wait for
// it, with a deadline, at a service's start). Start and Close are safe
// to call from any goroutine too. Do not copy a Listener once Run, Start
// or a state method has been called.
//
// Contexts: Run's ctx is the listener's life (it ends Run) and is the ctx
// every hook gets; Start's listener lives until Close, whatever context
// its caller had. Await's and Close's ctx only bound their own wait:
// ending it stops neither the listener nor its connection.
type Listener struct {
	// Connect opens a new dedicated connection; required. It is called for
	// the first connection and each reconnect, with a context bounded by
	// ConnectTimeout.
	Connect func(ctx context.Context) (*pgx.Conn, error)
	// Channels are the channels to LISTEN on; at least one.
	Channels []string
	// OnConnect, if set, is called after every (re)connect once LISTEN is
	// in place and before the connection's first notification is handed
	// out, with Run's ctx: the moment to re-read what notifications missed
	// while no connection listened would have announced. reconnect is
	// false the first time and true once an earlier connection of this Run
	// got this far. An error drops the connection and retries, as a lost
	// connection would.
	OnConnect func(ctx context.Context, conn *pgx.Conn, reconnect bool) error
	// OnNotification, if set, is called for every notification, with
	// Run's ctx.
	OnNotification func(ctx context.Context, n *pgconn.Notification)
	// OnLost, if set, is called when a connection that listened (its
	// OnConnect succeeded) is lost, never when ctx ends, with the cause,
	// once Listening reports false and before OnDisconnect: the moment to
	// drop what only the notifications kept fresh.
	OnLost func(err error)
	// OnDisconnect, if set, is called when a connection attempt fails or a
	// connection is lost (never when ctx ends), with the cause and the
	// delay before the next attempt, once Listening reports false and Err
	// the cause: for logs.
	OnDisconnect func(err error, retryIn time.Duration)
	// Backoff paces the reconnects; the zero value is backoff's defaults
	// (from 100 ms up to 5 s). It is reset once a connection listens.
	Backoff backoff.Backoff
	// ConnectTimeout bounds Connect plus the LISTEN statements;
	// DefaultConnectTimeout if zero.
	ConnectTimeout time.Duration
	// Notify, if set, sends a notification on another connection than
	// the listening one (a service passes its pool); the probe uses it.
	// If nil, the probe opens a second connection with Connect.
	Notify func(ctx context.Context, channel, payload string) error
	// ProbeTimeout bounds the probe; DefaultProbeTimeout if zero.
	ProbeTimeout time.Duration

	// The state, set by Run's goroutine.
	listening    atomic.Bool
	errMu        sync.Mutex
	err          error // the last failure; nil before the first
	listenedOnce sync.Once
	listened     chan struct{} // closed once a connection listened
	closeOnce    sync.Once

	// Start's run, stopped by Close.
	runMu   sync.Mutex
	closed  bool               // Close was called
	stop    context.CancelFunc // ends Start's Run; nil before Start
	stopped chan struct{}      // closed when Start's Run returned
}

// Listening reports whether a connection listens now: its LISTEN, the
// probe and OnConnect succeeded, and it has been neither lost nor closed
// since. It turns false before OnLost and OnDisconnect are called, and
// when Run returns. Cheap enough for every request of a hot path.
func (l *Listener) Listening() bool { return l.listening.Load() }

// Err returns why the last connection attempt failed or the last
// connection was lost: nil before the first failure. It stays after a
// reconnect, so read it when Listening is false.
func (l *Listener) Err() error {
	l.errMu.Lock()
	defer l.errMu.Unlock()
	return l.err
}

// ListenErr returns nil while a connection listens (Listening), and
// otherwise why none does: the last failure (Err), or ErrNoAttempt
// before any attempt finished. A readiness check.
func (l *Listener) ListenErr() error {
	if l.Listening() {
		return nil
	}
	if err := l.Err(); err != nil {
		return err
	}
	return ErrNoAttempt
}

// Listened returns a channel that is closed once a connection of Run
// first listens (as Listening turns true the first time); it stays
// closed whatever happens afterwards.
func (l *Listener) Listened() <-chan struct{} {
	l.listenedOnce.Do(func() { l.listened = make(chan struct{}) })
	return l.listened
}

// ErrNoAttempt is the cause ListenErr and Await report when no connection
// attempt has finished yet.
var ErrNoAttempt = errors.New("no connection attempt finished yet")

// Await waits until a connection of Run first listened, at most d, so
// that a service whose LISTEN connection cannot be opened (a wrong URL, a
// deaf connection through a pooler) fails its start. Past d, or once ctx
// ends, the error wraps the last failure (Err), or ErrNoAttempt. Run (or
// Start) must be running, or about to. Ending ctx ends the wait, not the
// listener.
func (l *Listener) Await(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-l.Listened():
		return nil
	case <-t.C:
	case <-ctx.Done():
	}
	select { // listened at the last moment
	case <-l.Listened():
		return nil
	default:
	}
	cause := l.Err()
	if cause == nil {
		cause = ErrNoAttempt
	}
	return fmt.Errorf("no LISTEN connection within %v: %w", d, cause)
}

// up records that a connection listens.
func (l *Listener) up() {
	l.listening.Store(true)
	l.Listened() // makes the channel
	l.closeOnce.Do(func() { close(l.listened) })
}

// down records that the connection stopped listening, with its cause
// (nil when ctx ended), and reports whether it was listening.
func (l *Listener) down(err error) bool {
	was := l.listening.Swap(false)
	if err != nil {
		l.errMu.Lock()
		l.err = err
		l.errMu.Unlock()
	}
	return was
}

// Start runs Run on a goroutine of its own until Close, and returns at
// once: follow it with Await to wait for the first connection. It fails
// only if the Listener is unusable (no Connect, no Channels), if it was
// started already, or if it was closed.
func (l *Listener) Start() error {
	if err := l.check(); err != nil {
		return err
	}
	l.runMu.Lock()
	defer l.runMu.Unlock()
	switch {
	case l.closed:
		return errors.New("pglisten: Start after Close")
	case l.stop != nil:
		return errors.New("pglisten: Start called twice")
	}
	ctx, stop := context.WithCancel(context.Background())
	l.stop, l.stopped = stop, make(chan struct{})
	go func() {
		defer close(l.stopped)
		_ = l.Run(ctx) // returns once Close ends ctx
	}()
	return nil
}

// Close stops what Start started and waits until Run has returned (its
// connection closed, Listening false), at most until ctx ends: then it
// returns ctx's error and Run still ends, later. It may be called more
// than once and from several goroutines; each waits. Before Start it
// returns nil and makes a later Start fail. A Listener run by Run is
// stopped by Run's ctx, not by Close.
func (l *Listener) Close(ctx context.Context) error {
	l.runMu.Lock()
	l.closed = true
	stop, stopped := l.stop, l.stopped
	l.runMu.Unlock()
	if stop == nil {
		return nil
	}
	stop()
	select {
	case <-stopped:
		return nil
	case <-ctx.Done():
	}
	select { // stopped at the last moment
	case <-stopped:
		return nil
	default:
		return fmt.Errorf("pglisten: the listener did not stop: %w", ctx.Err())
	}
}

// check reports whether the Listener can run.
func (l *Listener) check() error {
	if l.Connect == nil || len(l.Channels) == 0 {
		return errors.New("pglisten: Listener needs Connect and Channels")
	}
	return nil
}

// Run connects and listens until ctx ends, reconnecting after every
// failure, and returns ctx's error then, once the connection is closed. It
// returns early only if the Listener is unusable (no Connect, no
// Channels).
func (l *Listener) Run(ctx context.Context) error {
	if err := l.check(); err != nil {
		return err
	}
	b := l.Backoff
	listened := false
	for {
		err := l.session(ctx, &b, &listened)
		if ctx.Err() != nil {
			l.down(nil)
			return ctx.Err()
		}
		if l.down(err) && l.OnLost != nil {
			l.OnLost(err)
		}
		d := b.Next()
		if l.OnDisconnect != nil {
			l.OnDisconnect(err, d)
		}
		if backoff.Sleep(ctx, d) != nil {
			return ctx.Err()
		}
	}
}

// session runs one connection: connect, LISTEN, the probe, OnConnect,
// then notifications until it fails or ctx ends. listened records that a
// connection of this Run reached OnConnect.
//
// The probe: after LISTEN, and before OnConnect, every connection
// LISTENs on a channel of its own, has a notification sent there from
// another connection, and waits for it. A connection that LISTENs
// without error but would never receive anything (through pgbouncer in
// transaction mode) fails here with ErrDeaf, loudly, instead of leaving
// a service silently deaf: OnConnect is never called on it.
func (l *Listener) session(ctx context.Context, b *backoff.Backoff, listened *bool) error {
	timeout := l.ConnectTimeout
	if timeout <= 0 {
		timeout = DefaultConnectTimeout
	}
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	conn, err := l.Connect(cctx)
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer func() {
		closeCtx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = conn.Close(closeCtx)
	}()
	for _, ch := range l.Channels {
		if _, err := conn.Exec(cctx, "LISTEN "+pgx.Identifier{ch}.Sanitize()); err != nil {
			if inRecovery(err) {
				return fmt.Errorf("LISTEN %s: %w: %w", ch, ErrStandby, err)
			}
			return fmt.Errorf("LISTEN %s: %w", ch, err)
		}
	}
	early, err := l.probe(ctx, conn)
	if err != nil {
		return err
	}
	reconnect := *listened
	*listened = true
	if l.OnConnect != nil {
		if err := l.OnConnect(ctx, conn, reconnect); err != nil {
			return fmt.Errorf("on connect: %w", err)
		}
	}
	l.up()
	b.Reset()
	if l.OnNotification != nil {
		for _, n := range early {
			l.OnNotification(ctx, n)
		}
	}
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		if l.OnNotification != nil {
			l.OnNotification(ctx, n)
		}
	}
}

// inRecovery reports whether err is a standby's refusal of LISTEN:
// read_only_sql_transaction (25006), which a primary never answers to
// LISTEN (it is allowed in read-only transactions).
func inRecovery(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "25006"
}

// probe checks that conn receives notifications (see session) and returns
// the notifications of the Channels that arrived meanwhile, in order.
func (l *Listener) probe(ctx context.Context, conn *pgx.Conn) ([]*pgconn.Notification, error) {
	timeout := l.ProbeTimeout
	if timeout <= 0 {
		timeout = DefaultProbeTimeout
	}
	pctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var id [8]byte
	_, _ = rand.Read(id[:])
	channel := "pglisten_probe_" + hex.EncodeToString(id[:])
	if _, err := conn.Exec(pctx, "LISTEN "+channel); err != nil {
		return nil, fmt.Errorf("probe: LISTEN %s: %w", channel, err)
	}
	if err := l.notify(pctx, channel, "probe"); err != nil {
		return nil, fmt.Errorf("probe: NOTIFY %s: %w", channel, err)
	}
	var early []*pgconn.Notification
	for {
		n, err := conn.WaitForNotification(pctx)
		if err != nil {
			if ctx.Err() == nil && pctx.Err() != nil {
				return nil, fmt.Errorf("%w: the probe sent on another connection did not arrive within %v", ErrDeaf, timeout)
			}
			return nil, fmt.Errorf("probe: %w", err)
		}
		if n.Channel != channel {
			early = append(early, n)
			continue
		}
		if _, err := conn.Exec(pctx, "UNLISTEN "+channel); err != nil {
			return nil, fmt.Errorf("probe: UNLISTEN %s: %w", channel, err)
		}
		return early, nil
	}
}

// NotifyThrough returns a Listener.Notify that sends through db, a
// service's pool: sending a NOTIFY, unlike receiving one, works through
// any pooler, so the probe needs no second dedicated connection.
func NotifyThrough(db Execer) func(ctx context.Context, channel, payload string) error {
	return func(ctx context.Context, channel, payload string) error {
		_, err := db.Exec(ctx, "SELECT pg_notify($1, $2)", channel, payload)
		return err
	}
}

// notify sends payload on channel through Notify, or else through a
// connection of its own.
func (l *Listener) notify(ctx context.Context, channel, payload string) error {
	if l.Notify != nil {
		return l.Notify(ctx, channel, payload)
	}
	conn, err := l.Connect(ctx)
	if err != nil {
		return err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
		_ = conn.Close(cctx)
	}()
	_, err = conn.Exec(ctx, "SELECT pg_notify($1, $2)", channel, payload)
	return err
}
