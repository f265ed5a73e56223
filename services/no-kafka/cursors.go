package main

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/backoff"
	logc "github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/log"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/httpapi"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/pglisten"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/postgres"
)

// Consumer groups, design 2 (GROUPS_DESIGN=cursors): one slot feeds
// per-group cursors in a table, read below the xid watermark, Sequin/PgQ
// style. The default group's consumer is the only decoder: it records each
// batch it streams in deliveries, in the order it read them, and that table
// is the shared log (migration 0005). Every other group is a row of
// group_cursors, a position (txid, seq) in it. A group's consumer reads
// the rows past its position, below the watermark, records them in
// group_deliveries and moves its cursor in the same transaction: at least
// once, the records idempotent (ON CONFLICT DO NOTHING), never a gap.
//
// From earliest a cursor starts at the beginning of deliveries, from
// latest at the next xid to be assigned (every row recorded after the PUT
// answered is past it). There is no replay phase and no hand-over: a new
// group catches up through the same query that serves it live.
//
// Wake-ups: the default consumer pokes this instance's cursor consumers
// after each batch it records and NOTIFYs (debounced) the other
// instances, whose LISTEN (pglisten, reconnecting) pokes theirs; every
// consumer also polls every GROUP_POLL_INTERVAL, and retries soon while
// rows past its cursor wait above the watermark.
//
// Hot standby: a group's consumer holds a session advisory lock on the
// group for as long as it streams, on a connection of its own; another
// instance's consumer of the group finds the lock taken and waits as a
// standby, retrying, and takes over when the holder's session ends (a
// stop, a crash: Postgres releases the lock with the session). The lock is
// a session lock, not a row lock held in an open transaction: that
// transaction would hold an xid and stop the watermark, and so every
// cursor group, for as long as it stays open. Each batch still takes its
// cursor row FOR UPDATE and checks that it has not moved, so that two
// consumers of one group (a lock lost to a broken connection while the
// old consumer's batch commits) can only record a range twice (absorbed
// by the records), never move the cursor past rows neither recorded.

// Groups designs: the values of GROUPS_DESIGN.
const (
	// DesignSlots gives each group a replication slot of its own
	// (groups.go).
	DesignSlots = "slots"
	// DesignCursors gives each group a cursor over the default group's
	// deliveries (this file).
	DesignCursors = "cursors"
)

// cursorReadSQL reads up to $3 rows of the shared log past the cursor
// ($1, $2), in log order, with each event's created_at (null when the
// retention cleaner already removed the event: the cursor passes the row,
// nothing is delivered).
//
// The watermark, WHY: seq is assigned when a row is inserted, not when it
// commits, and txids are assigned in start order, not commit order. A
// transaction still running may commit rows ordered before rows already
// visible; a cursor moved past the visible ones would skip them for ever.
// pg_snapshot_xmin(pg_current_snapshot()) is the oldest xid still running:
// every transaction below it has committed or aborted, so no row can ever
// appear below it again. Reading only rows of transactions below it, in
// (txid, seq) order, the cursor never passes a row that commits later. The
// watermark and the rows come from one statement, one snapshot: every row
// below the watermark is visible to it.
const cursorReadSQL = `
SELECT d.txid::text, d.seq, d.id::text, m.created_at
FROM deliveries d LEFT JOIN messages m ON m.id = d.id
WHERE (d.txid, d.seq) > ($1::text::xid8, $2::bigint)
  AND d.txid < pg_snapshot_xmin(pg_current_snapshot())
ORDER BY d.txid, d.seq
LIMIT $3`

// cursorAheadSQL reports whether committed rows past the cursor exist at
// all: after a short read, rows above the watermark (a transaction older
// than them still running) are worth a quick retry.
const cursorAheadSQL = `SELECT EXISTS (SELECT 1 FROM deliveries WHERE (txid, seq) > ($1::text::xid8, $2::bigint))`

// cursorStartSQL creates a group's cursor (kept if it exists: a set-up
// redone): from earliest before every row, from latest at the next xid to
// be assigned, so that every row recorded after this commits is past it.
// A row whose transaction was running meanwhile records events written
// before the PUT answered: it is skipped, as from latest says.
const cursorStartSQL = `
INSERT INTO group_cursors (grp, txid, seq)
VALUES ($1, CASE WHEN $2 = 'earliest' THEN '0'::xid8 ELSE pg_snapshot_xmax(pg_current_snapshot()) END, 0)
ON CONFLICT (grp) DO NOTHING`

