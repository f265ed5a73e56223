package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/backoff"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/eventstore"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/httpapi"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/pglisten"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/postgres"
)

// store is the Postgres eventstore.Backend. It is safe for concurrent use;
// the listener goroutine is started by startListener and stopped by
// stopListener, before the pool is closed.
type store struct {
	pool     *pgxpool.Pool
	cfg      Config
	logger   *slog.Logger
	schema   string
	hub      hub
	listener *listener
	// notifier sends the debounced NOTIFYs (NOTIFY_MODE=debounced); nil
	// in commit mode, where the events_notify trigger notifies.
	notifier *pglisten.Debouncer
	// sharedPolls and reads count the shared fallback polls and the
	// subscriptions' own reads (for tests).
	sharedPolls, reads atomic.Int64
}

// newStore returns a store on pool; npool, if not nil, carries the
// debounced NOTIFYs.
func newStore(pool, npool *pgxpool.Pool, cfg Config, logger *slog.Logger) *store {
	schema := cfg.Postgres.Schema
	if schema == "" {
		schema = "public"
	}
	s := &store{pool: pool, cfg: cfg, logger: logger, schema: schema, hub: hub{ch: make(chan struct{})}}
	if npool != nil {
		// The trigger's channel and payload: listeners cannot tell the two
		// modes apart.
		s.notifier = &pglisten.Debouncer{
			DB: npool, Channel: notifyChannel, Payload: schema, Interval: cfg.Notify.Interval, Timeout: cfg.BackendTimeout,
			OnError: func(err error) { logger.Warn("debounced NOTIFY failed; retrying", "err", err) },
		}
	}
	return s
}

// Capabilities implements eventstore.Backend.
func (s *store) Capabilities() eventstore.Capabilities {
	return eventstore.Capabilities{ConditionalAppend: true, ServerSideStreamRead: true, PushSubscription: true}
}

// appendSQL appends a batch in ONE statement, so no explicit transaction is
// needed: cur reads the stream's last version through the primary key, the
// WHERE applies the expected version ($5: NULL for "any", -1 for
// "no_stream"), and the new rows take versions cur+1, cur+2, ... in request
// order. Two concurrent appends that read the same cur insert the same
// (stream_id, version): the second waits on the primary key until the first
// commits, then fails with unique_violation (23505). That is the optimistic
// lock; no row lock is taken on read.
//
// $6 is eventstore.notify for this statement's transaction only
// (set_config's is_local): 'on' lets the events_notify trigger NOTIFY at
// commit (NOTIFY_MODE=commit), 'off' silences it (debounced: the store
// pokes its Debouncer after the commit), so the transaction takes no
// notify lock. cur is evaluated before the statement's AFTER trigger
// fires, and, holding a volatile function, is neither inlined nor pruned.
const appendSQL = `
WITH cur AS (
    SELECT coalesce(max(version), -1) AS v, set_config('eventstore.notify', $6, true) AS notify
      FROM events WHERE stream_id = $1
)
INSERT INTO events (stream_id, version, event_type, data, metadata)
SELECT $1, cur.v + e.n, e.t, e.d::jsonb, e.m::jsonb
FROM cur, unnest($2::text[], $3::text[], $4::text[]) WITH ORDINALITY AS e(t, d, m, n)
WHERE $5::bigint IS NULL OR cur.v = $5::bigint
ORDER BY e.n
RETURNING version, global_pos, xid::text`

// anyRetries bounds how often an "any" append retries after losing a race
// for the next version to a concurrent append.
const anyRetries = 50

// Append implements eventstore.Backend.
func (s *store) Append(ctx context.Context, stream string, expected eventstore.ExpectedVersion, events []eventstore.EventData) (eventstore.AppendResult, error) {
	cols := columnsOf(events)
	var cond *int64
	if v, ok := expected.Version(); ok {
		cond = &v
	} else if expected.IsNoStream() {
		none := int64(-1)
		cond = &none
	}
	for attempt := 0; ; attempt++ {
		res, n, err := s.tryAppend(ctx, stream, cols, cond)
		lostRace := postgres.SQLSTATE(err) == pgerrcode.UniqueViolation
		if lostRace && expected.IsAny() && attempt < anyRetries {
			continue
		}
		if err != nil && !lostRace {
			mapped := postgres.MapError("postgres append", err)
			if appendNotSent(err) {
				mapped = notRecorded(mapped)
			}
			return eventstore.AppendResult{}, mapped
		}
		if lostRace || n == 0 {
			// The condition failed: nothing was recorded, whatever this
			// read of the actual version answers.
			actual, aerr := s.lastVersion(ctx, stream)
			if aerr != nil {
				return eventstore.AppendResult{}, notRecorded(postgres.MapError("postgres read the actual version", aerr))
			}
			return eventstore.AppendResult{}, &eventstore.WrongExpectedVersionError{Stream: stream, Expected: expected, Actual: actual}
		}
		s.committed()
		return res, nil
	}
}

