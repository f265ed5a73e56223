package main

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/backoff"
	logc "github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/log"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/httpapi"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/pglisten"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/postgres"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/stats"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/waiter"
)

// Consumer groups, design 1: a logical replication slot per group. Each
// group other than the default one has a slot of its own (groupSlot),
// streamed by a consumer like the default one, recording in
// group_deliveries. Each slot decodes all of the database's WAL: N groups
// cost N decodings of every change, and a stopped group's slot retains WAL
// for everyone (bounded by max_slot_wal_keep_size). docs/log.md,
// "Consumer groups", says what that costs and where it ends. Design 2
// (GROUPS_DESIGN=cursors, cursors.go) keeps this manager and its
// reconcile loop and swaps the consumer, the set-up and the release.
//
// Every instance runs a consumer for every ready group it consumes
// (CONSUME_GROUPS, every group by default; a second instance waits as a
// standby on each slot, as on the default one) and reconciles with the
// groups table every GROUP_POLL_INTERVAL: it starts the consumers of
// groups created elsewhere, stops those of groups deleted elsewhere,
// finishes the set-up of a group whose creator died before it was ready
// (consumed here or not), and drops the slots of groups that no longer
// exist (never the slot of a group that exists but runs nowhere).

// groupSlot is the replication slot of group name: SLOT_NAME_g_name, or,
// when that is longer than a slot name may be (63), SLOT_NAME cut and a
// hash of it in its place. Slot names are global to the cluster, so
// SLOT_NAME, unique per service, is part of it.
func groupSlot(base, name string) string {
	suffix := "_g_" + name
	if len(base)+len(suffix) <= 63 {
		return base + suffix
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(base))
	keep := 63 - len(suffix) - 9
	return fmt.Sprintf("%s_%08x%s", base[:keep], h.Sum32(), suffix)
}

// groupOfSlot returns the group whose groupSlot slot is, if any.
func groupOfSlot(base, slot string) (string, bool) {
	for i := strings.Index(slot, "_g_"); i >= 0; {
		name := slot[i+3:]
		if logc.ValidGroup(name) == nil && groupSlot(base, name) == slot {
			return name, true
		}
		j := strings.Index(slot[i+1:], "_g_")
		if j < 0 {
			break
		}
		i += 1 + j
	}
	return "", false
}

// groupManager runs the non-default groups' consumers of one instance.
type groupManager struct {
	cfg     Config
	store   *logc.Records // the groups table (main pool)
	records *logc.Records // what the consumers record (consumer pool)
	pool    *pgxpool.Pool // main pool: slots, replays
	hub     *waiter.Hub
	stats   *stats.Recorder
	logger  *slog.Logger
	def     *consumer // the default group's

	// notify, in design cursors, tells the other instances' cursor
	// consumers that the shared log grew (nil in design slots).
	notify *pglisten.Debouncer

	runner logc.GroupRunner[groupConsumer]

	mu     sync.Mutex
	setups map[string]context.CancelFunc // set-ups in progress here
	wg     sync.WaitGroup                // set-ups
}

// groupConsumer is a non-default group's consumer in either design: a
// slot's (*consumer) or a cursor's (*cursorConsumer).
type groupConsumer interface {
	logc.GroupConsumer
	// Abort ends it as a crash would: nothing more confirmed.
	Abort()
	// Running reports whether it delivers now (not a standby).
	Running() bool
}

// cursors reports whether the groups are cursors (GROUPS_DESIGN=cursors).
func (m *groupManager) cursors() bool { return m.cfg.GroupsDesign == DesignCursors }

// newConsumer returns the consumer of group name (not started): a
// cursor's or a slot's, by GROUPS_DESIGN.
func (m *groupManager) newConsumer(name string) groupConsumer {
	if m.cursors() {
		return m.newCursorConsumer(name)
	}
	return m.newSlotConsumer(name)
}

// newSlotConsumer returns a consumer of group name on its slot (not
// started).
func (m *groupManager) newSlotConsumer(name string) *consumer {
	c := &consumer{
		cfg:  m.cfg,
		slot: groupSlot(m.cfg.Slot, name),
		pool: m.pool,
		deliver: &logc.Deliverer{Records: m.records.ForGroup(name), Hub: m.hub, Stats: m.stats,
			Group: name},
		stats:  m.stats,
		logger: m.logger.With("group", name),
	}
	c.onMissing = func(ctx context.Context) error { return m.remake(ctx, name, c.deliver) }
	return c
}