// cursorsListSQL reads every cursor with its lag in deliveries rows (an
// index range count: it grows with the lag).
const cursorsListSQL = `
SELECT c.grp, c.txid::text, c.seq,
       (SELECT count(*) FROM deliveries d WHERE (d.txid, d.seq) > (c.txid, c.seq))
FROM group_cursors c`

// position is a cursor: the (txid, seq) of the last deliveries row passed.
type position struct {
	txid string // xid8 as text
	seq  int64
}

func (p position) String() string { return p.txid + "/" + strconv.FormatInt(p.seq, 10) }

// errGroupGone is a batch of a group whose row (and cursor) was deleted.
var errGroupGone = errors.New("the group was deleted")

// errCursorMoved is a batch whose cursor another consumer moved.
var errCursorMoved = errors.New("the cursor moved under this consumer (another instance streams the group?)")

// cursorConsumer delivers one group from its cursor. Start once, Stop or
// Abort once; Running and Poke are safe from any goroutine.
type cursorConsumer struct {
	cfg     Config
	group   string
	lockKey int64
	base    logc.Deliverer // Hub, Stats, Group
	logger  *slog.Logger

	running atomic.Bool
	standby atomic.Bool
	wake    chan struct{} // capacity 1: a pending wake-up
	stop    chan struct{} // closed by Stop: end after the batch in hand
	cancel  context.CancelFunc
	done    chan struct{}
	once    sync.Once
}

// cursorLockKey is the session advisory lock a group's active consumer
// holds: advisory locks are the database's, so the schema (one service's
// log) is part of it.
func cursorLockKey(schema, group string) int64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte("no-kafka cursor " + schema + "." + group))
	return int64(h.Sum64())
}

// newCursorConsumer returns group name's consumer (not started).
func (m *groupManager) newCursorConsumer(name string) *cursorConsumer {
	return &cursorConsumer{
		cfg:     m.cfg,
		group:   name,
		lockKey: cursorLockKey(m.cfg.Postgres.Schema, name),
		base:    logc.Deliverer{Hub: m.hub, Stats: m.stats, Group: name},
		logger:  m.logger.With("group", name, "design", DesignCursors),
		wake:    make(chan struct{}, 1),
	}
}

// Running reports whether this consumer holds the group (not a standby).
func (c *cursorConsumer) Running() bool { return c.running.Load() }

// Poke asks for a read now: the shared log has grown. Never blocks.
func (c *cursorConsumer) Poke() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// Start begins delivering in the background until Stop or Abort.
func (c *cursorConsumer) Start() {
	ctx, cancel := context.WithCancel(context.Background())
	c.cancel, c.stop, c.done = cancel, make(chan struct{}), make(chan struct{})
	go c.run(ctx)
}

// Stop ends after the batch in hand is committed (or not: it is then
// read again), within ctx. Safe to call twice.
func (c *cursorConsumer) Stop(ctx context.Context) error {
	c.once.Do(func() { close(c.stop) })
	select {
	case <-c.done:
		return nil
	case <-ctx.Done():
		c.cancel()
		<-c.done
		return fmt.Errorf("cursor consumer of group %s did not stop: %w", c.group, ctx.Err())
	}
}

// Abort ends at once, as a crash would: a batch in hand is rolled back.
func (c *cursorConsumer) Abort() {
	c.once.Do(func() { close(c.stop) })
	c.cancel()
	<-c.done
}

func (c *cursorConsumer) stopped() bool {
	select {
	case <-c.stop:
		return true
	default:
		return false
	}
}

// sleep waits d, a wake-up or Stop; false once stopped.
func (c *cursorConsumer) sleep(ctx context.Context, d time.Duration, wakeable bool) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	var wake chan struct{}
	if wakeable {
		wake = c.wake
	}
	select {
	case <-t.C:
	case <-wake:
	case <-c.stop:
	case <-ctx.Done():
	}
	return !c.stopped() && ctx.Err() == nil
}

func (c *cursorConsumer) run(ctx context.Context) {
	defer close(c.done)
	b := backoff.Backoff{Initial: 50 * time.Millisecond, Max: c.cfg.GroupPoll}
	for !c.stopped() && ctx.Err() == nil {
		err := c.session(ctx, &b)
		if c.stopped() || ctx.Err() != nil {
			return
		}
		if errors.Is(err, errGroupGone) {
			// The reconcile stops this consumer; until then, quietly.
			c.sleep(ctx, c.cfg.GroupPoll, false)
			continue
		}
		d := b.Next()
		c.logger.Warn("cursor consumer stopped; reconnecting", "err", err, "in", d)
		c.sleep(ctx, d, false)
	}
}

