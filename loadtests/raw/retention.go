package raw

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/where-postgres-ends/where-postgres-ends/migrations"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/cleaner"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/queue/records"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/postgres"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/stats"
)

// The retention measurement (issue 16): how the oldest half of a history
// table is best removed, by the cleaner's batched DELETE or by dropping
// day partitions, and what dead tuples at the head of the queue table
// cost the claim. It runs on the queue pair's own tables, created by its
// migrations in the scratch schema, so that the shapes and indexes are
// the services' (tasks with tasks_open and tasks_done, queue_jobs with
// queue_jobs_run_at).

// Removal methods, the Method of a Removal.
const (
	// BatchedDelete is the services' cleaner (kit/cleaner with the queue
	// records' job) removing the rows in batches of cleaner.DefaultBatch.
	BatchedDelete = "batched_delete"
	// DropPartitions is a DROP TABLE of each old day partition of the
	// same rows in a table partitioned by processed_at.
	DropPartitions = "drop_partitions"
)

// Queue table states, the State of a ClaimState.
const (
	// DeadHead is queue_jobs right after its oldest rows were deleted,
	// with their dead tuples still in the heap and in queue_jobs_run_at.
	DeadHead = "dead_head"
	// Vacuumed is the same table after a VACUUM.
	Vacuumed = "vacuumed"
)

// retentionDays is how many days of history the tables hold; the oldest
// half of them is removed.
const retentionDays = 8

// DefaultRetentionRows is Options.RetentionRows' default: finished tasks
// in the history tables, and queue rows deleted at the claim table's head
// (about 40 s for the whole measurement on the stack's 2 cores).
const DefaultRetentionRows = 300_000

// Retention is the retention measurement's outcome (Results.Retention).
type Retention struct {
	// Rows is the number of done tasks each history table held, spread
	// evenly over Days days; the oldest half of the days is removed.
	Rows int `json:"rows"`
	Days int `json:"days"`
	// Batch is the cleaner's rows per DELETE statement.
	Batch int `json:"batch"`
	// Checkpoint says whether a CHECKPOINT ran before each removal, so
	// that the first change of every page since then writes a full-page
	// image, as it does for history written long ago. Its error, if any,
	// is in CheckpointError.
	Checkpoint      bool   `json:"checkpoint"`
	CheckpointError string `json:"checkpoint_error,omitempty"`
	// WAL says how the WAL figures were measured: WALRecords, or
	// WALAdvance (also in results written before WAL was recorded) with
	// the reason in WALNote.
	WAL     string `json:"wal,omitempty"`
	WALNote string `json:"wal_note,omitempty"`
	// Removals are the two ways of removing the oldest half.
	Removals []Removal `json:"removals"`
	// ClaimHead is how many queue rows were deleted at the head of the
	// claim table; ClaimFill how many were left to claim.
	ClaimHead int `json:"claim_head"`
	ClaimFill int `json:"claim_fill"`
	// Claims are the claim+delete rates with the dead head and after
	// VACUUM.
	Claims []ClaimState `json:"claims"`
	// Notes say when another session's snapshot still saw the deleted
	// rows after horizonWait, so that VACUUM could not remove them (nor
	// claims skip them as dead to everyone).
	Notes []string `json:"notes,omitempty"`
	// Error is set when the measurement stopped early.
	Error string `json:"error,omitempty"`
}

// RemovalDesc says how removal x of r's retention measurement ran: the
// words of its method (batchedDelete, dropPartitions), or those a file of
// schema 1 held.
func (r Results) RemovalDesc(x Removal) string {
	switch {
	case x.Desc != "":
		return x.Desc
	case x.Method == BatchedDelete && r.Retention != nil:
		return fmt.Sprintf("the services' cleaner (records.Store.CleanerJob, cleaner.RunOnce): DELETE of at most %d done tasks per statement, oldest processed_at first through tasks_done, until a batch is short", r.Retention.Batch)
	case x.Method == DropPartitions:
		return "DROP TABLE of each day partition before the cutoff, one statement each, on a copy of tasks partitioned by RANGE (processed_at), one partition per day"
	}
	return ""
}