// remake makes group name's slot again when its consumer finds it
// missing (a standby promoted on 15 or 16 has none), then delivers to the
// group through d, from the messages table, the events it has not had
// (resyncGroup): the default group's consumer does the same with
// ensureSlot and resync. A slot made meanwhile by another instance is
// left to it.
func (m *groupManager) remake(ctx context.Context, name string, d *logc.Deliverer) error {
	slot := groupSlot(m.cfg.Slot, name)
	conn, _, err := m.createGroupSlot(ctx, name, "nothing")
	if postgres.SQLSTATE(err) == pgerrcode.DuplicateObject {
		return nil
	}
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	n, err := m.resyncGroup(ctx, name, d)
	if err != nil {
		return err
	}
	m.logger.Warn("made the missing replication slot of a consumer group again and delivered the events it had not, from the messages table",
		"group", name, "slot", slot, "events", n)
	return nil
}

// createGroupSlot creates group name's replication slot, with snapshot
// "nothing" or "export" (createSlot), on a replication connection of its
// own, and returns that connection open: the caller closes it, and an
// exported snapshot lives only while it is open. Connecting and creating
// are bounded by SlotCreateTimeout. On error no connection is left open;
// the creation's error (pgerrcode.DuplicateObject when another instance
// made the slot meanwhile) is wrapped with the slot and group names.
func (m *groupManager) createGroupSlot(ctx context.Context, name, snapshot string) (*pgconn.PgConn, pglogrepl.CreateReplicationSlotResult, error) {
	slot := groupSlot(m.cfg.Slot, name)
	cctx, cancel := context.WithTimeout(ctx, m.cfg.SlotCreateTimeout)
	defer cancel()
	conn, err := connectReplication(cctx, m.cfg, slot)
	if err != nil {
		return nil, pglogrepl.CreateReplicationSlotResult{}, err
	}
	res, err := createSlot(cctx, conn, slot, m.cfg.SlotPlugin, snapshot)
	if err != nil {
		conn.Close(context.Background())
		return nil, res, fmt.Errorf("create replication slot %s of group %s: %w", slot, name, err)
	}
	return conn, res, nil
}

// resyncGroupSQL reads a batch of the events group $1 has not had: for a
// group from earliest every one; for a group from latest those created
// since the earlier of its creation and its first delivered event (so
// never the events from before its start, which it never was to get).
// The events its new slot also streams come twice; the Deliverer counts
// the second as a duplicate.
const resyncGroupSQL = `WITH g AS (SELECT from_position, created_at FROM groups WHERE name = $1),
first AS (SELECT min(m2.created_at) AS at FROM group_deliveries d JOIN messages m2 ON m2.id = d.id WHERE d.grp = $1)
SELECT m.id::text, m.created_at FROM messages m, g, first
WHERE (g.from_position = 'earliest' OR m.created_at >= least(g.created_at, coalesce(first.at, g.created_at)))
  AND NOT EXISTS (SELECT 1 FROM group_deliveries d WHERE d.grp = $1 AND d.id = m.id)
ORDER BY m.created_at, m.id LIMIT $2`

// resyncGroup delivers to group, through d, every event resyncGroupSQL
// finds (deliverUnseen; each batch retried as the replay's), and returns
// how many.
func (m *groupManager) resyncGroup(ctx context.Context, group string, d *logc.Deliverer) (int, error) {
	deliver := func(ctx context.Context, batch []logc.Delivery) error {
		b := backoff.Backoff{Initial: 50 * time.Millisecond, Max: 2 * time.Second}
		return backoff.Retry(ctx, &b, func() error { return d.Deliver(ctx, batch) }, nil)
	}
	return deliverUnseen(ctx, m.pool, unseenQuery{what: "resync group " + group, sql: resyncGroupSQL, args: []any{group}}, deliver)
}

// start begins the reconcile loop.
func (m *groupManager) start() {
	m.setups = map[string]context.CancelFunc{}
	pending, reconciled := func(_ context.Context, g logc.GroupRow) { m.setupAsync(g, true) }, m.dropOrphans
	if m.cursors() {
		// A cursor's set-up is one short transaction, run on the loop;
		// there is no slot to drop.
		pending, reconciled = m.setupCursorPending, nil
	}
	m.runner = logc.GroupRunner[groupConsumer]{
		Rows:     m.store.GroupRows,
		New:      m.newConsumer,
		Consumes: m.cfg.ConsumeGroups.Has,
		// Not ready long after its creation: its creator died before the
		// set-up ended (or is still replaying, holding the lock, and the
		// attempt gives way).
		Pending:      pending,
		PendingAfter: m.cfg.SlotCreateTimeout,
		Reconciled:   reconciled,
		Drain:        m.wg.Wait,
		Poll:         m.cfg.GroupPoll,
		ReadTimeout:  m.cfg.BackendTimeout,
		StopTimeout:  10 * time.Second,
		Logger:       m.logger,
	}
	m.runner.Start()
}

