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

// insertTasks writes many task records in one statement: one round trip
// per batch whatever its size.
const insertTasks = `
INSERT INTO tasks (id, kind, payload, fail_times, status, enqueued_at)
SELECT id, kind, payload, fail_times, 'queued', enqueued_at
  FROM unnest($1::uuid[], $2::text[], $3::jsonb[], $4::int[], $5::timestamptz[])
       AS t(id, kind, payload, fail_times, enqueued_at)`

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
	_, err := db.Exec(ctx, insertTasks, ids, kinds, payloads, fails, at)
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
	var t queue.Task
	err := s.Pool.QueryRow(ctx, `
SELECT id::text, kind, status, attempts, enqueued_at, delivered_at, processed_at, last_error
  FROM tasks WHERE id = $1`, id).Scan(&t.ID, &t.Kind, &t.Status, &t.Attempts, &t.EnqueuedAt, &t.DeliveredAt, &t.ProcessedAt, &t.LastError)
	if errors.Is(err, pgx.ErrNoRows) {
		return queue.Task{}, fmt.Errorf("task %s: %w", id, httpapi.ErrNotFound)
	}
	if err != nil {
		return queue.Task{}, postgres.MapError("read task", err)
	}
	t.EnqueuedAt = t.EnqueuedAt.UTC()
	return t, nil
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
 WHERE id = $1 AND status IN ('queued', 'running')
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
 WHERE id = $1 AND status IN ('queued', 'running')`, id, status, lastError)
	return tag.RowsAffected() == 1, err
}

// Requeue records a failed attempt that will be retried.
func (s Store) Requeue(ctx context.Context, id, lastError string) error {
	_, err := s.Pool.Exec(ctx, `UPDATE tasks SET status = 'queued', last_error = $2 WHERE id = $1 AND status IN ('queued', 'running')`, id, lastError)
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