// ClaimDesc says how claim state c of r's retention measurement was
// measured (claimLoop), or what a file of schema 1 held.
func (r Results) ClaimDesc(c ClaimState) string {
	if c.Desc != "" {
		return c.Desc
	}
	f := r.figures()
	return fmt.Sprintf("rows/s: SKIP LOCKED claim of %d (lease UPDATE) then DELETE, %d workers, unlogged queue_jobs", f.ClaimBatch, f.Conns)
}

// Removal is one way of removing the oldest half of the history.
type Removal struct {
	// Method is BatchedDelete or DropPartitions; Desc said how it ran, in
	// files of schema 1 (Results.RemovalDesc words it now).
	Method string `json:"method"`
	Desc   string `json:"desc,omitempty"`
	// Rows is the number of rows removed, Statements the statements it
	// took, Seconds their wall time.
	Rows       int64   `json:"rows"`
	Statements int     `json:"statements"`
	Seconds    float64 `json:"seconds"`
	// WALBytes is the WAL the removal wrote, measured as Retention.WAL
	// says.
	WALBytes int64 `json:"wal_bytes"`
	// DeadTuples is n_dead_tup of the table (of its remaining
	// partitions) after the removal: what vacuum has left to do.
	DeadTuples int64 `json:"dead_tuples"`
	// BytesBefore and BytesAfter are the table's total size (heap,
	// indexes, TOAST; every partition) before and after.
	BytesBefore int64 `json:"bytes_before"`
	BytesAfter  int64 `json:"bytes_after"`
	// Vacuum is the VACUUM run after the removal, when there were dead
	// tuples to remove.
	Vacuum *VacuumCost `json:"vacuum,omitempty"`
	// Error is set when the removal could not run.
	Error string `json:"error,omitempty"`
}

// VacuumCost is a VACUUM's cost and what it left.
type VacuumCost struct {
	Seconds  float64 `json:"seconds"`
	WALBytes int64   `json:"wal_bytes"`
	// DeadTuples and Bytes are n_dead_tup and the total size after it.
	DeadTuples int64 `json:"dead_tuples"`
	Bytes      int64 `json:"bytes"`
}

// ClaimState is the claim+delete rate on queue_jobs in one state.
type ClaimState struct {
	// State is DeadHead or Vacuumed; Desc said how it ran, in files of
	// schema 1 (Results.ClaimDesc words it now).
	State string `json:"state"`
	Desc  string `json:"desc,omitempty"`
	// DeadTuples is queue_jobs' n_dead_tup when the claims began; Bytes
	// its total size (heap and indexes) then.
	DeadTuples int64 `json:"dead_tuples"`
	Bytes      int64 `json:"bytes"`
	// Items are rows claimed and deleted in Seconds; Rate is their rate.
	Items   int64   `json:"items"`
	Seconds float64 `json:"seconds"`
	Rate    float64 `json:"rate"`
	// RanOut says the rows ran out before the loop's end.
	RanOut bool `json:"ran_out,omitempty"`
	// Error is set when the loop could not run.
	Error string `json:"error,omitempty"`
}

// RetentionEstimate is the retention measurement's expected wall time
// with o (0 when it is off).
func RetentionEstimate(o Options) time.Duration {
	if o.RetentionRows <= 0 {
		return 0
	}
	return time.Duration(o.RetentionRows)*130*time.Microsecond + 2*o.Duration
}

