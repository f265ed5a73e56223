package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/queue"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/queue/records"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/pglisten"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/postgres"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/stats"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/waiter"
)

// enqueueSQL records the tasks and queues them in ONE statement, hence one
// implicit transaction: the record and its queue entry commit together
// (the transactional outbox, for free). With $7 true (NOTIFY_MODE=commit)
// it also calls pg_notify, which is transactional: the listeners hear it
// only if the statement commits, but every such commit takes Postgres's
// cluster-wide notify lock, so enqueues serialize at commit. With $7
// false (debounced) the one-time filter leaves pg_notify unevaluated, the
// transaction queues no notification and takes no lock, and the caller
// pokes the Debouncer after the commit.
const enqueueSQL = `
WITH t AS (
    INSERT INTO tasks (id, kind, payload, fail_times, status, enqueued_at)
    SELECT id, kind, payload, fail_times, 'queued', enqueued_at
      FROM unnest($1::uuid[], $2::text[], $3::jsonb[], $4::int[], $5::timestamptz[])
           AS t(id, kind, payload, fail_times, enqueued_at)
    RETURNING id, fail_times, enqueued_at
), q AS (
    INSERT INTO queue_jobs (task_id, run_at, fail_times, enqueued_at)
    SELECT id, now(), fail_times, enqueued_at FROM t
)
SELECT pg_notify($6, '') WHERE $7::boolean`

// claimSQL takes up to $1 due rows in one round trip. FOR UPDATE SKIP
// LOCKED makes concurrent claimers (other workers, other instances) skip
// the rows a claim in flight has locked instead of waiting for it: no two
// claims return the same row, and none blocks. Claimed rows get a lease of
// $2 ms: run_at moves to the lease's end, so an expired lease (a dead
// worker) is simply due again, and the next claim rescues it. The task
// records are marked running in the same statement. Task records are
// tested "(status IN (...)) IS TRUE" here and in every statement below
// that changes records by id: the same condition, but one the planner
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

// renewSQL extends the leases of the rows this instance still holds.
const renewSQL = `
UPDATE queue_jobs SET run_at = now() + $2 * interval '1 millisecond', locked_until = now() + $2 * interval '1 millisecond'
 WHERE task_id = ANY($1::uuid[]) AND locked_until IS NOT NULL`

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

// job is a claimed task in memory.
type job struct {
	id         string
	attempts   int
	failTimes  int
	enqueuedAt time.Time
}

// result is a job's outcome, for the completer.
type result struct {
	job
	err error
}

// pgQueue is the Postgres-side queue: the queue.Backend for the handlers,
// and the in-process workers. Its Backend methods are safe for concurrent
// use. Start it once; Stop (graceful) or Crash ends it, once.
type pgQueue struct {
	records.Store
	// pool serves the HTTP requests (Enqueue, Pay, the records); wpool,
	// of WorkerConns connections, serves the queue's own machinery
	// (claims, completions, leases, rebuilds), so that no number of
	// requests waiting for a connection can starve the workers.
	pool, wpool *pgxpool.Pool
	cfg         Config
	stats       *stats.Recorder
	log         *slog.Logger
	hub         *waiter.Hub
	channel     string // NOTIFY channel, per schema
	// notifier sends the debounced NOTIFYs (NOTIFY_MODE=debounced); nil
	// in commit mode, where the enqueue statement notifies.
	notifier *pglisten.Debouncer

	wake      chan struct{} // pokes the fetcher; capacity 1
	capacity  int64
	inflight  atomic.Int64
	listening atomic.Bool
	// listenErr is why the LISTEN connection last went down (a string),
	// for /readyz and a failed start.
	listenErr atomic.Value

	mu   sync.Mutex
	held map[string]struct{} // claimed, not yet completed: leases to renew

	jobs    chan job
	results chan result

	// fetchCtx ends the fetcher and the listener; hardCtx ends everything
	// at once (a crash, or a graceful stop past its deadline).
	fetchCtx, hardCtx       context.Context
	fetchCancel, hardCancel context.CancelFunc
	fetchers, workers       sync.WaitGroup
	completerDone           chan struct{}
	stopOnce                sync.Once
}

// newPGQueue returns a stopped queue on pool (requests) and wpool (the
// workers' machinery); npool, if not nil, carries the debounced NOTIFYs.
func newPGQueue(pool, wpool, npool *pgxpool.Pool, cfg Config, st *stats.Recorder, log *slog.Logger) *pgQueue {
	capacity := int64(cfg.Worker.Workers + cfg.ClaimBatch)
	q := &pgQueue{
		Store: records.Store{Pool: pool}, pool: pool, wpool: wpool, cfg: cfg, stats: st, log: log,
		hub:           new(waiter.Hub),
		channel:       notifyChannel(cfg.Postgres.Schema),
		wake:          make(chan struct{}, 1),
		capacity:      capacity,
		held:          map[string]struct{}{},
		jobs:          make(chan job, capacity),
		results:       make(chan result, capacity),
		completerDone: make(chan struct{}),
	}
	if npool != nil {
		q.notifier = &pglisten.Debouncer{
			DB: npool, Channel: q.channel, Interval: cfg.Notify.Interval, Timeout: cfg.BackendTimeout,
			OnError: func(err error) { log.Warn("debounced NOTIFY failed; retrying", "err", err) },
		}
	}
	q.fetchCtx, q.fetchCancel = context.WithCancel(context.Background())
	q.hardCtx, q.hardCancel = context.WithCancel(context.Background())
	return q
}