// committed wakes the subscriptions after an append committed, in
// debounced mode: this instance's at once, every instance's through the
// Debouncer's next NOTIFY. In commit mode the trigger's NOTIFY does both.
func (s *store) committed() {
	if s.notifier != nil {
		s.hub.wake()
		s.notifier.Poke()
	}
}

// errNoConnection marks an append that failed before it had a
// connection: nothing was sent.
type errNoConnection struct{ err error }

func (e errNoConnection) Error() string { return "no connection for the append: " + e.err.Error() }
func (e errNoConnection) Unwrap() error { return e.err }

// appendNotSent reports whether a failed append's error proves that
// nothing was recorded: it failed before the INSERT was sent (no
// connection from the pool, a context already done, a connection that
// failed before writing: pgconn.SafeToRetry), or Postgres answered it
// with an ERROR, which rolls back the statement's implicit transaction
// (a FATAL, such as 57P01 when the server shuts down, ends the session
// and may come once the commit is done). Anything else (a connection
// lost or a deadline passed while the statement ran or committed, a row
// the client could not scan) leaves the outcome unknown.
func appendNotSent(err error) bool {
	var noConn errNoConnection
	if errors.As(err, &noConn) || pgconn.SafeToRetry(err) {
		return true
	}
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return false
	}
	severity := pgErr.SeverityUnlocalized
	if severity == "" {
		severity = pgErr.Severity
	}
	return severity == "ERROR"
}

// notRecorded marks a 503 as of kind not_recorded (httpapi.KindOf): the
// append is known not to have been recorded, so a retry is safe. Other
// errors are returned as they are.
func notRecorded(err error) error {
	if httpapi.StatusOf(err) != http.StatusServiceUnavailable {
		return err
	}
	return fmt.Errorf("%w (%w)", err, httpapi.ErrNotRecorded)
}

// appendColumns are a batch of events as appendSQL's arrays: $2 the
// types, $3 the data, $4 the metadata.
type appendColumns struct {
	types, data, meta []string
}

// columnsOf is events as appendSQL's arrays.
func columnsOf(events []eventstore.EventData) appendColumns {
	c := appendColumns{make([]string, len(events)), make([]string, len(events)), make([]string, len(events))}
	for i, e := range events {
		c.types[i], c.data[i], c.meta[i] = e.Type, string(e.Data), string(e.Metadata)
	}
	return c
}

// tryAppend runs appendSQL once: the events of cols appended to stream
// when its version is cond (nil: any). It returns the result and how
// many rows the statement wrote (0: the condition failed).
func (s *store) tryAppend(ctx context.Context, stream string, cols appendColumns, cond *int64) (eventstore.AppendResult, int, error) {
	notify := "on"
	if s.notifier != nil {
		notify = "off"
	}
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return eventstore.AppendResult{}, 0, errNoConnection{err}
	}
	defer conn.Release()
	rows, err := conn.Query(ctx, appendSQL, stream, cols.types, cols.data, cols.meta, cond, notify)
	if err != nil {
		return eventstore.AppendResult{}, 0, err
	}
	defer rows.Close()
	var res eventstore.AppendResult
	n := 0
	for rows.Next() {
		var v, gp int64
		var xid string
		if err := rows.Scan(&v, &gp, &xid); err != nil {
			return res, 0, err
		}
		if n == 0 {
			first := v
			res.FirstVersion = &first
		}
		last := v
		res.LastVersion = &last
		if gp >= res.GlobalPosition {
			res.GlobalPosition = gp
			res.Position = xid + ":" + strconv.FormatInt(gp, 10)
		}
		n++
	}
	return res, n, rows.Err()
}

func (s *store) lastVersion(ctx context.Context, stream string) (int64, error) {
	var v int64
	err := s.pool.QueryRow(ctx, `SELECT coalesce(max(version), -1) FROM events WHERE stream_id = $1`, stream).Scan(&v)
	return v, err
}