// MeasureRetention runs the retention measurement on a scratch schema:
//
//  1. the queue pair's migrations create tasks and queue_jobs; autovacuum
//     is turned off on the scratch tables so that what each method leaves
//     is counted before anything cleans it;
//  2. tasks gets o.RetentionRows done tasks over retentionDays days (one
//     INSERT ... SELECT generate_series, in processed_at order), and a
//     copy of tasks partitioned by day on processed_at gets the same
//     rows; both are vacuumed, then a CHECKPOINT;
//  3. the cleaner (kit/cleaner's Cleaner.RunOnce with the queue records'
//     job, in batches of cleaner.DefaultBatch, on one connection) removes
//     the oldest half from tasks; then a VACUUM of tasks;
//  4. after another CHECKPOINT, DROP TABLE of each old partition removes
//     the same rows from the partitioned copy;
//  5. queue_jobs gets o.RetentionRows rows at its head and as many after
//     them, vacuumed; one DELETE removes the head, and o.Conns workers
//     claim and delete the rest in batches of claimBatch for o.Duration;
//     then the due rows are topped up to o.RetentionRows again, a VACUUM
//     runs, and the same claims for o.Duration again.
//
// Before each VACUUM, and before the claims over the dead head, it waits
// (waitRemovable) until no other session can still see the deleted rows;
// Notes say when one still could.
//
// The schema is dropped at the end, whatever happens.
func MeasureRetention(ctx context.Context, o Options) (Retention, error) {
	res := Retention{Rows: o.RetentionRows / retentionDays * retentionDays, Days: retentionDays,
		Batch: cleaner.DefaultBatch, ClaimHead: o.RetentionRows, ClaimFill: o.RetentionRows}
	if o.RetentionRows < 2*retentionDays {
		return res, fmt.Errorf("retention rows %d: at least %d", o.RetentionRows, 2*retentionDays)
	}
	err := withSchema(ctx, o, nil, func(pool *pgxpool.Pool) error {
		if err := postgres.Migrate(ctx, pool, migrations.MustFS("queue"), nil); err != nil {
			return err
		}
		// One connection for the removals: the deleting backend's
		// statistics are flushed on demand before n_dead_tup is read.
		one, err := onePool(ctx, o)
		if err != nil {
			return err
		}
		defer one.Close()
		cutoff, err := fillHistory(ctx, pool, o.RetentionRows)
		if err != nil {
			return err
		}
		wal, note := newWALMeter(ctx, one)
		res.WAL, res.WALNote = wal.source(), note
		res.checkpoint(ctx, pool)
		r, err := batchedDelete(ctx, one, wal, cutoff, &res.Notes)
		res.Removals = append(res.Removals, r)
		if err != nil {
			return err
		}
		res.checkpoint(ctx, pool)
		r, err = dropPartitions(ctx, one, wal)
		res.Removals = append(res.Removals, r)
		if err != nil {
			return err
		}
		res.Claims, err = deadHeadClaims(ctx, o, pool, one, &res.Notes)
		return err
	})
	if err != nil {
		res.Error = err.Error()
	}
	return res, err
}

// onePool is a one-connection pool on o's scratch schema.
func onePool(ctx context.Context, o Options) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(o.PostgresURL)
	if err != nil {
		return nil, err
	}
	cfg.MinConns, cfg.MaxConns = 1, 1
	cfg.ConnConfig.ConnectTimeout = 5 * time.Second
	cfg.ConnConfig.RuntimeParams["search_path"] = o.schema()
	return pgxpool.NewWithConfig(ctx, cfg)
}