// stop ends the loop, the set-ups and the consumers (each recording and
// confirming what it read, as the default one does).
func (m *groupManager) stop(ctx context.Context) error { return m.runner.Close(ctx) }

// abort ends every consumer as a crash would (nothing more confirmed).
func (m *groupManager) abort() {
	m.runner.Halt()
	for _, c := range m.runner.Take() {
		c.Abort()
	}
}

// dropOrphans drops this service's group slots whose group is gone (a
// DELETE that ended before its drop, on this instance or another) and
// that no walsender streams.
func (m *groupManager) dropOrphans(ctx context.Context, want map[string]bool) error {
	qctx, cancel := context.WithTimeout(ctx, m.cfg.BackendTimeout)
	defer cancel()
	rows, err := m.pool.Query(qctx, `SELECT slot_name::text FROM pg_replication_slots
		WHERE database = current_database() AND NOT active AND slot_name LIKE '%\_g\_%'`)
	if err != nil {
		return err
	}
	slots, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return err
	}
	for _, s := range slots {
		name, ours := groupOfSlot(m.cfg.Slot, s)
		if !ours || want[name] {
			continue
		}
		m.mu.Lock()
		_, busy := m.setups[name]
		m.mu.Unlock()
		if busy {
			continue
		}
		if _, err := m.pool.Exec(qctx, `SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1 AND NOT active`, s); err != nil {
			return fmt.Errorf("drop the slot %s of a deleted group: %w", s, err)
		}
		m.logger.Info("dropped the slot of a deleted group", "slot", s, "group", name)
	}
	return nil
}

// errBusy is a set-up that another instance holds.
var errBusy = errors.New("another instance is setting the group up")

// setupAsync runs setup in the background unless one runs here; once it
// is done the group's consumer starts.
func (m *groupManager) setupAsync(g logc.GroupRow, try bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.setups[g.Name]; ok || m.runner.Context().Err() != nil {
		return
	}
	ctx, cancel := context.WithCancel(m.runner.Context())
	m.setups[g.Name] = cancel
	m.wg.Go(func() {
		defer func() {
			m.mu.Lock()
			delete(m.setups, g.Name)
			m.mu.Unlock()
			cancel()
		}()
		err := m.setup(ctx, g, try)
		switch {
		case err == nil:
			m.runner.Run(g.Name)
		case errors.Is(err, errBusy), ctx.Err() != nil:
		default:
			m.logger.Error("setting up a consumer group failed; the next reconcile tries again", "group", g.Name, "err", err)
		}
	})
}