// connect opens the consumer's own session: REPLICATION_URL, which must
// reach Postgres directly (never pgbouncer), since the advisory lock that
// makes this instance the group's active one is a session's.
func (c *cursorConsumer) connect(ctx context.Context) (*pgx.Conn, error) {
	cc, err := pgx.ParseConfig(c.cfg.ReplicationURL)
	if err != nil {
		return nil, fmt.Errorf("REPLICATION_URL: %w", err)
	}
	cc.ConnectTimeout = c.cfg.Postgres.ConnectTimeout
	cc.RuntimeParams["application_name"] = postgres.TruncateName("no-kafka:cursor:" + c.group)
	if c.cfg.Postgres.Schema != "" {
		cc.RuntimeParams["search_path"] = c.cfg.Postgres.Schema
	}
	cctx, cancel := context.WithTimeout(ctx, c.cfg.Postgres.ConnectTimeout*2)
	defer cancel()
	return pgx.ConnectConfig(cctx, cc)
}

// session runs one connection: take the group's lock (or wait for it as
// a standby), then deliver until an error or Stop.
func (c *cursorConsumer) session(ctx context.Context, b *backoff.Backoff) error {
	conn, err := c.connect(ctx)
	if err != nil {
		return err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = conn.Close(cctx)
	}()
	for {
		var got bool
		if err := c.query(ctx, conn, `SELECT pg_try_advisory_lock($1)`, c.lockKey).Scan(&got); err != nil {
			return err
		}
		if got {
			break
		}
		if !c.standby.Swap(true) {
			c.logger.Warn("consumer group is active in another instance: waiting as a standby, retrying quietly")
		}
		if !c.sleep(ctx, b.Next(), false) {
			return nil
		}
	}
	if c.standby.Swap(false) {
		c.logger.Info("the other instance released the consumer group: this instance takes over")
	}
	var at position
	err = c.query(ctx, conn, `SELECT txid::text, seq FROM group_cursors WHERE grp = $1`, c.group).Scan(&at.txid, &at.seq)
	if errors.Is(err, pgx.ErrNoRows) {
		return errGroupGone
	}
	if err != nil {
		return err
	}
	c.running.Store(true)
	defer c.running.Store(false)
	b.Reset()
	c.logger.Info("delivering consumer group from its cursor", "position", at.String())
	quick := backoff.Backoff{Initial: time.Millisecond, Max: c.cfg.GroupPoll}
	for !c.stopped() {
		n, ahead, err := c.batch(ctx, conn, &at)
		switch {
		case errors.Is(err, errCursorMoved):
			if err := c.query(ctx, conn, `SELECT txid::text, seq FROM group_cursors WHERE grp = $1`, c.group).Scan(&at.txid, &at.seq); err != nil {
				return err
			}
			c.logger.Warn("cursor moved by another consumer; resuming from it", "position", at.String())
			continue
		case err != nil:
			return err
		case n >= c.cfg.MaxBatch:
			quick.Reset()
			continue
		case ahead:
			// Rows past the cursor wait above the watermark: a transaction
			// older than theirs is still running (often another group's
			// batch). Their announcement may be spent already: retry soon.
			if n > 0 {
				quick.Reset()
			}
			if !c.sleep(ctx, quick.Next(), true) {
				return nil
			}
		default:
			// Caught up: read again on the next wake-up, or the poll.
			quick.Reset()
			if !c.sleep(ctx, c.cfg.GroupPoll, true) {
				return nil
			}
		}
	}
	return nil
}

// query is QueryRow bounded by BACKEND_TIMEOUT.
func (c *cursorConsumer) query(ctx context.Context, conn *pgx.Conn, sql string, args ...any) pgx.Row {
	return timedRow{ctx: ctx, timeout: c.cfg.BackendTimeout, row: func(ctx context.Context) pgx.Row { return conn.QueryRow(ctx, sql, args...) }}
}

// timedRow runs a QueryRow under a timeout at Scan.
type timedRow struct {
	ctx     context.Context
	timeout time.Duration
	row     func(ctx context.Context) pgx.Row
}

func (r timedRow) Scan(dest ...any) error {
	ctx, cancel := context.WithTimeout(r.ctx, r.timeout)
	defer cancel()
	return r.row(ctx).Scan(dest...)
}

