package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/backoff"
	logc "github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/log"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/postgres"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/stats"
)

// consumer streams the slot with its plugin's decoder (decoders.go) and
// hands each insert into the messages table to the Deliverer. It confirms
// (standby status update) only positions whose events are recorded:
// at-least-once, duplicates absorbed by the Deliverer. Start once, Stop or Abort once; Running is safe from
// any goroutine.
type consumer struct {
	cfg Config
	// slot is the replication slot streamed: SLOT_NAME for the default
	// group, groupSlot's name for another.
	slot    string
	pool    *pgxpool.Pool
	deliver *logc.Deliverer
	stats   *stats.Recorder
	logger  *slog.Logger

	running atomic.Bool
	aborted atomic.Bool
	cancel  context.CancelFunc
	done    chan struct{}
	// pid is the walsender's backend pid of the current connection.
	pid atomic.Uint32
	// lastErr is why the stream last ended (a string), for /readyz.
	lastErr atomic.Value
	// standby is set while the slot is active in another process (a
	// second instance on the same slot): this one waits, retrying
	// quietly, and takes over when the slot is released.
	standby atomic.Bool
	// streamed is when the current stream's START_REPLICATION succeeded
	// (Unix nanoseconds; 0 before), for the crash-loop guard.
	streamed atomic.Int64
	// onAbort, on the default group's consumer, aborts the other groups'
	// consumers with it (a crash ends them all).
	onAbort func()
	// onMissing, on the default group's consumer, is called when
	// START_REPLICATION finds no slot: a standby promoted on PostgreSQL
	// 15 or 16 starts without it (no failover slots before 17), or it was
	// dropped. It creates the slot again and delivers, from the messages
	// table, the events the lost slot had not delivered (resync).
	onMissing func(ctx context.Context) error
}

// Running reports whether the consumer streams its slot (groupConsumer).
func (c *consumer) Running() bool { return c.running.Load() }

// standbyError is /readyz's answer while the consumer waits as a standby.
func (c *consumer) standbyError() error {
	return fmt.Errorf("standby: slot %s is active in another process (another instance streams it); this one takes over when it is released", c.slot)
}

// ready is /readyz's check of the replication: nil while the consumer
// streams its slot, else why not (a standby waiting for the slot, or the
// stream's last error).
func (c *consumer) ready(context.Context) error {
	if c.running.Load() {
		return nil
	}
	if c.standby.Load() {
		return c.standbyError()
	}
	if why := c.streamError(); why != "" {
		return fmt.Errorf("not streaming slot %s: %s", c.slot, why)
	}
	return fmt.Errorf("not streaming slot %s", c.slot)
}

// slotInUse reports whether err is START_REPLICATION's refusal of a slot
// that another walsender streams (SQLSTATE 55006, "replication slot ...
// is active for PID ...").
func slotInUse(err error) bool {
	return postgres.SQLSTATE(err) == pgerrcode.ObjectInUse
}

// slotMissing reports whether err is START_REPLICATION's refusal of a
// slot that does not exist (SQLSTATE 42704, "replication slot ... does
// not exist").
func slotMissing(err error) bool {
	return postgres.SQLSTATE(err) == pgerrcode.UndefinedObject
}

// streamError returns why the stream last ended, or "".
func (c *consumer) streamError() string {
	s, _ := c.lastErr.Load().(string)
	return s
}

// explain adds the way out to a stream error that means the slot was
// invalidated (wal_status lost: max_slot_wal_keep_size removed WAL it
// needed), which no retry can cure.
func explain(slot string, err error) error {
	// PostgreSQL 13-15 say "cannot read from logical replication slot"
	// (logical.c, CreateDecodingContext: restart_lsn invalid), 16 and
	// later "can no longer get changes from replication slot".
	if postgres.SQLSTATE(err) == pgerrcode.ObjectNotInPrerequisiteState &&
		(strings.Contains(err.Error(), "can no longer get changes") || strings.Contains(err.Error(), "cannot read from logical replication slot")) {
		return fmt.Errorf("slot %s is lost (max_slot_wal_keep_size removed WAL it needed): drop it with SELECT pg_drop_replication_slot('%s') and restart; "+
			"the start creates a new slot and delivers the events written meanwhile from the messages table: %w", slot, slot, err)
	}
	return err
}

