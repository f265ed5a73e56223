package records

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/queue"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/httpapi"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/postgres"
)

// Execer is what the insert functions need: a pool, a connection or a
// transaction.
type Execer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// InsertTasksSQL writes many task records, status queued, in one
// statement: one round trip per batch whatever its size, the copies of a
// fanned-out task (FANOUT) included. Its parameters $1 to $5 are
// TaskColumns' arrays; the rows are inserted (and a RETURNING returns
// them) in the arrays' order. It is the one copy of the statement:
// InsertTasks runs it, and a service that writes more in the same
// statement embeds it in a WITH clause: no-rabbitmq's enqueue, which adds
// a RETURNING and queues the tasks, and the rabbitmq side's outbox
// enqueue, which writes the outbox rows beside it.
const InsertTasksSQL = `
INSERT INTO tasks (id, kind, payload, fail_times, status, enqueued_at)
SELECT id, kind, payload, fail_times, 'queued', enqueued_at
  FROM unnest($1::uuid[], $2::text[], $3::jsonb[], $4::int[], $5::timestamptz[])
       WITH ORDINALITY AS t(id, kind, payload, fail_times, enqueued_at, n)
 ORDER BY n`

// TaskColumns returns the batch as column arrays, for unnest.
func TaskColumns(tasks []queue.NewTask) (ids, kinds, payloads []string, fails []int32, at []time.Time) {
	n := len(tasks)
	ids, kinds, payloads = make([]string, n), make([]string, n), make([]string, n)
	fails, at = make([]int32, n), make([]time.Time, n)
	for i, t := range tasks {
		ids[i], kinds[i], payloads[i], fails[i], at[i] = t.ID, t.Kind, string(t.Payload), int32(t.FailTimes), t.EnqueuedAt
	}
	return
}

// InsertTasks writes the tasks' records with status queued.
func InsertTasks(ctx context.Context, db Execer, tasks []queue.NewTask) error {
	ids, kinds, payloads, fails, at := TaskColumns(tasks)
	_, err := db.Exec(ctx, InsertTasksSQL, postgres.UUIDs(ids), kinds, payloads, fails, at)
	return err
}

// InsertPayment writes the payment row (not its task).
func InsertPayment(ctx context.Context, db Execer, p queue.NewPayment) error {
	_, err := db.Exec(ctx, `INSERT INTO payments (id, amount, currency, task_id, created_at) VALUES ($1, $2, $3, $4, $5)`,
		p.ID, p.Amount, p.Currency, p.Task.ID, p.Task.EnqueuedAt)
	return err
}

// Store reads and writes records through a pool. It is safe for
// concurrent use and does not own the pool.
type Store struct {
	Pool *pgxpool.Pool
}

// Get returns the task's record; an unknown id wraps httpapi.ErrNotFound.
func (s Store) Get(ctx context.Context, id string) (queue.Task, error) {
	return s.GetBy(ctx, id, `
SELECT id::text, kind, status, attempts, enqueued_at, delivered_at, processed_at, last_error
  FROM tasks WHERE id = $1`, id)
}

// GetBy is Get through sql (with args), a statement that returns at most
// one row of Get's columns (id, kind, status, attempts, enqueued_at,
// delivered_at, processed_at, last_error) for the task id: a backend
// whose records are not all rows of tasks (no-rabbitmq's fan-out
// cursors) reads them so.
func (s Store) GetBy(ctx context.Context, id, sql string, args ...any) (queue.Task, error) {
	var t queue.Task
	err := s.Pool.QueryRow(ctx, sql, args...).Scan(&t.ID, &t.Kind, &t.Status, &t.Attempts, &t.EnqueuedAt, &t.DeliveredAt, &t.ProcessedAt, &t.LastError)
	if errors.Is(err, pgx.ErrNoRows) {
		return queue.Task{}, fmt.Errorf("task %s: %w", id, httpapi.ErrNotFound)
	}
	if err != nil {
		return queue.Task{}, postgres.MapError("read task", err)
	}
	t.EnqueuedAt = t.EnqueuedAt.UTC()
	return t, nil
}

var _ queue.FinishedReader = Store{}

