package main

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/queue"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/queue/records"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/postgres"
)

// enqueueSQL records the tasks and queues them in ONE statement, hence one
// implicit transaction: the record and its queue entry commit together
// (the transactional outbox, for free). With $7 true (NOTIFY_MODE=commit)
// it also calls pg_notify, which is transactional: the listeners hear it
// only if the statement commits, but every such commit takes Postgres's
// cluster-wide notify lock, so enqueues serialize at commit. With $7
// false (debounced) the one-time filter leaves pg_notify unevaluated, the
// transaction queues no notification and takes no lock, and the caller
// pokes the Debouncer after the commit. The task records are written by
// kit's records.InsertTasksSQL, the statement the rabbitmq side's records
// use too.
const enqueueSQL = enqueueCTEs + `
SELECT pg_notify($6, '') WHERE $7::boolean`

// enqueueCTEs are enqueueSQL's writes: the task records, then their queue
// rows.
const enqueueCTEs = `
WITH t AS (` + records.InsertTasksSQL + `
    RETURNING id, fail_times, enqueued_at
), q AS (
    INSERT INTO queue_jobs (task_id, run_at, fail_times, enqueued_at)
    SELECT id, now(), fail_times, enqueued_at FROM t
)`

// Enqueue implements queue.Backend: one statement records and queues.
// With FANOUT_DESIGN=cursors a task posted with a kind that has
// subscribers is one fanout_messages row, written by the same statement
// (enqueueMessagesSQL), instead of its copies' rows.
func (q *pgQueue) Enqueue(ctx context.Context, tasks []queue.NewTask) error {
	var m messages
	if q.cfg.FanoutDesign == DesignCursors {
		tasks, m = splitMessages(tasks)
	}
	ids, kinds, payloads, fails, at := records.TaskColumns(tasks)
	sql, args := enqueueSQL, []any{postgres.UUIDs(ids), kinds, payloads, fails, at, q.channel, q.notifier == nil}
	if len(m.ids) > 0 {
		sql, args = enqueueMessagesSQL, append(args, postgres.UUIDs(m.ids), m.kinds, m.subscribers, m.payloads, m.fails, m.at)
	}
	if _, err := q.pool.Exec(ctx, sql, args...); err != nil {
		return postgres.MapError("enqueue", err)
	}
	q.committed()
	return nil
}

// Pay implements queue.Backend: the payment, the task record and the queue
// row commit in one transaction. The fault rolls back after the payment
// insert, as a crash before COMMIT would: neither survives.
func (q *pgQueue) Pay(ctx context.Context, p queue.NewPayment, fault bool) error {
	err := q.RecordPayment(ctx, p, func(tx pgx.Tx) error {
		if fault {
			return queue.ErrFaultInjected
		}
		ids, kinds, payloads, fails, at := records.TaskColumns([]queue.NewTask{p.Task})
		_, err := tx.Exec(ctx, enqueueSQL, postgres.UUIDs(ids), kinds, payloads, fails, at, q.channel, q.notifier == nil)
		return postgres.MapError("enqueue payment task", err)
	})
	if err != nil {
		return err
	}
	q.committed()
	return nil
}

// committed wakes the workers after an enqueue committed: this instance's
// fetcher directly (it need not wait for a notification) and, in debounced
// mode, every instance's through the Debouncer's next NOTIFY.
func (q *pgQueue) committed() {
	q.poke()
	q.wakeCursors()
	if q.notifier != nil {
		q.notifier.Poke()
	}
}

// backlogSQL counts the rows of queue_jobs, one per open task (queued,
// held under a lease, or waiting for a retry), up to $1: the backlog of
// the admission bound (MAX_BACKLOG). It reads at most $1 rows of a table
// the size of the backlog.
const backlogSQL = `SELECT count(*) FROM (SELECT 1 FROM queue_jobs LIMIT $1) b`

// countBacklog is the queue.BacklogCounter of this side, through the
// workers' pool: a saturated request pool must not delay the count.
func (q *pgQueue) countBacklog(ctx context.Context, limit int64) (int64, error) {
	var n int64
	if err := q.wpool.QueryRow(ctx, backlogSQL, limit).Scan(&n); err != nil {
		return 0, postgres.MapError("count the backlog", err)
	}
	if q.cfg.FanoutDesign == DesignCursors && n < limit {
		// The copies past their cursors are open tasks too.
		pending, _, err := pendingCopies(ctx, q.wpool, limit-n)
		if err != nil {
			return 0, err
		}
		n += pending
	}
	return n, nil
}