// item is one message from the server, decoded by the reader goroutine.
type item struct {
	err       error
	keepalive bool
	reply     bool
	lsn       pglogrepl.LSN // XLogData start, or the keepalive's server WAL end
	change                  // the XLogData's, decoded
}

// ensureSlot creates the persistent slot with SLOT_PLUGIN if it is
// missing (and says so, with created true), and refuses one that cannot be
// used, or group slots of another plugin. With pgoutput it makes the
// publication first (ensurePublication).
func ensureSlot(ctx context.Context, cfg Config, pool *pgxpool.Pool, logger *slog.Logger) (created bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, cfg.SlotCreateTimeout)
	defer cancel()
	var plugin, database, current, walStatus string
	var logical bool
	err = pool.QueryRow(ctx, `SELECT coalesce(plugin, ''), coalesce(database, ''), current_database(),
		slot_type = 'logical', coalesce(wal_status, '')
		FROM pg_replication_slots WHERE slot_name = $1`, cfg.Slot).Scan(&plugin, &database, &current, &logical, &walStatus)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
	case err != nil:
		return false, fmt.Errorf("read slot %s: %w", cfg.Slot, err)
	case !logical:
		return false, fmt.Errorf("SLOT_NAME: slot %s exists and is not a logical slot", cfg.Slot)
	case database != current:
		// A logical slot decodes one database only; START_REPLICATION on
		// a connection to another database fails forever.
		return false, fmt.Errorf("SLOT_NAME: slot %s belongs to database %q, not %q (DATABASE_URL / REPLICATION_URL); "+
			"choose another SLOT_NAME", cfg.Slot, database, current)
	case plugin != cfg.SlotPlugin:
		// A slot's plugin is fixed at its creation.
		return false, fmt.Errorf("SLOT_PLUGIN is %s, but slot %s (SLOT_NAME) was made with %s: set SLOT_PLUGIN=%s, "+
			"or choose another SLOT_NAME (a new slot streams from its creation; the start delivers the events the table holds undelivered)",
			cfg.SlotPlugin, cfg.Slot, plugin, plugin)
	case walStatus == "lost":
		return false, fmt.Errorf("SLOT_NAME: slot %s is lost (max_slot_wal_keep_size removed WAL it needed; the events in it are gone): "+
			"drop it with SELECT pg_drop_replication_slot('%s') and restart to create a new one", cfg.Slot, cfg.Slot)
	}
	if err := checkGroupPlugins(ctx, cfg, pool); err != nil {
		return false, err
	}
	if cfg.SlotPlugin == PluginPgoutput {
		if err := ensurePublication(ctx, cfg, pool); err != nil {
			return false, err
		}
	}
	if plugin != "" {
		logger.Info("resuming replication slot", "slot", cfg.Slot, "plugin", plugin, "database", database, "wal_status", walStatus)
		return false, nil
	}
	conn, err := connectReplication(ctx, cfg, cfg.Slot)
	if err != nil {
		return false, err
	}
	defer conn.Close(context.Background())
	// Persistent (not TEMPORARY): a restarted service resumes from its
	// confirmed_flush_lsn. NOEXPORT_SNAPSHOT: no initial table copy; the
	// log starts at the slot's creation, before the service accepts writes.
	res, err := createSlot(ctx, conn, cfg.Slot, cfg.SlotPlugin, "nothing")
	if postgres.SQLSTATE(err) == pgerrcode.DuplicateObject { // created meanwhile by another instance
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("create replication slot %s: %w", cfg.Slot, err)
	}
	logger.Info("created replication slot (it was missing)", "slot", cfg.Slot, "plugin", cfg.SlotPlugin,
		"consistent_point", res.ConsistentPoint, "failover", failoverSlots(conn))
	return true, nil
}

