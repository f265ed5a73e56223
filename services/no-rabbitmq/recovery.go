package main

import (
	"context"
	"fmt"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/postgres"
)

// rebuildSQL re-queues every open task whose queue row is missing: after a
// crash, recovery empties an UNLOGGED queue_jobs, while the logged records
// survive. The tasks in $1 are held by this instance's workers (a rebuild
// while the service runs): their rows come back under a lease of $2 ms, as
// a claim would leave them, so that the lease keeper renews them, a retry
// finds its row, and no other worker takes them meanwhile.
const rebuildSQL = `
INSERT INTO queue_jobs (task_id, run_at, locked_until, attempts, fail_times, enqueued_at)
SELECT id,
       CASE WHEN held THEN now() + $2 * interval '1 millisecond' ELSE now() END,
       CASE WHEN held THEN now() + $2 * interval '1 millisecond' END,
       attempts, fail_times, enqueued_at
  FROM (SELECT *, id = ANY($1::uuid[]) AS held FROM tasks WHERE status IN ('queued', 'running')) t
ON CONFLICT (task_id) DO NOTHING`

// prepare applies QUEUE_TABLE, creates the fan-out cursors
// (FANOUT_DESIGN=cursors) and rebuilds missing queue rows.
func (q *pgQueue) prepare(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var persistence string
	if err := q.wpool.QueryRow(ctx, `SELECT relpersistence::text FROM pg_class WHERE oid = 'queue_jobs'::regclass`).Scan(&persistence); err != nil {
		return fmt.Errorf("inspect queue_jobs: %w", err)
	}
	want := map[string]string{"unlogged": "u", "logged": "p"}[q.cfg.QueueTable]
	if persistence != want {
		// Rewrites the table under an exclusive lock: cheap, the table
		// holds only the backlog.
		if _, err := q.wpool.Exec(ctx, "ALTER TABLE queue_jobs SET "+map[string]string{"u": "UNLOGGED", "p": "LOGGED"}[want]); err != nil {
			return fmt.Errorf("QUEUE_TABLE=%s: %w", q.cfg.QueueTable, err)
		}
		q.log.Info("queue table durability changed", "queue_table", q.cfg.QueueTable)
	}
	if err := q.createCursors(ctx); err != nil {
		return fmt.Errorf("create the fan-out cursors: %w", err)
	}
	return q.rebuild(ctx)
}

// rebuild re-queues the open tasks missing from queue_jobs (rebuildSQL).
// It runs at start and after every LISTEN reconnect; the tasks this
// instance holds come back leased to it. (Another instance's held tasks
// come back due and may be delivered twice: at-least-once, and the records
// keep the outcome idempotent.)
func (q *pgQueue) rebuild(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	tag, err := q.wpool.Exec(ctx, rebuildSQL, postgres.UUIDs(q.leases.ids()), q.cfg.Lease.Milliseconds())
	if err != nil {
		return fmt.Errorf("rebuild queue_jobs from tasks: %w", err)
	}
	if n := tag.RowsAffected(); n > 0 {
		q.log.Warn("re-queued open tasks missing from queue_jobs (crash recovery emptied the unlogged table?)", "tasks", n)
	}
	return nil
}