// readSQL reads a page of one stream and its last version in one
// statement (one snapshot): the LEFT JOIN keeps the row with the last
// version when the page is empty. Both parts use the primary key.
const readSQL = `
SELECT m.last, e.version, e.global_pos, e.xid::text, e.event_type, e.data, e.metadata, e.created_at
FROM (SELECT max(version) AS last FROM events WHERE stream_id = $1) m
LEFT JOIN LATERAL (
    SELECT version, global_pos, xid, event_type, data, metadata, created_at
    FROM events
    WHERE stream_id = $1 AND version >= $2
    ORDER BY version
    LIMIT $3
) e ON true
ORDER BY e.version`

// Read implements eventstore.Backend. records_scanned is null: Postgres does
// not report per query how many tuples an index scan visited (dead ones
// included) without EXPLAIN ANALYZE, and the service does not pretend that
// it read exactly what it returned.
func (s *store) Read(ctx context.Context, stream string, from int64, limit int) (eventstore.ReadResult, error) {
	rows, err := s.pool.Query(ctx, readSQL, stream, from, limit)
	if err != nil {
		return eventstore.ReadResult{}, postgres.MapError("postgres read", err)
	}
	defer rows.Close()
	res := eventstore.ReadResult{Stream: stream, Events: []eventstore.RecordedEvent{}}
	page := eventstore.Page{Max: eventstore.MaxReadBytes}
	for rows.Next() {
		var (
			last, version, gp *int64
			xid, typ          *string
			data, meta        []byte
			created           *time.Time
		)
		if err := rows.Scan(&last, &version, &gp, &xid, &typ, &data, &meta, &created); err != nil {
			return res, postgres.MapError("postgres read", err)
		}
		res.LastVersion = last
		if version == nil {
			continue
		}
		e := eventstore.RecordedEvent{
			Stream: stream, Version: version, Position: *xid + ":" + strconv.FormatInt(*gp, 10), GlobalPosition: *gp,
			Type: *typ, Data: json.RawMessage(data), Metadata: json.RawMessage(meta), CreatedAt: *created,
		}
		if !page.Fits(e) {
			// The page is full; rows.Close discards the rest unread.
			break
		}
		res.Events = append(res.Events, e)
	}
	if err := rows.Err(); err != nil {
		return res, postgres.MapError("postgres read", err)
	}
	return res, nil
}

// cursor is a subscription's position: the last delivered (xid, global_pos).
type cursor struct {
	xid uint64
	pos int64
}

func (c cursor) String() string {
	return strconv.FormatUint(c.xid, 10) + ":" + strconv.FormatInt(c.pos, 10)
}

// parsePosition parses "<xid>:<global_pos>"; "" is the beginning.
func parsePosition(s string) (cursor, error) {
	if s == "" {
		return cursor{}, nil
	}
	x, p, ok := strings.Cut(s, ":")
	xid, err1 := strconv.ParseUint(x, 10, 64)
	pos, err2 := strconv.ParseInt(p, 10, 64)
	if !ok || err1 != nil || err2 != nil || pos < 0 {
		return cursor{}, fmt.Errorf("from %q is not a position of this service (want <xid>:<global_pos>, as events and appends report it): %w", s, httpapi.ErrNotFound)
	}
	return cursor{xid, pos}, nil
}

// pageSQL is the subscription's read. A bigserial is handed out at INSERT
// but becomes visible at COMMIT, so global_pos alone is not a safe cursor:
// a transaction holding a lower number can commit after a higher one was
// read. Instead the cursor is (xid, global_pos), and only rows of
// transactions below the watermark pg_snapshot_xmin(pg_current_snapshot())
// are read: every transaction with a smaller xid has committed or aborted,
// so no row can ever appear behind the cursor. The row comparison uses the
// (xid, global_pos) index. $4 is the watermark, taken by watermarkSQL
// before the read, so that pendingSQL asks about exactly the rows this read
// left out (see Subscribe).
//
// ORDER BY names the table's columns (events.xid): a bare "xid" would mean
// the output column xid::text, which Postgres resolves first, and sort as
// text ("10000" before "9999"). Every time the xid counter gained a digit,
// a page would be delivered out of order and the cursor, left on the
// page's last row, would step back (seen as a conformance failure in CI).
const pageSQL = `
SELECT stream_id, version, global_pos, xid::text, event_type, data, metadata, created_at
FROM events
WHERE (xid, global_pos) > ($1::text::xid8, $2::bigint)
  AND xid < $4::text::xid8
ORDER BY events.xid, events.global_pos
LIMIT $3`

// watermarkSQL is the subscription's watermark: every transaction with a
// smaller xid has committed or aborted.
const watermarkSQL = `SELECT pg_snapshot_xmin(pg_current_snapshot())::text`