// createSlot creates the persistent logical slot on the replication
// connection conn, with snapshot "nothing" or "export" (then the result
// names the snapshot). On PostgreSQL 17 and later the slot is created
// with FAILOVER: a standby with sync_replication_slots = on keeps a
// synchronized copy of it, which a promoted standby then streams from
// (docs/cluster.md). Before 17 a promoted standby has no slot: the
// consumer makes it again and resyncs (consumer.onMissing).
func createSlot(ctx context.Context, conn *pgconn.PgConn, slot, plugin, snapshot string) (pglogrepl.CreateReplicationSlotResult, error) {
	opts := "SNAPSHOT '" + snapshot + "'"
	if failoverSlots(conn) {
		opts += ", FAILOVER true"
	}
	// The option list is PostgreSQL 15's syntax (the older keywords, which
	// pglogrepl.CreateReplicationSlot writes, have no FAILOVER).
	return pglogrepl.ParseCreateReplicationSlot(conn.Exec(ctx,
		fmt.Sprintf("CREATE_REPLICATION_SLOT %s LOGICAL %s (%s)", slot, plugin, opts)))
}

// failoverSlots reports whether the server of conn has failover slots
// (PostgreSQL 17 and later), from its server_version.
func failoverSlots(conn *pgconn.PgConn) bool {
	v := conn.ParameterStatus("server_version")
	i := strings.IndexFunc(v, func(r rune) bool { return r < '0' || r > '9' })
	if i < 0 {
		i = len(v)
	}
	major, err := strconv.Atoi(v[:i])
	return err == nil && major >= 17
}

// resyncBatch is how many events one resync round delivers.
const resyncBatch = 1000

// resync delivers every event of the messages table that has no delivery
// yet, in created_at order, and returns how many it delivered. It is the
// recovery after a slot was created while events existed: a new slot
// streams only what commits after its consistent point, so an event
// written while no slot existed (the old one lost to
// max_slot_wal_keep_size and dropped, as the start's refusal says) would
// otherwise never be delivered, and nothing would report it. Events that
// commit after the new slot's creation come through the slot as well;
// the Deliverer's dedup counts the second sighting as a duplicate.
func resync(ctx context.Context, pool *pgxpool.Pool, d *logc.Deliverer) (int, error) {
	return deliverUnseen(ctx, pool, unseenQuery{what: "resync", sql: `SELECT m.id::text, m.created_at FROM messages m
		WHERE NOT EXISTS (SELECT 1 FROM deliveries d WHERE d.id = m.id)
		ORDER BY m.created_at, m.id LIMIT $1`}, d.Deliver)
}

// unseenQuery reads events not delivered yet: id and created_at, in
// order, at most resyncBatch at a time (its last argument, after args).
// what starts its errors.
type unseenQuery struct {
	what, sql string
	args      []any
}

// deliverUnseen reads the events q finds and hands each batch to
// deliver, until a read finds none; deliver must record them so that the
// next read no longer finds them. It returns how many it delivered.
func deliverUnseen(ctx context.Context, pool *pgxpool.Pool, q unseenQuery, deliver func(context.Context, []logc.Delivery) error) (int, error) {
	total := 0
	what, args := q.what, append(slices.Clone(q.args), resyncBatch)
	for {
		rows, err := pool.Query(ctx, q.sql, args...)
		if err != nil {
			return total, fmt.Errorf("%s: read undelivered events: %w", what, err)
		}
		batch, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (logc.Delivery, error) {
			var e logc.Delivery
			return e, r.Scan(&e.ID, &e.CreatedAt)
		})
		if err != nil {
			return total, fmt.Errorf("%s: read undelivered events: %w", what, err)
		}
		if len(batch) == 0 {
			return total, nil
		}
		if err := deliver(ctx, batch); err != nil {
			return total, fmt.Errorf("%s: %w", what, err)
		}
		total += len(batch)
	}
}

