package main

import (
	"context"
	"time"
)

// vacuumSQL vacuums the hot table. Every task leaves three dead tuples
// in queue_jobs (its insert, its claim's update of run_at, its delete),
// and their entries stay at the head of queue_jobs_run_at, which every
// claim walks, until a vacuum removes them. Autovacuum visits a table at
// most once per autovacuum_naptime (1 min by default, a server-wide
// setting, whatever the table's own thresholds: migration 0005), and a
// minute of an intake of 10,000 tasks/s leaves two million dead tuples:
// the claim slowed down by the second and processing fell to a third of
// what it was with a vacuum every second (docs/queue.md, tuning table).
// So the service vacuums the table itself, as PgQ's pgqd maintains its
// queue tables. SKIP_LOCKED: when another instance's vacuum (or
// autovacuum) holds the table, this one is not needed and does not wait.
const vacuumSQL = `VACUUM (SKIP_LOCKED) queue_jobs`

// vacuumChurn is how many tasks this instance finishes between two of its
// vacuums at least (the same count as migration 0005's autovacuum
// threshold): an idle queue is not vacuumed every VACUUM_INTERVAL.
const vacuumChurn = 1000

// vacuumTimeout bounds one vacuum of the backlog-sized table.
const vacuumTimeout = time.Minute

// vacuumHot runs vacuumSQL every VACUUM_INTERVAL (none when it is 0)
// when at least vacuumChurn tasks finished through this instance since
// its last vacuum, until ctx ends. A vacuum longer than the interval
// delays the next: they never overlap. A failure is logged and left to
// the next tick; autovacuum remains.
func (q *pgQueue) vacuumHot(ctx context.Context) {
	if q.cfg.VacuumInterval <= 0 {
		return
	}
	t := time.NewTicker(q.cfg.VacuumInterval)
	defer t.Stop()
	var last int64
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		n := q.finished.Load()
		if n-last < vacuumChurn {
			continue
		}
		last = n
		vctx, cancel := context.WithTimeout(ctx, vacuumTimeout)
		_, err := q.wpool.Exec(vctx, vacuumSQL)
		cancel()
		if err != nil && ctx.Err() == nil {
			q.log.Warn("vacuum of queue_jobs failed; retrying at the next tick", "err", err)
			continue
		}
		q.vacuums.Add(1)
	}
}
