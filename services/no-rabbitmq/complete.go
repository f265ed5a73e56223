package main

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/queue"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/postgres"
)

// doneSQL deletes finished rows from the queue (the hot table keeps only
// the backlog; the history stays in tasks) and marks their records done,
// in one statement. RETURNING lists the tasks this completion finished; a
// duplicate (a task another worker already finished) is not listed.
const doneSQL = `
WITH d AS (
    DELETE FROM queue_jobs WHERE task_id = ANY($1::uuid[])
)
UPDATE tasks SET status = 'done', processed_at = clock_timestamp()
 WHERE id = ANY($1::uuid[]) AND (status IN ('queued', 'running')) IS TRUE
RETURNING id::text`

// retrySQL releases failed rows with a backoff: run_at is the retry time.
const retrySQL = `
WITH r AS (
    SELECT * FROM unnest($1::uuid[], $2::bigint[], $3::text[]) AS r(id, delay_ms, err)
), q AS (
    UPDATE queue_jobs q SET run_at = now() + r.delay_ms * interval '1 millisecond', locked_until = NULL
      FROM r WHERE q.task_id = r.id
)
UPDATE tasks t SET status = 'queued', last_error = r.err
  FROM r WHERE t.id = r.id AND (t.status IN ('queued', 'running')) IS TRUE`

// deadSQL moves rows that failed MAX_ATTEMPTS times to the dead state: the
// queue row goes, the record (status dead, last_error) is the dead letter.
const deadSQL = `
WITH r AS (
    SELECT * FROM unnest($1::uuid[], $2::text[]) AS r(id, err)
), d AS (
    DELETE FROM queue_jobs WHERE task_id IN (SELECT id FROM r)
)
UPDATE tasks t SET status = 'dead', last_error = r.err
  FROM r WHERE t.id = r.id AND (t.status IN ('queued', 'running')) IS TRUE
RETURNING t.id::text`

// work runs the jobs the fetcher hands out and passes their outcomes to
// the completer, until the jobs channel closes.
func (q *pgQueue) work() {
	for j := range q.jobs {
		err := queue.Work(q.hardCtx, q.cfg.Worker.Work, j.attempts, j.failTimes)
		if q.hardCtx.Err() != nil {
			continue // crashing: drop the task, its lease will expire
		}
		if j.reply != nil {
			j.reply <- result{j, err} // a cursor batch's copy
			continue
		}
		q.results <- result{j, err}
	}
}

// complete flushes outcomes in batches: whatever has accumulated while the
// previous flush ran goes in the next, so completions cost a few
// statements per batch rather than per task.
func (q *pgQueue) complete() {
	defer close(q.completerDone)
	for r := range q.results {
		batch := []result{r}
	drain:
		for len(batch) < 1000 {
			select {
			case r, ok := <-q.results:
				if !ok {
					break drain
				}
				batch = append(batch, r)
			default:
				break drain
			}
		}
		if q.hardCtx.Err() != nil {
			continue // crashing: nothing more reaches the database
		}
		q.flush(batch)
	}
}

// flush records a batch of outcomes in one round trip (done, retried,
// dead), wakes their waiters, releases their leases and frees their
// capacity. A failure leaves the rows leased: they come back when the
// leases expire.
func (q *pgQueue) flush(batch []result) {
	var doneIDs, retryIDs, retryErrs, deadIDs, deadErrs []string
	var retryDelays []int64
	enqueued := make(map[string]time.Time, len(batch))
	for _, r := range batch {
		enqueued[r.id] = r.enqueuedAt
		switch queue.Decide(r.err, r.attempts, q.cfg.Worker.MaxAttempts) {
		case queue.OutcomeDone:
			doneIDs = append(doneIDs, r.id)
		case queue.OutcomeDead:
			deadIDs, deadErrs = append(deadIDs, r.id), append(deadErrs, r.err.Error())
		case queue.OutcomeRetry:
			retryIDs, retryErrs = append(retryIDs, r.id), append(retryErrs, r.err.Error())
			retryDelays = append(retryDelays, queue.Backoff(q.cfg.Worker.RetryBase, r.attempts).Milliseconds())
		}
	}
	var done, dead []string
	err := retry(q.hardCtx, func(ctx context.Context) error {
		b := &pgx.Batch{}
		if len(doneIDs) > 0 {
			b.Queue(doneSQL, postgres.UUIDs(doneIDs))
		}
		if len(retryIDs) > 0 {
			b.Queue(retrySQL, postgres.UUIDs(retryIDs), retryDelays, retryErrs)
		}
		if len(deadIDs) > 0 {
			b.Queue(deadSQL, postgres.UUIDs(deadIDs), deadErrs)
		}
		br := q.wpool.SendBatch(ctx, b)
		defer br.Close()
		var err error
		if len(doneIDs) > 0 {
			if done, err = collectIDs(br); err != nil {
				return err
			}
		}
		if len(retryIDs) > 0 {
			if _, err = br.Exec(); err != nil {
				return err
			}
		}
		if len(deadIDs) > 0 {
			if dead, err = collectIDs(br); err != nil {
				return err
			}
		}
		return br.Close()
	})
	if err != nil {
		// The leases are no longer renewed: the tasks come back when they
		// expire (at-least-once).
		q.log.Error("recording task outcomes failed; their leases will expire and they will be retried", "tasks", len(batch), "err", err)
	} else {
		q.admission.Finished(len(done) + len(dead))
		for _, id := range done {
			q.stats.Inc(queue.CounterProcessed)
			q.stats.Since(queue.LatencyProcessing, enqueued[id])
			q.hub.Wake(id)
		}
		for _, id := range dead {
			q.stats.Inc(queue.CounterDead)
			q.hub.Wake(id)
		}
		q.stats.Add(queue.CounterRetried, int64(len(retryIDs)))
	}
	q.leases.release(batch)
	q.finished.Add(int64(len(batch)))
	q.inflight.Add(-int64(len(batch)))
	q.poke() // capacity freed, and a retry may be due soon
}

// collectIDs reads the next batch result's rows of task ids.
func collectIDs(br pgx.BatchResults) ([]string, error) {
	rows, err := br.Query()
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// retry runs fn with a 10s timeout up to three times, 200 ms apart.
func retry(ctx context.Context, fn func(context.Context) error) error {
	var err error
	for i := range 3 {
		if i > 0 {
			select {
			case <-ctx.Done():
				return errors.Join(err, ctx.Err())
			case <-time.After(200 * time.Millisecond):
			}
		}
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err = fn(cctx)
		cancel()
		if err == nil {
			return nil
		}
	}
	return err
}