// walsenderTCP are the session settings the replication connection asks
// of its walsender (tcp_user_timeout in milliseconds, keepalives in
// seconds), the same as scripts/stack.sh's server-wide ones: a frozen or
// unreachable consumer's walsender gives up within about 10 s.
var walsenderTCP = map[string]string{
	"tcp_user_timeout":        "10000",
	"tcp_keepalives_idle":     "10",
	"tcp_keepalives_interval": "5",
	"tcp_keepalives_count":    "3",
}

// connectReplication opens a replication connection for slot (its
// application_name names it).
func connectReplication(ctx context.Context, cfg Config, slot string) (*pgconn.PgConn, error) {
	pc, err := pgconn.ParseConfig(cfg.ReplicationURL)
	if err != nil {
		return nil, fmt.Errorf("REPLICATION_URL: %w", err)
	}
	pc.RuntimeParams["replication"] = "database"
	// The plugins print timestamptz in the session's time zone and date
	// style (pgTimestamp).
	pc.RuntimeParams["timezone"] = "UTC"
	pc.RuntimeParams["datestyle"] = "ISO"
	pc.RuntimeParams["application_name"] = "no-kafka:" + slot
	// The walsender's own socket: if this process freezes (SIGSTOP, a
	// debugger, swap) or its network hangs, the walsender blocks in a send
	// that wal_sender_timeout does not end, and a CHECKPOINT that must
	// invalidate the slot (max_slot_wal_keep_size) waits for it: 12+
	// minutes observed. Data unacknowledged for this long, a zero window
	// included, aborts the connection instead (the server's setting, for
	// this session; a REPLICATION_URL that sets it keeps its own).
	for k, v := range walsenderTCP {
		if _, ok := pc.RuntimeParams[k]; !ok {
			pc.RuntimeParams[k] = v
		}
	}
	pc.ConnectTimeout = cfg.Postgres.ConnectTimeout
	conn, err := pgconn.ConnectConfig(ctx, pc)
	if err != nil {
		return nil, fmt.Errorf("replication connection (REPLICATION_URL): %w", err)
	}
	return conn, nil
}

// Start begins streaming in the background until Stop or Abort.
func (c *consumer) Start() {
	ctx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	c.done = make(chan struct{})
	go c.run(ctx)
}

// Stop ends the stream after recording what was read and confirming it
// (a final standby status update). Safe to call twice.
func (c *consumer) Stop(ctx context.Context) error {
	c.cancel()
	select {
	case <-c.done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("consumer did not stop: %w", ctx.Err())
	}
}

// Abort ends the stream as a crash would: nothing more is confirmed, so a
// new consumer gets everything since the last standby status again. The
// default group's consumer aborts the other groups' first (onAbort).
func (c *consumer) Abort() {
	if c.onAbort != nil {
		c.onAbort()
	}
	c.aborted.Store(true)
	c.cancel()
	<-c.done
}