// Finished returns those of ids whose task is done or dead, in one
// query: the shared re-read of every GET /tasks/{id}/wait of a service
// (queue.FinishedReader).
func (s Store) Finished(ctx context.Context, ids []string) ([]string, error) {
	return s.FinishedBy(ctx, `SELECT id::text FROM tasks WHERE id = ANY($1::uuid[]) AND status IN ('done', 'dead')`, postgres.UUIDs(ids))
}

// FinishedBy is Finished through sql (with args), a statement that
// returns the ids (text) of the finished tasks.
func (s Store) FinishedBy(ctx context.Context, sql string, args ...any) ([]string, error) {
	return postgres.QueryStrings(ctx, s.Pool, "read finished tasks", sql, args...)
}

// Depth counts open and dead tasks. It reads only the partial index
// tasks_open (status <> 'done'), so its cost follows the backlog.
func (s Store) Depth(ctx context.Context) (queue.Depth, error) {
	var d queue.Depth
	err := s.Pool.QueryRow(ctx, `
SELECT count(*) FILTER (WHERE status = 'queued'),
       count(*) FILTER (WHERE status = 'running'),
       count(*) FILTER (WHERE status = 'dead'),
       coalesce(extract(epoch FROM clock_timestamp() - min(enqueued_at) FILTER (WHERE status = 'queued')), 0)::float8
  FROM tasks WHERE status <> 'done'`).Scan(&d.Queued, &d.Running, &d.Dead, &d.OldestQueuedAgeSeconds)
	if err != nil {
		return queue.Depth{}, postgres.MapError("read queue depth", err)
	}
	return d, nil
}

// CountOpen counts the open task records (queued or running: a task
// waiting for a retry is queued), stopping at limit: the backlog of the
// admission bound (MAX_BACKLOG, queue.Admission) on the side whose queue
// is not a table of its own. It reads the partial index tasks_open, so its
// cost is at most limit entries, whatever the history.
func (s Store) CountOpen(ctx context.Context, limit int64) (int64, error) {
	var n int64
	err := s.Pool.QueryRow(ctx, `SELECT count(*) FROM (SELECT 1 FROM tasks WHERE status IN ('queued', 'running') LIMIT $1) b`, limit).Scan(&n)
	if err != nil {
		return 0, postgres.MapError("count open tasks", err)
	}
	return n, nil
}

// Delivery is what a worker needs of a task it received.
type Delivery struct {
	// Attempts counts deliveries, this one included.
	Attempts int
	// FailTimes is the task's fail_times.
	FailTimes int
}

// Deliver records one delivery of an open task (status running, attempts
// + 1, delivered_at set the first time). ok is false when the task is
// already done or dead or unknown: a duplicate delivery, to be
// acknowledged and dropped (at-least-once transport, idempotent handling).
func (s Store) Deliver(ctx context.Context, id string) (d Delivery, ok bool, err error) {
	err = s.Pool.QueryRow(ctx, `
UPDATE tasks SET status = 'running', attempts = attempts + 1,
       delivered_at = coalesce(delivered_at, clock_timestamp())
 WHERE id = $1 AND (status IN ('queued', 'running')) IS TRUE
RETURNING attempts, fail_times`, id).Scan(&d.Attempts, &d.FailTimes)
	if errors.Is(err, pgx.ErrNoRows) {
		return Delivery{}, false, nil
	}
	return d, err == nil, err
}

// Finish records a terminal state (done, or dead with lastError). ok is
// false if the task was already terminal (a duplicate finished first).
func (s Store) Finish(ctx context.Context, id, status string, lastError *string) (ok bool, err error) {
	tag, err := s.Pool.Exec(ctx, `
UPDATE tasks SET status = $2, processed_at = CASE WHEN $2 = 'done' THEN clock_timestamp() END,
       last_error = coalesce($3, last_error)
 WHERE id = $1 AND (status IN ('queued', 'running')) IS TRUE`, id, status, lastError)
	return tag.RowsAffected() == 1, err
}

// Requeue records a failed attempt that will be retried.
func (s Store) Requeue(ctx context.Context, id, lastError string) error {
	_, err := s.Pool.Exec(ctx, `UPDATE tasks SET status = 'queued', last_error = $2 WHERE id = $1 AND (status IN ('queued', 'running')) IS TRUE`, id, lastError)
	return err
}