// pendingSQL tells whether committed rows exist above the watermark: the
// watermark is held back by an older transaction still open, so the
// subscription should look again soon rather than wait for the next
// notification. $3, if not null, limits the question to transactions that
// started before the subscription (xid below the snapshot's xmax taken
// then): caught-up is sent only once those are delivered, so that it
// covers every event committed before the subscription began, even with a
// long transaction open elsewhere, without waiting for later appends.
//
// $4 is the watermark the page read used, not a new one: with a new
// snapshot here, a transaction that finished between the two queries would
// lift the watermark above rows the page did not read, they would count as
// neither read nor pending, and caught-up would be sent before them (seen in
// the conformance suite under load, with parallel tests holding the
// watermark back).
const pendingSQL = `
SELECT EXISTS (
    SELECT 1 FROM events
    WHERE (xid, global_pos) > ($1::text::xid8, $2::bigint)
      AND xid >= $4::text::xid8
      AND ($3::text IS NULL OR xid < $3::text::xid8)
)`

// page reads the next page after c, at most limit events and at most
// eventstore.MaxSubscribePageBytes of them; more reports whether it
// stopped early for either bound (a next page may hold more). It does
// not hold a connection while the caller delivers.
func (s *store) page(ctx context.Context, c cursor, watermark string, limit int) (evs []eventstore.RecordedEvent, curs []cursor, more bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.BackendTimeout)
	defer cancel()
	rows, err := s.pool.Query(ctx, pageSQL, strconv.FormatUint(c.xid, 10), c.pos, limit, watermark)
	if err != nil {
		return nil, nil, false, err
	}
	defer rows.Close()
	page := eventstore.Page{Max: eventstore.MaxSubscribePageBytes}
	for rows.Next() {
		var (
			e   eventstore.RecordedEvent
			v   int64
			xid string
		)
		if err := rows.Scan(&e.Stream, &v, &e.GlobalPosition, &xid, &e.Type, &e.Data, &e.Metadata, &e.CreatedAt); err != nil {
			return nil, nil, false, err
		}
		x, err := strconv.ParseUint(xid, 10, 64)
		if err != nil {
			return nil, nil, false, fmt.Errorf("xid %q: %w", xid, err)
		}
		e.Version = &v
		cur := cursor{x, e.GlobalPosition}
		e.Position = cur.String()
		if !page.Fits(e) {
			// Read again from the last event that fit.
			return evs, curs, true, nil
		}
		evs = append(evs, e)
		curs = append(curs, cur)
	}
	return evs, curs, len(evs) == limit, rows.Err()
}

func (s *store) pending(ctx context.Context, c cursor, watermark string, before *string) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.BackendTimeout)
	defer cancel()
	var p bool
	err := s.pool.QueryRow(ctx, pendingSQL, strconv.FormatUint(c.xid, 10), c.pos, before, watermark).Scan(&p)
	return p, err
}

// watermark returns the xid below which every transaction has finished.
func (s *store) watermark(ctx context.Context) (string, error) {
	s.reads.Add(1)
	ctx, cancel := context.WithTimeout(ctx, s.cfg.BackendTimeout)
	defer cancel()
	var w string
	err := s.pool.QueryRow(ctx, watermarkSQL).Scan(&w)
	return w, err
}

// horizon returns the xmax of a snapshot taken now: every transaction that
// committed before now has a smaller xid.
func (s *store) horizon(ctx context.Context) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.BackendTimeout)
	defer cancel()
	var x string
	err := s.pool.QueryRow(ctx, `SELECT pg_snapshot_xmax(pg_current_snapshot())::text`).Scan(&x)
	return x, err
}

// Subscribe implements eventstore.Backend: page through the backlog below
// the watermark, report caught-up, then wait for a notification (or the
// fallback poll, or a short retry while the watermark is held back) and
// read again. A failed query is retried after the poll interval: the
// subscription survives a Postgres restart.
func (s *store) Subscribe(ctx context.Context, from string, sub eventstore.Subscriber) error {
	cur, err := parsePosition(from)
	if err != nil {
		return err
	}
	start, err := s.horizon(ctx)
	if err != nil {
		return postgres.MapError("postgres subscribe", err)
	}
	defer s.joinPoll()()
	caughtUp := false
	heldBack := 20 * time.Millisecond
	for {
		wake := s.hub.wait() // taken before the read: a wake-up during it is not lost
		// One watermark for the page and the pending question below.
		w, err := s.watermark(ctx)
		var (
			evs  []eventstore.RecordedEvent
			curs []cursor
			more bool
		)
		if err == nil {
			evs, curs, more, err = s.page(ctx, cur, w, s.cfg.PageSize)
		}
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			s.logger.Warn("subscription read failed; retrying", "err", err)
			if err := backoff.Sleep(ctx, s.cfg.PollInterval); err != nil {
				return err
			}
			continue
		}
		for i, e := range evs {
			if err := sub.Event(e); err != nil {
				return err
			}
			cur = curs[i]
		}
		if more {
			continue
		}
		// Committed rows above the watermark: during catch-up only those of
		// transactions older than the subscription count.
		var before *string
		if !caughtUp {
			before = &start
		}
		pending, perr := s.pending(ctx, cur, w, before)
		if perr == nil && !pending && !caughtUp {
			caughtUp = true
			if err := sub.CaughtUp(); err != nil {
				return err
			}
		}
		if err := s.waitNext(ctx, wake, perr, pending, &heldBack); err != nil {
			return err
		}
	}
}