func (c *consumer) run(ctx context.Context) {
	defer close(c.done)
	b := backoff.Backoff{Initial: 50 * time.Millisecond, Max: 5 * time.Second}
	var guard crashGuard
	for {
		started := time.Now()
		c.streamed.Store(0)
		err := c.stream(ctx)
		if ctx.Err() != nil {
			return
		}
		if time.Since(started) > 10*time.Second {
			b.Reset()
		}
		if slotInUse(err) {
			// Said once; then retried quietly (the backoff's longest
			// pause) until the other process releases the slot.
			if !c.standby.Swap(true) {
				c.logger.Warn("replication slot is active in another process: waiting as a standby, retrying quietly; /readyz answers 503 until this instance takes over",
					"slot", c.slot, "err", err)
			} else {
				c.logger.Debug("replication slot still active in another process", "slot", c.slot, "err", err)
			}
			if backoff.Sleep(ctx, b.Next()) != nil {
				return
			}
			continue
		}
		if slotMissing(err) && c.onMissing != nil {
			c.logger.Warn("replication slot is missing (a promoted standby without it, or dropped): creating it again and delivering what it had not from the messages table",
				"slot", c.slot, "err", err)
			if err = c.onMissing(ctx); err == nil {
				b.Reset()
				continue
			}
			err = fmt.Errorf("slot %s was missing and could not be made again: %w", c.slot, err)
		}
		err = explain(c.slot, err)
		if err != nil {
			c.lastErr.Store(err.Error())
		}
		c.stats.Inc(logc.StatReconnects)
		d := b.Next()
		var streamed time.Time
		if ns := c.streamed.Load(); ns != 0 {
			streamed = time.Unix(0, ns)
		}
		if guard.observe(err, streamed, time.Now()) {
			d = CrashPause
			why := fmt.Sprintf("crash loop: the replication connection dropped %d times in a row within %s of START_REPLICATION with no error from the server, "+
				"so the decoding walsender is probably crashing PostgreSQL (its log says \"terminated by signal\"); waiting %s between attempts so that the server serves its other clients. "+
				"The slot keeps every event: nothing is lost by waiting. Last: %v", guard.inARow, CrashWindow, CrashPause, err)
			c.lastErr.Store(why)
			c.logger.Error("replication stream crash loop; pausing reconnects", "slot", c.slot, "in_a_row", guard.inARow, "pause", d, "err", err)
		} else {
			c.logger.Warn("replication stream ended; reconnecting", "slot", c.slot, "err", err, "backoff", d)
		}
		if backoff.Sleep(ctx, d) != nil {
			return
		}
	}
}

// stream runs one replication connection until an error or ctx ends.
func (c *consumer) stream(ctx context.Context) error {
	conn, dec, err := c.startStream(ctx)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	c.streamed.Store(time.Now().UnixNano())
	c.running.Store(true)
	defer c.running.Store(false)
	if c.standby.Swap(false) {
		c.logger.Info("the other process released the replication slot: this instance takes over", "slot", c.slot)
	}
	c.logger.Info("streaming replication slot", "slot", c.slot, "plugin", c.cfg.SlotPlugin, "walsender_pid", conn.PID())

	items := make(chan item, 8192)
	// The reader outlives ctx: a graceful stop reads on to the end of the
	// transaction in hand (finish), then stops it.
	rctx, stopReader := context.WithCancel(context.WithoutCancel(ctx))
	var wg sync.WaitGroup
	wg.Go(func() { read(rctx, conn, dec, items) })
	stop := func() { stopReader(); wg.Wait() }
	defer stop()
	s := &streamState{c: c, ctx: ctx, conn: conn, items: items, stopReader: stop}
	return s.run()
}

// startStream opens the replication connection and starts streaming the
// slot, at 0/0: the server resumes from the slot's confirmed_flush_lsn.
func (c *consumer) startStream(ctx context.Context) (*pgconn.PgConn, decoder, error) {
	cctx, cancel := context.WithTimeout(ctx, c.cfg.Postgres.ConnectTimeout*2)
	conn, err := connectReplication(cctx, c.cfg, c.slot)
	cancel()
	if err != nil {
		return nil, nil, err
	}
	c.pid.Store(conn.PID())
	dec := newDecoder(c.cfg)
	sctx, cancel := context.WithTimeout(ctx, c.cfg.Postgres.ConnectTimeout*2)
	err = pglogrepl.StartReplication(sctx, conn, c.slot, 0, pglogrepl.StartReplicationOptions{Mode: pglogrepl.LogicalReplication, PluginArgs: dec.options()})
	cancel()
	if err != nil {
		conn.Close(context.Background())
		return nil, nil, fmt.Errorf("start replication on slot %s: %w", c.slot, err)
	}
	return conn, dec, nil
}