// setup creates the group's slot and, from earliest, replays the messages
// table into the group, then marks the group ready. It runs under an
// advisory lock on the slot's name, so that one instance at a time sets a
// group up; with try, a lock held elsewhere is errBusy at once, else it
// waits for it. A slot left by an earlier attempt that did not finish is
// dropped and created again: the replay is idempotent (it skips what an
// earlier attempt recorded).
//
// From earliest, the replay runs twice, around the slot's creation, so
// that the events written before the group reach it without waiting for
// the slot. CREATE_REPLICATION_SLOT waits until every transaction that
// holds an xid anywhere in the cluster when it starts has ended (its
// snapshot builder waits for them: wait event Lock:transactionid on the
// walsender): one long or idle-in-transaction session, in any database,
// holds it for as long as it lasts. So:
//
//  1. The first replay reads messages in a snapshot of its own, S0, taken
//     now, and delivers every event visible in it that the group has not
//     recorded, in created_at order: the backlog, at once.
//  2. The slot is created with CREATE_REPLICATION_SLOT ... EXPORT_SNAPSHOT,
//     which returns the slot's consistent point C and a snapshot S that is
//     exactly the database as of C: every transaction that committed
//     before C is visible in S, and the slot decodes exactly the
//     transactions that commit after C (this is how PostgreSQL's own
//     logical replication copies a table before it streams it).
//  3. The second replay reads messages in S (a REPEATABLE READ transaction
//     that imports it with SET TRANSACTION SNAPSHOT, while the replication
//     connection that exported it stays open and idle: the snapshot lives
//     until that connection's next command) and delivers every event the
//     group has not recorded: those committed between S0 and C. The first
//     replay's deliveries committed before the slot's creation began, so
//     they are visible in S and not read again.
//
// Each event's INSERT committed either before C (visible in S: delivered
// by the first replay, or else by the second) or after it (decoded by the
// slot, delivered once the consumer streams from C): never both, never
// neither. Concurrent writers need no pause: a transaction still running
// at slot creation is waited for by CREATE_REPLICATION_SLOT itself (the
// consistent point is after it) and lands on one side. Each replay
// delivers in created_at order, the first before the second and both
// before the stream's first event; one writer's events of a key (each
// written after the previous one's commit) are a prefix in S0, the next
// ones in S, the rest after C, so per-key order holds as it does for one
// consumer. An event removed by the retention cleaner before a replay
// reads it is not replayed: from earliest means the oldest event the
// table still holds.
func (m *groupManager) setup(ctx context.Context, g logc.GroupRow, try bool) error {
	slot := groupSlot(m.cfg.Slot, g.Name)
	tx, err := m.pool.Begin(ctx)
	if err != nil {
		return postgres.MapError("set up group", err)
	}
	defer func() { _ = tx.Rollback(context.Background()) }()
	if try {
		var got bool
		if err := tx.QueryRow(ctx, `SELECT pg_try_advisory_xact_lock(hashtextextended($1, 0))`, slot).Scan(&got); err != nil {
			return postgres.MapError("set up group", err)
		}
		if !got {
			return errBusy
		}
	} else if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended($1, 0))`, slot); err != nil {
		return postgres.MapError("set up group", err)
	}
	// Under the lock: the group may have been made ready, or deleted,
	// meanwhile.
	var ready bool
	err = tx.QueryRow(ctx, `SELECT ready FROM groups WHERE name = $1`, g.Name).Scan(&ready)
	if errors.Is(err, pgx.ErrNoRows) {
		return logc.UnknownGroup(g.Name)
	}
	if err != nil {
		return postgres.MapError("set up group", err)
	}
	if ready {
		return nil
	}
	if err := m.dropSlot(ctx, slot); err != nil {
		return err
	}
	if g.From == logc.FromEarliest {
		start := time.Now()
		n, err := m.replay(ctx, g.Name, "")
		if err != nil {
			return fmt.Errorf("replay into group %s: %w", g.Name, err)
		}
		m.logger.Info("replayed the messages table into a consumer group; its slot is created next", "group", g.Name, "events", n,
			"took", time.Since(start))
	}
	snapshot := "nothing"
	if g.From == logc.FromEarliest {
		snapshot = "export"
	}
	start := time.Now()
	conn, res, err := m.createGroupSlot(ctx, g.Name, snapshot)
	if err != nil {
		return err
	}
	// Open until the end: the second replay reads the exported snapshot.
	defer conn.Close(context.Background())
	m.logger.Info("created the replication slot of a consumer group", "group", g.Name, "slot", slot, "from", g.From,
		"consistent_point", res.ConsistentPoint, "took", time.Since(start))
	if g.From == logc.FromEarliest {
		n, err := m.replay(ctx, g.Name, res.SnapshotName)
		if err != nil {
			return fmt.Errorf("replay into group %s: %w", g.Name, err)
		}
		m.logger.Info("replayed the events committed while the slot was created; the slot takes over", "group", g.Name, "events", n,
			"consistent_point", res.ConsistentPoint)
	}
	if _, err := tx.Exec(ctx, `UPDATE groups SET ready = true WHERE name = $1`, g.Name); err != nil {
		return postgres.MapError("mark group ready", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return postgres.MapError("mark group ready", err)
	}
	return nil
}

var snapshotRE = regexp.MustCompile(`^[0-9A-Fa-f-]+$`)

// replayBatch is how many events the replay delivers at once.
const replayBatch = 1000

// replaySQL reads the events of the messages table that group $1 has not
// recorded, in created_at order.
const replaySQL = `SELECT m.id::text, m.created_at FROM messages m
WHERE NOT EXISTS (SELECT 1 FROM group_deliveries d WHERE d.grp = $1 AND d.id = m.id)
ORDER BY m.created_at, m.id`

// replay delivers to the group, in created_at order, every event of the
// messages table it has not recorded, as one snapshot shows them: the
// exported snapshot named snapshot, or with "" one of its own, taken now.
// It returns how many it delivered.
func (m *groupManager) replay(ctx context.Context, group, snapshot string) (int, error) {
	if snapshot != "" && !snapshotRE.MatchString(snapshot) {
		return 0, fmt.Errorf("unexpected snapshot name %q", snapshot)
	}
	tx, err := m.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return 0, err
	}
	defer func() { _ = tx.Rollback(context.Background()) }()
	if snapshot != "" {
		if _, err := tx.Exec(ctx, `SET TRANSACTION SNAPSHOT '`+snapshot+`'`); err != nil {
			return 0, fmt.Errorf("import the slot's snapshot: %w", err)
		}
	}
	rows, err := tx.Query(ctx, replaySQL, group)
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	d := &logc.Deliverer{Records: m.records.ForGroup(group), Hub: m.hub, Stats: m.stats, Group: group}
	total := 0
	batch := make([]logc.Delivery, 0, replayBatch)
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		b := backoff.Backoff{Initial: 50 * time.Millisecond, Max: 2 * time.Second}
		if err := backoff.Retry(ctx, &b, func() error { return d.Deliver(ctx, batch) }, nil); err != nil {
			return err
		}
		total += len(batch)
		batch = batch[:0]
		return nil
	}
	for rows.Next() {
		var e logc.Delivery
		if err := rows.Scan(&e.ID, &e.CreatedAt); err != nil {
			return total, err
		}
		batch = append(batch, e)
		if len(batch) == replayBatch {
			if err := flush(); err != nil {
				return total, err
			}
		}
	}
	if err := rows.Err(); err != nil {
		return total, err
	}
	return total, flush()
}

// dropSlot drops slot if it exists, ending the walsender that streams it
// (another instance's consumer of a deleted group, which the reconcile
// there stops) and retrying until it is released or ctx ends.
func (m *groupManager) dropSlot(ctx context.Context, slot string) error {
	b := backoff.Backoff{Initial: 100 * time.Millisecond, Max: time.Second}
	for {
		var pid *int64
		err := m.pool.QueryRow(ctx, `SELECT active_pid FROM pg_replication_slots WHERE slot_name = $1`, slot).Scan(&pid)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return postgres.MapError("read slot", err)
		}
		if pid != nil {
			_, _ = m.pool.Exec(ctx, `SELECT pg_terminate_backend($1)`, *pid)
		} else {
			_, err = m.pool.Exec(ctx, `SELECT pg_drop_replication_slot($1)`, slot)
			switch {
			case err == nil, postgres.SQLSTATE(err) == pgerrcode.UndefinedObject:
				return nil
			case postgres.SQLSTATE(err) != pgerrcode.ObjectInUse:
				return fmt.Errorf("drop replication slot %s: %w", slot, err)
			}
		}
		if err := backoff.Sleep(ctx, b.Next()); err != nil {
			return fmt.Errorf("drop replication slot %s: still active: %w", slot, httpapi.ErrUnavailable)
		}
	}
}

// put creates the group: from latest, its slot is created before the
// answer, so every event written after it is the group's; from earliest,
// the slot and the replay run in the background (the group lists as not
// ready meanwhile).
func (m *groupManager) put(ctx context.Context, name, from string) (bool, error) {
	created, err := m.store.CreateGroup(ctx, name, from, false, m.cfg.MaxGroups)
	if err != nil || !created {
		return created, err
	}
	m.runner.Created(name)
	if m.cursors() {
		if err := m.setupCursor(ctx, name, from); err != nil {
			return false, fmt.Errorf("group %s registered, but its cursor was not created (the next reconcile creates it, from a later point if from latest): %w", name, err)
		}
		m.runner.Run(name)
		return true, nil
	}
	g := logc.GroupRow{Name: name, From: from, CreatedAt: time.Now()}
	if from == logc.FromEarliest {
		m.setupAsync(g, false)
		return true, nil
	}
	if err := m.setup(ctx, g, false); err != nil {
		return false, fmt.Errorf("group %s registered, but its slot was not created (the next reconcile creates it, from a later point): %w", name, err)
	}
	m.runner.Run(name)
	return true, nil
}

// remove deletes the group's row and deliveries, stops its consumer and
// set-up here and drops its slot: the WAL it retained is freed. A cursor
// group's cursor goes with its row.
func (m *groupManager) remove(ctx context.Context, name string) error {
	if err := m.store.DeleteGroupRow(ctx, name); err != nil {
		return err
	}
	c, running := m.runner.Removed(name)
	m.mu.Lock()
	if cancel, ok := m.setups[name]; ok {
		cancel()
	}
	m.mu.Unlock()
	if running {
		_ = c.Stop(ctx)
	}
	if m.cursors() {
		// The cursor row went with the group's (ON DELETE CASCADE), and
		// with it everything the group held.
		return nil
	}
	return m.dropSlot(ctx, groupSlot(m.cfg.Slot, name))
}

// groupsSQL reads the slots of the given names.
const groupsSQL = `
SELECT slot_name::text, coalesce(plugin, ''), active, coalesce(active_pid, 0),
       coalesce(restart_lsn::text, ''), coalesce(confirmed_flush_lsn::text, ''),
       coalesce(pg_wal_lsn_diff(pg_current_wal_lsn(), restart_lsn), 0)::bigint,
       pg_wal_lsn_diff(pg_current_wal_lsn(), confirmed_flush_lsn)::bigint,
       coalesce(wal_status, ''), safe_wal_size