// batch delivers the rows past *at below the watermark, at most
// CONSUMER_MAX_BATCH, and moves *at past them; ahead reports, after a
// short batch, that rows past the (moved) cursor wait above the watermark.
func (c *cursorConsumer) batch(ctx context.Context, conn *pgx.Conn, at *position) (n int, ahead bool, err error) {
	rctx, cancel := context.WithTimeout(ctx, c.cfg.BackendTimeout)
	defer cancel()
	rows, err := conn.Query(rctx, cursorReadSQL, at.txid, at.seq, c.cfg.MaxBatch)
	if err != nil {
		return 0, false, err
	}
	var events []logc.Delivery
	to := *at
	for rows.Next() {
		var id string
		var created *time.Time
		if err := rows.Scan(&to.txid, &to.seq, &id, &created); err != nil {
			rows.Close()
			return 0, false, err
		}
		n++
		if created != nil {
			events = append(events, logc.Delivery{ID: id, CreatedAt: *created})
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, false, err
	}
	if n == 0 {
		err := conn.QueryRow(rctx, cursorAheadSQL, at.txid, at.seq).Scan(&ahead)
		return 0, ahead, err
	}
	defer func() {
		if err == nil && n < c.cfg.MaxBatch {
			err = conn.QueryRow(rctx, cursorAheadSQL, at.txid, at.seq).Scan(&ahead)
		}
	}()
	rec := &cursorMove{conn: conn, group: c.group, from: *at, to: to}
	if len(events) == 0 {
		// Only rows of events the cleaner removed: move past them.
		_, err = rec.Deliver(ctx, nil, time.Now())
	} else {
		d := c.base
		d.Records, d.Timeout = rec, c.cfg.BackendTimeout
		err = d.Deliver(ctx, events)
	}
	if err != nil {
		if errors.Is(err, errCursorMoved) || errors.Is(err, errGroupGone) {
			return 0, false, err
		}
		return 0, false, fmt.Errorf("deliver %d events from the cursor: %w", len(events), err)
	}
	*at = to
	return n, false, nil
}

// cursorMove is the DeliveryRecorder of one batch: in one transaction it
// takes the cursor row (FOR UPDATE), checks that it is still at from,
// records the batch in group_deliveries and moves the cursor to to, and
// commits before returning (the Deliverer wakes waiters then).
type cursorMove struct {
	conn     *pgx.Conn
	group    string
	from, to position
}

// Deliver implements logc.DeliveryRecorder.
func (r *cursorMove) Deliver(ctx context.Context, batch []logc.Delivery, at time.Time) (fresh map[string]bool, err error) {
	err = pgx.BeginFunc(ctx, r.conn, func(tx pgx.Tx) error {
		// The lock comes after the read, which took no xid: the batch's
		// transaction holds an xid (and so the other groups' watermark)
		// only for these few statements.
		var now position
		err := tx.QueryRow(ctx, `SELECT txid::text, seq FROM group_cursors WHERE grp = $1 FOR UPDATE`, r.group).Scan(&now.txid, &now.seq)
		if errors.Is(err, pgx.ErrNoRows) {
			return errGroupGone
		}
		if err != nil {
			return err
		}
		if now != r.from {
			return errCursorMoved
		}
		if len(batch) > 0 {
			if fresh, err = logc.GroupRecorderIn(tx, r.group).Deliver(ctx, batch, at); err != nil {
				return err
			}
		}
		_, err = tx.Exec(ctx, `UPDATE group_cursors SET txid = $2::text::xid8, seq = $3, moved_at = now() WHERE grp = $1`, r.group, r.to.txid, r.to.seq)
		return err
	})
	return fresh, err
}

// noBytes is why a cursor group has no lag in bytes.
const noBytes = "a cursor's position is a row of the deliveries table, not a WAL LSN: its lag is lag_events (the rows past it), " +
	"behind the default group's own lag, whose slot feeds every cursor"

// cursorLag is one cursor as GET /groups shows it.
type cursorLag struct {
	at  position
	lag int64
}

// cursorLags reads every cursor and its lag.
func (m *groupManager) cursorLags(ctx context.Context) (map[string]cursorLag, error) {
	rows, err := m.pool.Query(ctx, cursorsListSQL)
	if err != nil {
		return nil, postgres.MapError("read cursors", err)
	}
	out := map[string]cursorLag{}
	for rows.Next() {
		var name string
		var cl cursorLag
		if err := rows.Scan(&name, &cl.at.txid, &cl.at.seq, &cl.lag); err != nil {
			rows.Close()
			return nil, postgres.MapError("read cursors", err)
		}
		out[name] = cl
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, postgres.MapError("read cursors", err)
	}
	return out, nil
}

// setupCursor creates the group's cursor (cursorStartSQL) and marks the
// group ready, in one transaction; an unknown group is a 404.
func (m *groupManager) setupCursor(ctx context.Context, name, from string) error {
	err := pgx.BeginFunc(ctx, m.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, cursorStartSQL, name, from); err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, `UPDATE groups SET ready = true WHERE name = $1`, name)
		if err == nil && tag.RowsAffected() == 0 {
			return logc.UnknownGroup(name)
		}
		return err
	})
	if postgres.SQLSTATE(err) == pgerrcode.ForeignKeyViolation { // deleted meanwhile
		return logc.UnknownGroup(name)
	}
	if err != nil && !errors.Is(err, httpapi.ErrNotFound) {
		return postgres.MapError("create cursor", err)
	}
	return err
}

