package main

import (
	"context"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/queue"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/postgres"
)

// claimSQL takes up to $1 due rows in one round trip. FOR UPDATE SKIP
// LOCKED makes concurrent claimers (other workers, other instances) skip
// the rows a claim in flight has locked instead of waiting for it: no two
// claims return the same row, and none blocks. Claimed rows get a lease of
// $2 ms: run_at moves to the lease's end, so an expired lease (a dead
// worker) is simply due again, and the next claim rescues it. The task
// records are marked running in the same statement. Task records are
// tested "(status IN (...)) IS TRUE" here and in every statement that
// changes records by id (staleSQL, and complete.go's): the same condition, but one the planner
// cannot match to the partial index tasks_open, which long-lived tables'
// statistics make look empty; it would walk the whole open backlog per
// claim (kit's records package explains; TestRecordUpdatesWalkThePrimaryKey).
const claimSQL = `
WITH picked AS (
    SELECT task_id FROM queue_jobs
     WHERE run_at <= now()
     ORDER BY run_at
     LIMIT $1
       FOR UPDATE SKIP LOCKED
), claimed AS (
    UPDATE queue_jobs q
       SET attempts = q.attempts + 1,
           run_at = now() + $2 * interval '1 millisecond',
           locked_until = now() + $2 * interval '1 millisecond'
      FROM picked
     WHERE q.task_id = picked.task_id
    RETURNING q.task_id, q.attempts, q.fail_times, q.enqueued_at
), rec AS (
    UPDATE tasks t
       SET status = 'running', attempts = c.attempts,
           delivered_at = coalesce(t.delivered_at, clock_timestamp())
      FROM claimed c
     WHERE t.id = c.task_id AND (t.status IN ('queued', 'running')) IS TRUE
    RETURNING t.id
)
SELECT task_id::text, attempts, fail_times, enqueued_at, task_id IN (SELECT id FROM rec) AS open FROM claimed`

// staleSQL deletes queue rows whose task record is finished: a claim
// returns them with open false. The record decides: such a row is left by
// a rebuild whose snapshot still saw the task open while a completion
// deleted its row and finished it (QUEUE_TABLE=logged re-queued 3 tasks
// that way, and 1 ran twice, before the claim checked).
const staleSQL = `
DELETE FROM queue_jobs q WHERE q.task_id = ANY($1::uuid[])
   AND NOT EXISTS (SELECT 1 FROM tasks t WHERE t.id = q.task_id AND (t.status IN ('queued', 'running')) IS TRUE)`

// fetch claims due rows while there is capacity, and otherwise sleeps until
// a notification, a completion, the next due row or the fallback poll.
func (q *pgQueue) fetch(ctx context.Context) {
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		wait := q.cfg.PollInterval
		if free := q.capacity - q.inflight.Load(); free > 0 {
			want := min(free, int64(q.cfg.ClaimBatch))
			got, err := q.claim(want)
			switch {
			case ctx.Err() != nil:
				return
			case err != nil:
				q.log.Warn("claim failed; retrying", "err", err)
				wait = 500 * time.Millisecond
			case got == want:
				continue // more may be due
			default:
				if next, ok := q.nextDue(ctx); ok && next < wait {
					wait = max(next, 5*time.Millisecond)
				}
			}
		}
		timer.Reset(wait)
		select {
		case <-ctx.Done():
			return
		case <-q.wake:
			q.linger(ctx)
		case <-timer.C:
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
	}
}

// linger waits CLAIM_LINGER after a poke (an enqueue, a completion, the
// listener's sweep), so that the enqueues committing and the capacity
// freed meanwhile go into the same claim (their pokes fold into the one
// in hand), as the rabbitmq side's RECORD_LINGER gathers record writes.
func (q *pgQueue) linger(ctx context.Context) {
	if q.cfg.ClaimLinger <= 0 {
		return
	}
	t := time.NewTimer(q.cfg.ClaimLinger)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
	select { // the pokes that came meanwhile are this claim's
	case <-q.wake:
	default:
	}
}

// claim claims up to n due rows (claimSQL), holds their leases and hands
// them to the workers; it returns how many it claimed.
func (q *pgQueue) claim(n int64) (int64, error) {
	// Not the fetcher's context: a claim cancelled at shutdown after its
	// commit would strand its rows until their leases expired.
	ctx, cancel := context.WithTimeout(q.hardCtx, 10*time.Second)
	defer cancel()
	rows, err := q.wpool.Query(ctx, claimSQL, n, q.cfg.Lease.Milliseconds())
	if err != nil {
		return 0, err
	}
	var claimed []job
	var stale []string
	for rows.Next() {
		var j job
		var open bool
		if err := rows.Scan(&j.id, &j.attempts, &j.failTimes, &j.enqueuedAt, &open); err != nil {
			rows.Close()
			return 0, err
		}
		if !open {
			stale = append(stale, j.id)
			continue
		}
		claimed = append(claimed, j)
	}
	if err := rows.Err(); err != nil {
		return 0, err
	}
	if len(stale) > 0 {
		// Rare (a rebuild raced a completion): not run, not counted. A
		// failed delete leaves the rows under their lease, to be dropped
		// by the next claim that meets them.
		if _, err := q.wpool.Exec(ctx, staleSQL, postgres.UUIDs(stale)); err != nil {
			q.log.Warn("could not drop queue rows of finished tasks", "tasks", len(stale), "err", err)
		} else {
			q.log.Info("dropped queue rows of finished tasks (a rebuild raced a completion); not run again", "tasks", len(stale))
		}
	}
	q.leases.hold(claimed)
	q.inflight.Add(int64(len(claimed)))
	for _, j := range claimed {
		q.stats.Inc(queue.CounterDelivered)
		if j.attempts == 1 { // first delivery: a retry's backoff is not delivery latency
			q.stats.Since(queue.LatencyDelivery, j.enqueuedAt)
		}
		q.jobs <- j // never blocks: capacity bounds the claims
	}
	return int64(len(claimed)), nil
}

// nextDue returns how long until the earliest row is due (a retry's
// backoff, a lease's end); ok is false for an empty queue.
func (q *pgQueue) nextDue(ctx context.Context) (time.Duration, bool) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	var ms *float64
	if err := q.wpool.QueryRow(ctx, `SELECT extract(epoch FROM min(run_at) - now()) * 1000 FROM queue_jobs`).Scan(&ms); err != nil || ms == nil {
		return 0, false
	}
	return time.Duration(*ms * float64(time.Millisecond)), true
}