// waitNext waits for a subscription's next read. Held back (committed
// rows above the watermark: pending), or the question failed (perr):
// look again soon on its own: after heldBack (at most POLL_INTERVAL),
// which doubles each time up to a second, or after POLL_INTERVAL when
// the question failed. Otherwise wait for a
// notification (wake) or for the shared fallback poll (pollShared),
// which wakes every subscription only when a new event may be readable:
// one query per POLL_INTERVAL for all of them. It returns ctx's error
// once ctx ends.
func (s *store) waitNext(ctx context.Context, wake <-chan struct{}, perr error, pending bool, heldBack *time.Duration) error {
	var timeout <-chan time.Time
	if perr != nil || pending {
		wait := s.cfg.PollInterval
		if perr == nil {
			wait = min(*heldBack, wait)
			*heldBack = min(*heldBack*2, time.Second)
		}
		t := time.NewTimer(wait)
		defer t.Stop()
		timeout = t.C
	} else {
		*heldBack = 20 * time.Millisecond
	}
	select {
	case <-ctx.Done():
	case <-wake:
	case <-timeout:
	}
	return ctx.Err()
}

// tailSQL is the shared fallback poll's question: the largest xid of the
// events below the watermark. A subscription's next read can find
// something new only if it grew: an event committed under the watermark
// was written by a transaction that was running, so at or above the
// watermark, when the answer was last taken; and rows above the
// watermark are the held-back case a subscription polls on its own.
const tailSQL = `
SELECT coalesce((SELECT xid::text FROM events
                  WHERE xid < pg_snapshot_xmin(pg_current_snapshot())
                  ORDER BY xid DESC LIMIT 1), '')`

// joinPoll counts a subscription in the shared fallback poll, starting
// it if it is the first; call the returned function when it ends.
func (s *store) joinPoll() (leave func()) {
	s.hub.mu.Lock()
	s.hub.subs++
	start := !s.hub.polling
	s.hub.polling = true
	s.hub.mu.Unlock()
	if start {
		go s.pollShared()
	}
	return func() {
		s.hub.mu.Lock()
		s.hub.subs--
		s.hub.mu.Unlock()
	}
}

// pollShared is the fallback poll of every subscription of this instance,
// for the wake-ups a notification cannot give (a listener reconnecting, a
// NOTIFY lost): one tailSQL per POLL_INTERVAL, and a wake of everyone
// when its answer changed or it failed. It ends at the first tick with no
// subscription left; its first tick wakes everyone, having no earlier
// answer to compare. (Each subscription re-reading on its own timer made
// three queries per POLL_INTERVAL per subscriber.)
func (s *store) pollShared() {
	t := time.NewTicker(s.cfg.PollInterval)
	defer t.Stop()
	last, known := "", false
	for range t.C {
		s.hub.mu.Lock()
		if s.hub.subs == 0 {
			s.hub.polling = false
			s.hub.mu.Unlock()
			return
		}
		s.hub.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), s.cfg.BackendTimeout)
		var tail string
		err := s.pool.QueryRow(ctx, tailSQL).Scan(&tail)
		cancel()
		s.sharedPolls.Add(1)
		if err != nil || !known || tail != last {
			s.hub.wake()
		}
		last, known = tail, err == nil
	}
}

// hub wakes every waiting subscription at once: wait returns a channel
// that wake closes (and replaces). It also counts the subscriptions for
// the shared fallback poll (joinPoll).
type hub struct {
	mu      sync.Mutex
	ch      chan struct{}
	subs    int
	polling bool
}

func (h *hub) wait() <-chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.ch
}

func (h *hub) wake() {
	h.mu.Lock()
	defer h.mu.Unlock()
	close(h.ch)
	h.ch = make(chan struct{})
}

var _ eventstore.Backend = (*store)(nil)