// notifyChannel names the NOTIFY channel after the schema, so that
// services on different schemas do not wake each other.
func notifyChannel(schema string) string {
	ch := "queue_jobs"
	if schema != "" {
		ch += "." + schema
	}
	return postgres.TruncateName(ch)
}

// prepare applies QUEUE_TABLE and rebuilds missing queue rows.
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
	q.mu.Lock()
	held := make([]string, 0, len(q.held))
	for id := range q.held {
		held = append(held, id)
	}
	q.mu.Unlock()
	tag, err := q.wpool.Exec(ctx, rebuildSQL, postgres.UUIDs(held), q.cfg.Lease.Milliseconds())
	if err != nil {
		return fmt.Errorf("rebuild queue_jobs from tasks: %w", err)
	}
	if n := tag.RowsAffected(); n > 0 {
		q.log.Warn("re-queued open tasks missing from queue_jobs (crash recovery emptied the unlogged table?)", "tasks", n)
	}
	return nil
}

// Start starts the listener, the fetcher, the workers, the completer and
// the lease keeper. With WORKERS=0 it starts nothing: an API-only instance.
func (q *pgQueue) Start() {
	if q.cfg.Worker.Workers == 0 {
		close(q.completerDone)
		return
	}
	q.fetchers.Add(2)
	go func() { defer q.fetchers.Done(); q.listen(q.fetchCtx) }()
	go func() { defer q.fetchers.Done(); q.fetch(q.fetchCtx) }()
	for range q.cfg.Worker.Workers {
		q.workers.Go(q.work)
	}
	go q.complete()
	go q.renewLeases()
}

// Stop stops gracefully: no more claims, the workers finish what they hold
// and the completions are flushed. If ctx ends first, the remaining tasks
// are abandoned as in a crash: their leases expire and another instance
// rescues them.
func (q *pgQueue) Stop(ctx context.Context) error {
	q.stopOnce.Do(func() {
		q.fetchCancel()
		q.fetchers.Wait()
		close(q.jobs)
		workersDone := make(chan struct{})
		go func() { q.workers.Wait(); close(workersDone) }()
		queue.AwaitOrAbort(ctx, workersDone, q.hardCancel)
		close(q.results)
		queue.AwaitOrAbort(ctx, q.completerDone, q.hardCancel)
		q.hardCancel()
	})
	return nil
}

// Crash stops as a crash would: tasks in hand are neither completed nor
// released. For tests.
func (q *pgQueue) Crash() {
	q.hardCancel()
	_ = q.Stop(context.Background())
}

func (q *pgQueue) poke() {
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// Enqueue implements queue.Backend: one statement records and queues.
func (q *pgQueue) Enqueue(ctx context.Context, tasks []queue.NewTask) error {
	ids, kinds, payloads, fails, at := records.TaskColumns(tasks)
	if _, err := q.pool.Exec(ctx, enqueueSQL, postgres.UUIDs(ids), kinds, payloads, fails, at, q.channel, q.notifier == nil); err != nil {
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
	if q.notifier != nil {
		q.notifier.Poke()
	}
}

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
	q.mu.Lock()
	for _, j := range claimed {
		q.held[j.id] = struct{}{}
	}
	q.mu.Unlock()
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

func (q *pgQueue) work() {
	for j := range q.jobs {
		err := queue.Work(q.hardCtx, q.cfg.Worker.Work, j.attempts, j.failTimes)
		if q.hardCtx.Err() != nil {
			continue // crashing: drop the task, its lease will expire
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
	q.mu.Lock()
	for _, r := range batch {
		delete(q.held, r.id)
	}
	q.mu.Unlock()
	q.inflight.Add(-int64(len(batch)))
	q.poke() // capacity freed, and a retry may be due soon
}

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

// renewLeases extends the leases of held tasks every Lease/3 until the
// completer has finished (or a crash).
func (q *pgQueue) renewLeases() {
	t := time.NewTicker(q.cfg.Lease / 3)
	defer t.Stop()
	for {
		select {
		case <-q.completerDone:
			return
		case <-q.hardCtx.Done():
			return
		case <-t.C:
		}
		q.mu.Lock()
		ids := make([]string, 0, len(q.held))
		for id := range q.held {
			ids = append(ids, id)
		}
		q.mu.Unlock()
		if len(ids) == 0 {
			continue
		}
		ctx, cancel := context.WithTimeout(q.hardCtx, q.cfg.Lease/3)
		_, err := q.wpool.Exec(ctx, renewSQL, postgres.UUIDs(ids), q.cfg.Lease.Milliseconds())
		cancel()
		if err != nil && q.hardCtx.Err() == nil {
			q.log.Warn("renewing leases failed", "tasks", len(ids), "err", err)
		}
	}
}