FROM pg_replication_slots WHERE slot_name::text = ANY($1::text[])`

// noEvents is why no-kafka's groups have no lag in events.
const noEvents = "a slot's position is a WAL LSN: the events behind it are not counted (it would scan the messages table)"

// list answers GET /groups.
func (m *groupManager) list(ctx context.Context) (logc.GroupList, error) {
	rows, err := m.store.GroupRows(ctx)
	if err != nil {
		return logc.GroupList{}, err
	}
	slotOf := map[string]string{}
	var names []string
	for _, g := range rows {
		s := groupSlot(m.cfg.Slot, g.Name)
		if g.Name == logc.DefaultGroup {
			s = m.cfg.Slot
		}
		slotOf[g.Name] = s
		names = append(names, s)
	}
	srows, err := m.pool.Query(ctx, groupsSQL, names)
	if err != nil {
		return logc.GroupList{}, postgres.MapError("read slots", err)
	}
	type slotLag struct {
		s   logc.SlotStatus
		lag *int64
	}
	slots := map[string]slotLag{}
	for srows.Next() {
		var sl slotLag
		if err := srows.Scan(&sl.s.Name, &sl.s.Plugin, &sl.s.Active, &sl.s.ActivePID, &sl.s.RestartLSN, &sl.s.ConfirmedFlushLSN,
			&sl.s.RetainedWALBytes, &sl.lag, &sl.s.WALStatus, &sl.s.SafeWALSize); err != nil {
			srows.Close()
			return logc.GroupList{}, postgres.MapError("read slots", err)
		}
		slots[sl.s.Name] = sl
	}
	srows.Close()
	if err := srows.Err(); err != nil {
		return logc.GroupList{}, postgres.MapError("read slots", err)
	}
	running := map[string]bool{}
	for name, c := range m.runner.Consumers() {
		running[name] = c.Running()
	}
	cursors := map[string]cursorLag{}
	if m.cursors() {
		if cursors, err = m.cursorLags(ctx); err != nil {
			return logc.GroupList{}, err
		}
	}
	running[logc.DefaultGroup] = m.def.running.Load()
	out := logc.GroupList{MaxGroups: m.cfg.MaxGroups}
	for _, g := range rows {
		gs := logc.Group{Name: g.Name, From: g.From, Ready: g.Ready, Running: running[g.Name],
			Unknown: map[string]string{"lag_events": noEvents}}
		if m.cursors() && g.Name != logc.DefaultGroup {
			gs.Unknown = map[string]string{"lag_bytes": noBytes}
			if cl, ok := cursors[g.Name]; ok {
				gs.Position, gs.LagEvents = cl.at.String(), &cl.lag
			} else {
				gs.Unknown["lag_events"] = "the group's cursor does not exist yet (the group is being set up)"
			}
			out.Groups = append(out.Groups, gs)
			continue
		}
		if sl, ok := slots[slotOf[g.Name]]; ok {
			s := sl.s
			gs.Slot, gs.Position, gs.LagBytes = &s, s.ConfirmedFlushLSN, sl.lag
		}
		if gs.LagBytes == nil {
			gs.Unknown["lag_bytes"] = "the group's slot does not exist yet (the group is being set up) or has no confirmed position"
		}
		out.Groups = append(out.Groups, gs)
	}
	return out, nil
}