// fillHistory writes n done tasks into tasks, processed over the
// retentionDays days before today (UTC midnight), in processed_at order,
// and the same rows into tasks_by_day, partitioned by day; it returns the
// cutoff (the middle day's midnight): the rows before it are the oldest
// half. Each row is processed between 01:00 and 23:00 of its day, so a
// cleaner whose now() moves on by minutes during the run removes the
// same rows as the cutoff.
func fillHistory(ctx context.Context, pool *pgxpool.Pool, n int) (time.Time, error) {
	var today time.Time
	if err := pool.QueryRow(ctx, `SELECT date_trunc('day', now(), 'UTC')`).Scan(&today); err != nil {
		return today, err
	}
	base := today.AddDate(0, 0, -retentionDays)
	perDay := n / retentionDays
	type stmt struct {
		sql  string
		args []any
	}
	stmts := []stmt{
		{sql: `ALTER TABLE tasks SET (autovacuum_enabled = false)`},
		{sql: fmt.Sprintf(`INSERT INTO tasks (id, kind, payload, status, attempts, enqueued_at, delivered_at, processed_at)
SELECT gen_random_uuid(), 'load', $1, 'done', 1, p - interval '2 seconds', p - interval '1 second', p
  FROM (SELECT $2::timestamptz + (g / %d) * interval '1 day' + interval '1 hour'
               + (g %% %d) * (interval '22 hours' / %d) AS p
          FROM generate_series(0, %d) g) s`, perDay, perDay, perDay, perDay*retentionDays-1),
			args: []any{string(payload), base}},
		{sql: `CREATE TABLE tasks_by_day (LIKE tasks INCLUDING DEFAULTS INCLUDING CONSTRAINTS) PARTITION BY RANGE (processed_at)`},
		// The primary key of a partitioned table must include the
		// partition key; tasks_open as on tasks; no tasks_done: nothing
		// deletes rows one by one.
		{sql: `ALTER TABLE tasks_by_day ADD PRIMARY KEY (id, processed_at)`},
		{sql: `CREATE INDEX tasks_by_day_open ON tasks_by_day (status, enqueued_at) WHERE status <> 'done'`},
	}
	for d := range retentionDays {
		stmts = append(stmts, stmt{sql: fmt.Sprintf(`CREATE TABLE tasks_by_day_%d PARTITION OF tasks_by_day
FOR VALUES FROM ('%s') TO ('%s') WITH (autovacuum_enabled = false)`,
			d, base.AddDate(0, 0, d).Format(time.RFC3339), base.AddDate(0, 0, d+1).Format(time.RFC3339))})
	}
	stmts = append(stmts, stmt{sql: `INSERT INTO tasks_by_day SELECT * FROM tasks`},
		// History written long ago has been vacuumed (hint bits set,
		// all-visible): start both tables there.
		stmt{sql: `VACUUM (ANALYZE) tasks, tasks_by_day`})
	for _, s := range stmts {
		if _, err := pool.Exec(ctx, s.sql, s.args...); err != nil {
			return today, fmt.Errorf("%.60s...: %w", s.sql, err)
		}
	}
	return base.AddDate(0, 0, retentionDays/2), nil
}

// checkpoint runs a CHECKPOINT (superuser or pg_checkpoint); r.Checkpoint
// stays true while every one of them ran, and CheckpointError says why
// one did not.
func (r *Retention) checkpoint(ctx context.Context, pool *pgxpool.Pool) {
	if _, err := pool.Exec(ctx, `CHECKPOINT`); err != nil {
		r.Checkpoint, r.CheckpointError = false, err.Error()
		return
	}
	r.Checkpoint = r.CheckpointError == ""
}

// tableState is a table's total size (every partition, with indexes and
// TOAST) and dead tuples (the sum over its partitions).
func tableState(ctx context.Context, db *pgxpool.Pool, table string) (bytes, dead int64, err error) {
	err = db.QueryRow(ctx, `
WITH rels AS (
    SELECT relid FROM pg_partition_tree($1::regclass) WHERE isleaf
    UNION SELECT $1::regclass
)
SELECT (SELECT coalesce(sum(pg_total_relation_size(relid)), 0) FROM rels)::bigint,
       (SELECT coalesce(sum(n_dead_tup), 0) FROM pg_stat_user_tables WHERE relid IN (SELECT relid FROM rels))::bigint`,
		table).Scan(&bytes, &dead)
	return bytes, dead, err
}

// flushAll flushes the statistics of every idle connection of pools: PG15
// sends a backend's table counters at the end of a transaction at most
// once a second (an idle backend's pending ones up to 10 s later), unless
// pg_stat_force_next_flush() asks for the next flush, which the backend
// does before it replies. A VACUUM sets n_dead_tup to what it left, and
// counters flushed after it add to that: flush before a VACUUM too.
func flushAll(ctx context.Context, pools ...*pgxpool.Pool) error {
	for _, p := range pools {
		for _, c := range p.AcquireAllIdle(ctx) {
			_, err := c.Exec(ctx, `SELECT pg_stat_force_next_flush()`)
			c.Release()
			if err != nil {
				return err
			}
		}
	}
	return nil
}