// streamState is one replication stream's progress, kept by its loop
// (run) alone: the deliveries read and not yet recorded, whether the
// reader is inside a transaction, and the LSNs confirmable and
// confirmed.
type streamState struct {
	c     *consumer
	ctx   context.Context
	conn  *pgconn.PgConn
	items chan item
	// stopReader stops the reader and waits until it has (it closes
	// items).
	stopReader func()

	pending   []logc.Delivery
	inTx      bool
	candidate pglogrepl.LSN // confirmable once pending is recorded
	confirmed pglogrepl.LSN // recorded: sent in standby status updates
	reply     bool
}

// run receives the reader's items, records them in batches of at most
// MAX_BATCH and confirms each batch's end, and sends a standby status
// update every STATUS_INTERVAL and whenever the server asks, until ctx
// ends or an error.
func (s *streamState) run() error {
	ticker := time.NewTicker(s.c.cfg.StatusInterval)
	defer ticker.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return s.finish()
		case <-ticker.C:
			if err := s.status(); err != nil {
				return fmt.Errorf("standby status update: %w", err)
			}
		case it, ok := <-s.items:
			if done, err := s.take(it, ok); done {
				return err
			}
			if done, err := s.batch(); done {
				return err
			}
		}
	}
}

// batch drains what the reader has ready, up to MAX_BATCH deliveries,
// records them and confirms their end: done when the loop must return
// err.
func (s *streamState) batch() (done bool, err error) {
drain:
	for len(s.pending) < s.c.cfg.MaxBatch {
		select {
		case it, ok := <-s.items:
			if done, err := s.take(it, ok); done {
				return true, err
			}
		default:
			break drain
		}
	}
	if err := s.c.flushStreaming(s.ctx, s.pending); err != nil {
		if s.ctx.Err() != nil {
			// Stop or Abort interrupted the batch: pending is intact, and
			// finish records and confirms it on a graceful stop.
			return true, s.finish()
		}
		return true, fmt.Errorf("recording deliveries: %w", err)
	}
	s.pending = s.pending[:0]
	s.confirmed = s.candidate
	if s.reply {
		s.reply = false
		if err := s.status(); err != nil {
			return true, fmt.Errorf("standby status update: %w", err)
		}
	}
	return false, nil
}

// status sends a standby status update: flush = apply = write,
// everything up to confirmed is handled.
func (s *streamState) status() error {
	return pglogrepl.SendStandbyStatusUpdate(s.ctx, s.conn, pglogrepl.StandbyStatusUpdate{WALWritePosition: s.confirmed})
}

// process takes one item of the reader.
func (s *streamState) process(it item) error {
	switch {
	case it.err != nil:
		return it.err
	case it.keepalive:
		// Outside a transaction everything the server sent is handled:
		// confirm its WAL end, so the slot does not hold WAL written by
		// other tables.
		if !s.inTx && len(s.pending) == 0 {
			s.candidate = max(s.candidate, it.lsn)
		}
		s.reply = s.reply || it.reply
	case it.action == "B":
		s.inTx = true
	case it.action == "C":
		s.inTx = false
		s.candidate = max(s.candidate, it.lsn) // the commit's end
	case it.action == "I" && it.event.ID != "":
		s.pending = append(s.pending, it.event)
	}
	return nil
}

// finish ends the stream: on a graceful stop it reads to the end of the
// transaction in hand (readToCommit), stops the reader, records what was
// read and confirms it.
func (s *streamState) finish() error {
	if s.ctx.Err() != nil && !s.c.aborted.Load() {
		s.readToCommit()
	}
	s.stopReader()
	if s.ctx.Err() == nil {
		return errors.New("replication reader stopped")
	}
	if s.c.aborted.Load() {
		return s.ctx.Err()
	}
	for it := range s.items {
		if s.process(it) != nil {
			break
		}
	}
	fctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if s.c.flush(fctx, s.pending) == nil {
		s.confirmed = max(s.confirmed, s.candidate)
	}
	_ = s.status()
	endCopy(s.conn)
	return s.ctx.Err()
}