// RecordPayment writes p's payment and runs queueTask, the side's way of
// recording and queueing p.Task, in one transaction, then commits. An
// error of queueTask is returned as is, after the rollback; those of the
// begin, the payment insert and the commit are mapped by postgres.MapError.
func (s Store) RecordPayment(ctx context.Context, p queue.NewPayment, queueTask func(tx pgx.Tx) error) error {
	tx, err := s.Pool.Begin(ctx)
	if err != nil {
		return postgres.MapError("begin", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if err := InsertPayment(ctx, tx, p); err != nil {
		return postgres.MapError("insert payment", err)
	}
	if err := queueTask(tx); err != nil {
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		return postgres.MapError("commit payment", err)
	}
	return nil
}

// The statements that change task records by id test the status as
// "(status IN ('queued', 'running')) IS TRUE", which means the same but
// cannot be matched to the partial index tasks_open (status <> 'done').
// On a long-lived table the statistics say almost every task is done (an
// open backlog below autovacuum's 10% analyze threshold never changes
// them), so tasks_open looks like a one-row index, and the planner walked
// the whole open backlog for every batch, comparing each row with every id
// (about a second per record batch with 80,000 open tasks). Ids are looked
// up through the primary key instead (TestByIDUpdatesWalkThePrimaryKey).

// deliverMany is Deliver for many tasks in one statement. Rows are locked
// in index order (id = ANY uses the primary key), so concurrent batches
// do not deadlock on each other.
const deliverMany = `
UPDATE tasks SET status = 'running', attempts = attempts + 1,
       delivered_at = coalesce(delivered_at, clock_timestamp())
 WHERE id = ANY($1::uuid[]) AND (status IN ('queued', 'running')) IS TRUE
RETURNING id::text, attempts, fail_times`

// DeliverMany records one delivery of each open task of ids in one
// statement (one round trip, one commit), as Deliver does for one. The
// answer holds the open tasks only: an id missing from it is done, dead or
// unknown, a duplicate delivery to acknowledge and drop (the record
// decides). An id given twice is recorded once.
func (s Store) DeliverMany(ctx context.Context, ids []string) (map[string]Delivery, error) {
	rows, err := s.Pool.Query(ctx, deliverMany, postgres.UUIDs(ids))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	open := make(map[string]Delivery, len(ids))
	for rows.Next() {
		var id string
		var d Delivery
		if err := rows.Scan(&id, &d.Attempts, &d.FailTimes); err != nil {
			return nil, err
		}
		open[id] = d
	}
	return open, rows.Err()
}

// Outcome is the recorded result of one attempt, for FinishMany.
type Outcome struct {
	// ID is the task's id.
	ID string
	// Status is queue.StatusDone, queue.StatusDead or, for a failed
	// attempt that will be retried, queue.StatusQueued.
	Status string
	// LastError is the attempt's error (nil keeps the recorded one).
	LastError *string
}

// finishMany is Finish and Requeue for many tasks in one statement. A
// terminal task is left alone: the record decides.
const finishMany = `
UPDATE tasks t
   SET status = o.status,
       processed_at = CASE o.status WHEN 'done' THEN clock_timestamp()
                                    WHEN 'dead' THEN NULL
                                    ELSE t.processed_at END,
       last_error = coalesce(o.err, t.last_error)
  FROM unnest($1::uuid[], $2::text[], $3::text[]) AS o(id, status, err)
 WHERE t.id = o.id AND (t.status IN ('queued', 'running')) IS TRUE
RETURNING t.id::text`

// FinishMany records the outcomes in one statement (one round trip, one
// commit): done and dead as Finish does, queued (a retry) as Requeue does.
// The answer holds the ids whose record changed; an id missing from it was
// already done or dead (a duplicate finished first). Give each id once:
// with an id twice, which outcome is recorded is undefined. Sorting the
// outcomes by id keeps concurrent batches from deadlocking.
func (s Store) FinishMany(ctx context.Context, outcomes []Outcome) (map[string]bool, error) {
	ids, statuses, errs := make([]string, len(outcomes)), make([]string, len(outcomes)), make([]*string, len(outcomes))
	for i, o := range outcomes {
		ids[i], statuses[i], errs[i] = o.ID, o.Status, o.LastError
	}
	rows, err := s.Pool.Query(ctx, finishMany, postgres.UUIDs(ids), statuses, errs)
	if err != nil {
		return nil, err
	}
	changed, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, err
	}
	m := make(map[string]bool, len(changed))
	for _, id := range changed {
		m[id] = true
	}
	return m, nil
}