// flushedState is tableState after flushAll of one and others (the
// connections that changed the table).
func flushedState(ctx context.Context, one *pgxpool.Pool, table string, others ...*pgxpool.Pool) (bytes, dead int64, err error) {
	if err := flushAll(ctx, append([]*pgxpool.Pool{one}, others...)...); err != nil {
		return 0, 0, err
	}
	time.Sleep(100 * time.Millisecond)
	return tableState(ctx, one, table)
}

// horizonWait bounds waitRemovable (a variable for its test).
var horizonWait = 10 * time.Second

// waitRemovable waits, up to horizonWait, until no other session of the
// database (a snapshot, a transaction in progress), replication slot or
// prepared transaction can still see rows deleted by transactions that
// have committed by now: until then VACUUM cannot remove them and index
// scans cannot mark their entries dead. On a shared server another
// session's long transaction would otherwise make a VACUUM look free. It
// returns a note naming what held the rows back when the wait ran out,
// or "".
func waitRemovable(ctx context.Context, db *pgxpool.Pool, what string) (string, error) {
	var next string
	if err := db.QueryRow(ctx, `SELECT (txid_snapshot_xmax(txid_current_snapshot()) % 4294967296)::text`).Scan(&next); err != nil {
		return "", err
	}
	deadline := time.Now().Add(horizonWait)
	for {
		rows, err := db.Query(ctx, `
WITH h (who, x) AS (
    SELECT 'pid ' || pid || ' (' || coalesce(application_name, '') || ', ' || coalesce(state, '') || ')', coalesce(backend_xid, backend_xmin)
      FROM pg_stat_activity
     WHERE pid <> pg_backend_pid() AND datname = current_database()
       AND coalesce(backend_xid, backend_xmin) IS NOT NULL
    UNION ALL SELECT 'replication slot ' || slot_name, xmin FROM pg_replication_slots WHERE xmin IS NOT NULL
    UNION ALL SELECT 'prepared transaction ' || gid, transaction FROM pg_prepared_xacts
)
SELECT who FROM h WHERE age(x) > age($1::xid) ORDER BY who`, next)
		if err != nil {
			return "", err
		}
		holders, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return "", err
		}
		if len(holders) == 0 {
			return "", nil
		}
		if time.Now().After(deadline) {
			return fmt.Sprintf("%s: after %v, %s still saw the deleted rows", what, horizonWait, strings.Join(holders, ", ")), nil
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// removable is waitRemovable, its note added to notes.
func removable(ctx context.Context, db *pgxpool.Pool, what string, notes *[]string) error {
	note, err := waitRemovable(ctx, db, what)
	if note != "" {
		*notes = append(*notes, note)
	}
	return err
}

// seconds rounds d to milliseconds, in seconds.
func seconds(d time.Duration) float64 { return math.Round(d.Seconds()*1000) / 1000 }

// batchedDelete removes the rows processed before cutoff from tasks with
// the services' cleaner, then vacuums tasks.
func batchedDelete(ctx context.Context, one *pgxpool.Pool, wal walMeter, cutoff time.Time, notes *[]string) (Removal, error) {
	r := Removal{Method: BatchedDelete}
	var err error
	if r.BytesBefore, _, err = tableState(ctx, one, "tasks"); err != nil {
		return r, err
	}
	var now time.Time
	if err := one.QueryRow(ctx, `SELECT now()`).Scan(&now); err != nil {
		return r, err
	}
	cfg := cleaner.Config{Retention: now.Sub(cutoff), Interval: cleaner.DefaultInterval, Batch: cleaner.DefaultBatch}
	job := records.Store{Pool: one}.CleanerJob()
	calls := 0
	counted := cleaner.Job{Name: job.Name, Delete: func(ctx context.Context, olderThan time.Duration, limit int) (int64, error) {
		calls++
		return job.Delete(ctx, olderThan, limit)
	}}
	c := cleaner.New(cfg, stats.New(stats.Info{Service: "raw"}, nil, nil), slog.New(slog.DiscardHandler), counted)
	el, written, err := wal.timed(ctx, &walScope{table: "tasks"}, func() error {
		n, err := c.RunOnce(ctx)
		r.Rows = n
		return err
	})
	r.Statements, r.Seconds, r.WALBytes = calls, seconds(el), written
	if err != nil {
		return r, err
	}
	if r.BytesAfter, r.DeadTuples, err = flushedState(ctx, one, "tasks"); err != nil {
		return r, err
	}
	if err := removable(ctx, one, "VACUUM of tasks", notes); err != nil {
		return r, err
	}
	var v VacuumCost
	el, written, err = wal.timed(ctx, &walScope{table: "tasks"}, func() error {
		_, err := one.Exec(ctx, `VACUUM tasks`)
		return err
	})
	if err != nil {
		return r, err
	}
	v.Seconds, v.WALBytes = seconds(el), written
	if v.Bytes, v.DeadTuples, err = flushedState(ctx, one, "tasks"); err != nil {
		return r, err
	}
	r.Vacuum = &v
	return r, nil
}

// dropPartitions drops tasks_by_day's partitions of the oldest half of
// the days, one DROP TABLE each (in a transaction of its own that also
// reads its xid, so that wal can count its records).
func dropPartitions(ctx context.Context, one *pgxpool.Pool, wal walMeter) (Removal, error) {
	r := Removal{Method: DropPartitions}
	var err error
	if r.BytesBefore, _, err = tableState(ctx, one, "tasks_by_day"); err != nil {
		return r, err
	}
	// Partition d holds day d of fillHistory's days; the cutoff is the
	// middle day's midnight.
	var old []string
	for d := range retentionDays / 2 {
		old = append(old, fmt.Sprintf("tasks_by_day_%d", d))
	}
	var n int64
	for _, p := range old {
		var k int64
		if err := one.QueryRow(ctx, `SELECT count(*) FROM `+pgx.Identifier{p}.Sanitize()).Scan(&k); err != nil {
			return r, err
		}
		n += k
	}
	scope := &walScope{}
	el, written, err := wal.timed(ctx, scope, func() error {
		for _, p := range old {
			err := pgx.BeginFunc(ctx, one, func(tx pgx.Tx) error {
				var xid string
				if err := tx.QueryRow(ctx, `SELECT pg_current_xact_id()::xid::text`).Scan(&xid); err != nil {
					return err
				}
				scope.xids = append(scope.xids, xid)
				_, err := tx.Exec(ctx, `DROP TABLE `+pgx.Identifier{p}.Sanitize())
				return err
			})
			if err != nil {
				return err
			}
			r.Statements++
		}
		return nil
	})
	r.Rows, r.Seconds, r.WALBytes = n, seconds(el), written
	if err != nil {
		return r, err
	}
	r.BytesAfter, r.DeadTuples, err = flushedState(ctx, one, "tasks_by_day")
	return r, err
}

// claimDeadSQL is no-rabbitmq's claimSQL without its tasks update: up to
// $1 due rows, oldest run_at first, FOR UPDATE SKIP LOCKED, leased for
// 30 s.
const claimDeadSQL = `
WITH picked AS (
    SELECT task_id FROM queue_jobs
     WHERE run_at <= now()
     ORDER BY run_at
     LIMIT $1
       FOR UPDATE SKIP LOCKED
)
UPDATE queue_jobs q
   SET attempts = q.attempts + 1,
       run_at = now() + interval '30 seconds',
       locked_until = now() + interval '30 seconds'
  FROM picked
 WHERE q.task_id = picked.task_id
RETURNING q.task_id`

// deadHeadClaims fills queue_jobs, deletes its head in one statement,
// and measures the claim+delete rate with the head's dead tuples and
// after a VACUUM.
func deadHeadClaims(ctx context.Context, o Options, pool, one *pgxpool.Pool, notes *[]string) ([]ClaimState, error) {
	head, live := o.RetentionRows, o.RetentionRows
	for _, s := range []string{
		`ALTER TABLE queue_jobs SET (autovacuum_enabled = false)`,
		// The head, due two hours ago; the rows to claim, due an hour ago.
		fmt.Sprintf(`INSERT INTO queue_jobs (task_id, run_at, enqueued_at)
SELECT gen_random_uuid(), t, t FROM (SELECT now() - interval '2 hours' + g * interval '1 millisecond' AS t FROM generate_series(1, %d) g) s`, head),
		fmt.Sprintf(`INSERT INTO queue_jobs (task_id, run_at, enqueued_at)
SELECT gen_random_uuid(), t, t FROM (SELECT now() - interval '1 hour' + g * interval '1 millisecond' AS t FROM generate_series(1, %d) g) s`, live),
		`VACUUM (ANALYZE) queue_jobs`,
	} {
		if _, err := pool.Exec(ctx, s); err != nil {
			return nil, fmt.Errorf("%.60s...: %w", s, err)
		}
	}
	// The head's tasks completed: their rows deleted, their dead tuples
	// left for the next vacuum.
	if _, err := one.Exec(ctx, `DELETE FROM queue_jobs WHERE run_at < now() - interval '90 minutes'`); err != nil {
		return nil, err
	}
	if err := removable(ctx, one, "claims over the dead head", notes); err != nil {
		return nil, err
	}
	var out []ClaimState
	for _, state := range []string{DeadHead, Vacuumed} {
		if state == Vacuumed {
			// The same number of due rows as the first state had, then the
			// VACUUM (of the head and of the first state's claims).
			if _, err := one.Exec(ctx, `INSERT INTO queue_jobs (task_id, run_at, enqueued_at)
SELECT gen_random_uuid(), t, t
  FROM (SELECT now() - interval '30 minutes' + g * interval '1 millisecond' AS t
          FROM generate_series(1, $1 - (SELECT count(*) FROM queue_jobs WHERE run_at <= now())) g) s`, live); err != nil {
				return out, err
			}
			if err := removable(ctx, one, "VACUUM of queue_jobs", notes); err != nil {
				return out, err
			}
			if _, err := one.Exec(ctx, `VACUUM queue_jobs`); err != nil {
				return out, err
			}
		}
		c := ClaimState{State: state}
		var err error
		if c.Bytes, c.DeadTuples, err = flushedState(ctx, one, "queue_jobs", pool); err != nil {
			return out, err
		}
		err = claimLoop(ctx, o, pool, &c)
		out = append(out, c)
		if err == nil {
			err = flushAll(ctx, pool)
		}
		if err != nil {
			return out, err
		}
	}
	return out, nil
}

// claimLoop runs o.Conns workers claiming and deleting claimBatch rows of
// queue_jobs at a time for o.Duration and records their rate in c.
func claimLoop(ctx context.Context, o Options, pool *pgxpool.Pool, c *ClaimState) error {
	var empty atomic.Bool
	n, d, err := workers(ctx, o.Conns, o.Duration,
		claimThenDelete[[16]byte](pool, claimDeadSQL, `DELETE FROM queue_jobs WHERE task_id = ANY($1::uuid[])`, &empty))
	c.Items, c.Seconds = n, seconds(d)
	if d > 0 {
		c.Rate = math.Round(float64(n)/d.Seconds()*10) / 10
	}
	c.RanOut = empty.Load()
	if err != nil {
		c.Error, c.Rate = err.Error(), 0
	}
	return err
}

// summary is the retention measurement's log line.
func (r Retention) summary(err error) string {
	if err != nil {
		return err.Error()
	}
	s := ""
	for _, m := range r.Removals {
		s += fmt.Sprintf("%s %d rows in %.2fs, %d WAL bytes, %d dead tuples; ", m.Method, m.Rows, m.Seconds, m.WALBytes, m.DeadTuples)
	}
	for _, c := range r.Claims {
		s += fmt.Sprintf("claims %s (%d dead tuples) %.0f/s; ", c.State, c.DeadTuples, c.Rate)
	}
	return strings.TrimSuffix(s, "; ")
}