// commitWait bounds how long a graceful stop reads on for the commit of
// the transaction in hand (readToCommit).
const commitWait = 5 * time.Second

// readToCommit reads on, for at most commitWait, while the reader is
// inside a transaction. Only a transaction's commit makes its end
// confirmable: a stop that caught a batch after its events and before
// their commit message recorded them but confirmed the previous commit
// only, and the next instance got them again as duplicates
// (TestStopRecordsAndConfirmsTheBatchInHand caught it, now and then).
// Past commitWait the stop confirms what it can, and the slot sends the
// rest again (at-least-once).
func (s *streamState) readToCommit() {
	t := time.NewTimer(commitWait)
	defer t.Stop()
	for s.inTx {
		select {
		case it, ok := <-s.items:
			if !ok || s.process(it) != nil {
				return
			}
		case <-t.C:
			return
		}
	}
}

// take handles one receive from items, the first of a batch or one
// drained after it: done when the loop must return err (finish's, once
// the reader has closed items, or process's).
func (s *streamState) take(it item, ok bool) (done bool, err error) {
	if !ok {
		return true, s.finish()
	}
	if err := s.process(it); err != nil {
		return true, err
	}
	return false, nil
}

// endCopy ends the replication stream as the protocol does (CopyDone, then
// the server's CopyDone and CommandComplete), so that the walsender has read
// the last standby status update before the connection closes. Closing at
// once can reset the connection with that update still unread in the
// server's socket, and the slot then keeps its old confirmed_flush_lsn:
// the graceful stop's confirmation is lost and the next instance gets the
// batch again (TestStopRecordsAndConfirmsTheBatchInHand caught it, now and
// then). Bounded: the reader has stopped, so this is the only reader.
func endCopy(conn *pgconn.PgConn) {
	_ = conn.Conn().SetDeadline(time.Now().Add(5 * time.Second))
	_, _ = pglogrepl.SendStandbyCopyDone(context.Background(), conn)
}

// flushRetryFor bounds the retries of a batch's recording while the
// stream is open (flushStreaming), once an attempt has failed.
const flushRetryFor = 2 * time.Second

// flushStreaming records a batch as flush does, but once an attempt has
// failed retries for flushRetryFor only, then returns the error: the
// stream ends with the batch unconfirmed (the slot sends it again:
// at-least-once), so that a consumer that cannot record does not hold the
// slot's walsender. A primary's fast shutdown (a switchover) waits until
// each logical walsender has had everything it sent confirmed, and this
// consumer records its deliveries on that same server, which no longer
// takes them: retrying with the stream open held the shutdown until
// wal_sender_timeout (60 s; seen in the pg-switchover experiment). The
// first attempt is not bounded: a slow batch is not a failed one.
func (c *consumer) flushStreaming(ctx context.Context, batch []logc.Delivery) error {
	err := c.deliver.Deliver(ctx, batch)
	if err == nil || ctx.Err() != nil {
		return err
	}
	c.logger.Warn("recording deliveries failed; retrying", "err", err, "events", len(batch), "for", flushRetryFor)
	rctx, cancel := context.WithTimeout(ctx, flushRetryFor)
	defer cancel()
	return c.flush(rctx, batch)
}

// flush records a batch, retrying while the database is unreachable: an
// event is never skipped. It returns an error only when ctx ends; the
// caller keeps the batch then.
func (c *consumer) flush(ctx context.Context, batch []logc.Delivery) error {
	b := backoff.Backoff{Initial: 50 * time.Millisecond, Max: 2 * time.Second}
	return backoff.Retry(ctx, &b, func() error { return c.deliver.Deliver(ctx, batch) },
		func(err error, d time.Duration) {
			c.logger.Warn("recording deliveries failed; retrying", "err", err, "events", len(batch), "in", d)
		})
}

