package records

import (
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/cleaner"
)

// DefaultTaskRetention is TASK_RETENTION's default: how long a done task's
// record stays readable after it was processed.
const DefaultTaskRetention = 24 * time.Hour

// deleteDone removes up to $2 done tasks processed more than $1
// microseconds ago, oldest first, through the partial index tasks_done
// (migration 0004). Only done rows are ever touched: queued and running
// tasks are unfinished, and dead ones are the dead letters an operator
// reads (RabbitMQ's side keeps them in <queue>.dead as well). done is
// terminal (every update of a record requires queued or running), so a
// row the subquery picked is still done when it is deleted; the outer
// condition says so anyway. No queue_jobs row belongs to a done task: it
// is deleted in the statement that marks the record done.
const deleteDone = `
DELETE FROM tasks
 WHERE id = ANY(ARRAY(
        SELECT id FROM tasks
         WHERE status = 'done' AND processed_at < now() - $1 * interval '1 microsecond'
         ORDER BY processed_at
         LIMIT $2))
   AND status = 'done'`

// CleanerJob is the cleaner's job over the tasks table (counted in /stats
// as retention_removed_tasks).
func (s Store) CleanerJob() cleaner.Job {
	return cleaner.SQLJob("tasks", s.Pool, deleteDone)
}