// setupCursorPending is the runner's Pending in design cursors: a group
// whose creator died before its cursor existed gets it now (from latest:
// at this later point) and its consumer starts.
func (m *groupManager) setupCursorPending(ctx context.Context, g logc.GroupRow) {
	if err := m.setupCursor(ctx, g.Name, g.From); err != nil {
		m.logger.Error("creating a consumer group's cursor failed; the next reconcile tries again", "group", g.Name, "err", err)
		return
	}
	m.runner.Run(g.Name)
}

// announce tells every cursor consumer that the shared log grew: this
// instance's at once, the others' through a debounced NOTIFY. The default
// consumer calls it after each batch it recorded.
func (m *groupManager) announce() {
	m.poke()
	if m.notify != nil {
		m.notify.Poke()
	}
}

// poke wakes this instance's cursor consumers.
func (m *groupManager) poke() {
	for _, c := range m.runner.Consumers() {
		if cc, ok := c.(*cursorConsumer); ok {
			cc.Poke()
		}
	}
}

// notifyChannel is the channel the shared log's growth is announced on:
// one per schema (one service's log).
func notifyChannel(schema string) string {
	return postgres.TruncateName("no_kafka_log_" + schema)
}

// listen starts the LISTEN connection that wakes this instance's cursor
// consumers when another instance's default consumer records a batch
// (REPLICATION_URL: a direct session). After every (re)connect it pokes
// them all: what was announced while it was down is read then.
func (m *groupManager) listen(ctx context.Context) (*pglisten.Listener, error) {
	cc, err := pgx.ParseConfig(m.cfg.ReplicationURL)
	if err != nil {
		return nil, fmt.Errorf("REPLICATION_URL: %w", err)
	}
	cc.ConnectTimeout = m.cfg.Postgres.ConnectTimeout
	cc.RuntimeParams["application_name"] = postgres.TruncateName("no-kafka:cursors:" + m.cfg.Postgres.Schema)
	l := &pglisten.Listener{
		Connect:  func(ctx context.Context) (*pgx.Conn, error) { return pgx.ConnectConfig(ctx, cc) },
		Channels: []string{notifyChannel(m.cfg.Postgres.Schema)},
		OnConnect: func(context.Context, *pgx.Conn, bool) error {
			m.poke()
			return nil
		},
		OnNotification: func(context.Context, *pgconn.Notification) { m.poke() },
		OnDisconnect: func(err error, retryIn time.Duration) {
			m.logger.Warn("cursor groups' listener lost its connection; reconnecting (the consumers poll meanwhile)", "err", err, "retry_in", retryIn)
		},
		ConnectTimeout: m.cfg.BackendTimeout,
		Notify:         pglisten.NotifyThrough(m.pool),
	}
	if err := l.Start(); err != nil {
		return nil, err
	}
	if err := l.Await(ctx, m.cfg.BackendTimeout+pglisten.DefaultProbeTimeout+time.Second); err != nil {
		_ = l.Close(context.Background())
		return nil, fmt.Errorf("REPLICATION_URL: the cursor groups' LISTEN: %w", err)
	}
	return l, nil
}

// announcing is the default consumer's DeliveryRecorder in design
// cursors: after each batch it recorded, it announces the log's growth.
type announcing struct {
	logc.DeliveryRecorder
	after func()
}

// Deliver implements logc.DeliveryRecorder.
func (a announcing) Deliver(ctx context.Context, batch []logc.Delivery, at time.Time) (map[string]bool, error) {
	fresh, err := a.DeliveryRecorder.Deliver(ctx, batch, at)
	if err == nil && len(fresh) > 0 {
		a.after()
	}
	return fresh, err
}