// read receives and decodes the server's messages (dec the XLogData's)
// until ctx ends or the connection fails, then sends the error (if any)
// and closes items.
func read(ctx context.Context, conn *pgconn.PgConn, dec decoder, items chan<- item) {
	defer close(items)
	send := func(it item) bool {
		select {
		case items <- it:
			return true
		case <-ctx.Done():
			return false
		}
	}
	for {
		msg, err := conn.ReceiveMessage(ctx)
		if err != nil {
			if ctx.Err() == nil {
				send(item{err: fmt.Errorf("receive: %w", err)})
			}
			return
		}
		switch m := msg.(type) {
		case *pgproto3.CopyData:
			it, err := decode(dec, m.Data)
			if err != nil {
				send(item{err: err})
				return
			}
			if !send(it) {
				return
			}
		case *pgproto3.ErrorResponse:
			send(item{err: pgconn.ErrorResponseToPgError(m)})
			return
		default:
			// Notices and the like: nothing to do.
		}
	}
}

// decode decodes one CopyData of the stream: a keepalive, or XLogData
// (dec decodes its payload).
func decode(dec decoder, data []byte) (item, error) {
	if len(data) == 0 {
		return item{}, errors.New("empty CopyData")
	}
	switch data[0] {
	case pglogrepl.PrimaryKeepaliveMessageByteID:
		k, err := pglogrepl.ParsePrimaryKeepaliveMessage(data[1:])
		if err != nil {
			return item{}, err
		}
		return item{keepalive: true, reply: k.ReplyRequested, lsn: k.ServerWALEnd}, nil
	case pglogrepl.XLogDataByteID:
		x, err := pglogrepl.ParseXLogData(data[1:])
		if err != nil {
			return item{}, err
		}
		ch, err := dec.decode(x.WALData, x.WALStart)
		if err != nil {
			return item{}, err
		}
		return item{lsn: x.WALStart, change: ch}, nil
	default:
		return item{}, fmt.Errorf("unknown replication message %q", data[0])
	}
}

// slotSQL reads the slot's position and what it costs: the WAL it makes
// Postgres retain (from restart_lsn) and how far the confirmed position
// is behind the current WAL.
const slotSQL = `
SELECT slot_name::text, coalesce(plugin, ''), active, coalesce(active_pid, 0),
       coalesce(restart_lsn::text, ''), coalesce(confirmed_flush_lsn::text, ''),
       coalesce(pg_wal_lsn_diff(pg_current_wal_lsn(), restart_lsn), 0)::bigint,
       coalesce(pg_wal_lsn_diff(pg_current_wal_lsn(), confirmed_flush_lsn), 0)::bigint,
       coalesce(wal_status, ''), safe_wal_size
FROM pg_replication_slots WHERE slot_name = $1`

// status reports the slot as GET /consumer shows it.
func (c *consumer) status(ctx context.Context) (logc.ConsumerStatus, error) {
	var s logc.SlotStatus
	var lag int64
	err := c.pool.QueryRow(ctx, slotSQL, c.slot).Scan(&s.Name, &s.Plugin, &s.Active, &s.ActivePID,
		&s.RestartLSN, &s.ConfirmedFlushLSN, &s.RetainedWALBytes, &lag, &s.WALStatus, &s.SafeWALSize)
	if errors.Is(err, pgx.ErrNoRows) {
		return logc.ConsumerStatus{}, fmt.Errorf("replication slot %s does not exist (dropped?)", c.slot)
	}
	if err != nil {
		return logc.ConsumerStatus{}, fmt.Errorf("read slot: %w", err)
	}
	return logc.ConsumerStatus{
		Backend:  "postgres",
		Running:  c.running.Load(),
		Position: s.ConfirmedFlushLSN,
		Lag:      lag,
		LagUnit:  "bytes",
		Slot:     &s,
	}, nil
}

// tableFilter is wal2json's add-tables value for schema.messages (its
// separators escaped).
func tableFilter(schema string) string {
	r := strings.NewReplacer(`,`, `\,`, `.`, `\.`, ` `, `\ `, `'`, `''`)
	if schema == "" {
		schema = "public"
	}
	return r.Replace(schema) + ".messages"
}
