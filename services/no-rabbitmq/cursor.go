package main

import (
	"context"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/cleaner"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/queue"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/postgres"
)

// FANOUT_DESIGN's values.
const (
	// DesignCopies stores a fanned-out task as one task row (and queue
	// row) per subscriber, inserted by the enqueue statement.
	DesignCopies = "copies"
	// DesignCursors stores it once, in fanout_messages, and gives each
	// subscriber a cursor over that table (this file).
	DesignCursors = "cursors"
)

// cursor is one subscriber's reader of fanout_messages: a goroutine
// (follow) woken by wake.
type cursor struct {
	kind, subscriber string
	wake             chan struct{} // capacity 1
}

// cursors returns a reader per subscriber of FANOUT, in FANOUT's order;
// none in the copies design.
func newCursors(cfg Config) []*cursor {
	if cfg.FanoutDesign != DesignCursors {
		return nil
	}
	var out []*cursor
	for _, k := range cfg.Worker.Fanout.Kinds() {
		for _, s := range cfg.Worker.Fanout.Subscribers(k) {
			out = append(out, &cursor{kind: k, subscriber: s, wake: make(chan struct{}, 1)})
		}
	}
	return out
}

// wakeCursors wakes every subscriber's reader; wakes before it looks
// coalesce into one.
func (q *pgQueue) wakeCursors() {
	for _, c := range q.cursors {
		select {
		case c.wake <- struct{}{}:
		default:
		}
	}
}

// messages are the fanned-out tasks of an enqueue as fanout_messages'
// column arrays: one row per posted task, whatever its copies.
type messages struct {
	ids, kinds, subscribers, payloads []string
	fails                             []int32
	at                                []time.Time
}

// splitMessages returns the tasks that are no subscriber's copy, and the
// posted tasks the copies came from (grouped by Copy.First; Expand puts a
// posted task's copies together, in FANOUT's order, which is the order of
// the message's subscribers and so of CopyID's index).
func splitMessages(tasks []queue.NewTask) (plain []queue.NewTask, m messages) {
	for i := 0; i < len(tasks); {
		t := tasks[i]
		if t.Copy == nil {
			plain = append(plain, t)
			i++
			continue
		}
		var subs []string
		for i < len(tasks) && tasks[i].Copy != nil && tasks[i].Copy.First == t.Copy.First {
			subs = append(subs, tasks[i].Copy.Subscriber)
			i++
		}
		m.ids, m.kinds = append(m.ids, t.Copy.First), append(m.kinds, t.Copy.Of)
		// Names hold no comma (queue.ParseFanout): the SQL splits it.
		m.subscribers = append(m.subscribers, strings.Join(subs, ","))
		m.payloads, m.fails, m.at = append(m.payloads, string(t.Payload)), append(m.fails, int32(t.FailTimes)), append(m.at, t.EnqueuedAt)
	}
	return plain, m
}

// enqueueMessagesSQL is enqueueSQL plus the messages of the cursors
// design ($8 to $13), in the same statement and transaction.
const enqueueMessagesSQL = enqueueCTEs + `, m AS (
    INSERT INTO fanout_messages (id, kind, subscribers, payload, fail_times, enqueued_at)
    SELECT id, kind, string_to_array(subs, ','), payload, fail_times, enqueued_at
      FROM unnest($8::uuid[], $9::text[], $10::text[], $11::jsonb[], $12::int[], $13::timestamptz[])
           AS m(id, kind, subs, payload, fail_times, enqueued_at)
)
SELECT pg_notify($6, '') WHERE $7::boolean`

// cursorRowsSQL creates the cursors of FANOUT's subscribers that do not
// exist yet, at position zero: a new subscriber reads the kind's messages
// from the oldest kept, but only those posted with it among their
// subscribers (their copies' ids name it).
const cursorRowsSQL = `
INSERT INTO fanout_cursors (kind, subscriber)
SELECT * FROM unnest($1::text[], $2::text[]) ON CONFLICT DO NOTHING`

// createCursors runs cursorRowsSQL for q.cursors.
func (q *pgQueue) createCursors(ctx context.Context) error {
	if len(q.cursors) == 0 {
		return nil
	}
	var kinds, subs []string
	for _, c := range q.cursors {
		kinds, subs = append(kinds, c.kind), append(subs, c.subscriber)
	}
	_, err := q.wpool.Exec(ctx, cursorRowsSQL, kinds, subs)
	return err
}

// lockCursorSQL takes the subscriber's batch lock for the transaction, or
// answers false at once when another instance (or reader) holds it: one
// batch of a subscriber at a time across instances, and no waiting.
//
// An advisory lock rather than the cursor row's FOR UPDATE SKIP LOCKED:
// a row lock gives the transaction an xid for the whole batch, work
// included, and every other reader's watermark (below) would stop at that
// xid until the batch commits, so each subscriber would wait for the
// others' batches. An advisory lock takes no xid; the transaction gets one
// only when it records the batch. The key is the schema's, kind's and
// subscriber's (advisory locks are database-wide).
const lockCursorSQL = `SELECT pg_try_advisory_xact_lock(hashtextextended(current_schema() || ':' || $1 || '@' || $2, 0))`

// readCursorSQL reads up to $3 messages of the kind past the subscriber's
// cursor, in position order (xid, id), with ready = the row may be read.
//
// WHY the watermark: a message's transaction may commit after a message
// of a later position has committed (positions are assigned before
// commit). A row is ready only if its xid is below pg_snapshot_xmin of
// this statement's snapshot, the oldest transaction still running: every
// transaction below it has ended, so no row can still commit below a
// ready row's position, and moving the cursor past it skips nothing. Rows
// at or above the watermark wait for a later read (ready false); the
// ready rows are a prefix of the answer, since it is ordered by xid. The
// price: any long transaction in the cluster (with an xid) holds every
// subscriber's delivery back until it ends, PgQ's as well.
//
// idx is the copy's index among the message's subscribers (CopyID's),
// NULL for a message not posted to this subscriber (it joined FANOUT
// later): its cursor passes it without a copy.
const readCursorSQL = `
SELECT m.xid::text, m.id::text, array_position(m.subscribers, c.subscriber) - 1 AS idx,
       m.fail_times, m.enqueued_at, m.xid < pg_snapshot_xmin(pg_current_snapshot()) AS ready
  FROM fanout_cursors c
  JOIN LATERAL (
       SELECT * FROM fanout_messages m
        WHERE m.kind = c.kind AND (m.xid, m.id) > (c.upto_xid, c.upto_id)
        ORDER BY m.xid, m.id LIMIT $3) m ON true
 WHERE c.kind = $1 AND c.subscriber = $2
 ORDER BY m.xid, m.id`

// recordCursorSQL records a batch, in the transaction that read it: the
// failed copies ($5 to $8: message, index, error, retry delay in ms or
// NULL for dead) become ordinary task records with their copy ids, the
// retried ones with a queue row due after the backoff (attempts 1: their
// next claim is delivery 2), so the ordinary retries and dead letters
// take them; the batch row keeps its times ($9: read), and the cursor
// moves to the last message read ($3, $4). ON CONFLICT: a copy recorded
// by a batch that committed is never read again, but an operator's
// replay (a cursor moved back) must not fail on it.
const recordCursorSQL = `
WITH f AS (
    SELECT * FROM unnest($5::uuid[], $6::int[], $7::text[], $8::bigint[]) AS f(message, i, err, delay_ms)
), t AS (
    INSERT INTO tasks (id, kind, payload, fail_times, status, attempts, enqueued_at, delivered_at, last_error)
    SELECT fanout_copy_id(m.id, f.i), m.kind || '@' || m.subscribers[f.i + 1], m.payload, m.fail_times,
           CASE WHEN f.delay_ms IS NULL THEN 'dead' ELSE 'queued' END, 1, m.enqueued_at, $9, f.err
      FROM f JOIN fanout_messages m ON m.id = f.message
    ON CONFLICT (id) DO NOTHING
    RETURNING id, fail_times, enqueued_at, status
), q AS (
    INSERT INTO queue_jobs (task_id, run_at, attempts, fail_times, enqueued_at)
    SELECT t.id, now() + f.delay_ms * interval '1 millisecond', 1, t.fail_times, t.enqueued_at
      FROM t JOIN f ON t.id = fanout_copy_id(f.message, f.i)
     WHERE t.status = 'queued'
), b AS (
    INSERT INTO fanout_batches (kind, subscriber, upto_xid, upto_id, read_at, done_at)
    VALUES ($1, $2, $3::xid8, $4, $9, clock_timestamp())
)
UPDATE fanout_cursors SET upto_xid = $3::xid8, upto_id = $4 WHERE kind = $1 AND subscriber = $2`

// follow runs a subscriber's batches while there are ready messages, and
// otherwise sleeps until a wake-up (an enqueue here, a notification), the
// fallback poll, or, when messages wait above the watermark, a short
// pause.
func (q *pgQueue) follow(ctx context.Context, c *cursor) {
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		wait := q.cfg.PollInterval
		n, waiting, err := q.batch(c)
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			q.log.Warn("fan-out batch failed; retrying", "kind", c.kind, "subscriber", c.subscriber, "err", err)
			wait = 500 * time.Millisecond
		case n == q.cfg.ClaimBatch:
			continue // more may be ready
		case waiting:
			// Committed rows wait for an older transaction to end; no
			// wake-up comes when it does.
			wait = 10 * time.Millisecond
		}
		timer.Reset(wait)
		select {
		case <-ctx.Done():
			return
		case <-c.wake:
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

// message is a row of readCursorSQL.
type message struct {
	xid, id    string
	idx        *int
	failTimes  int
	enqueuedAt time.Time
}

// batch runs one batch of c: under the subscriber's lock, it reads the
// ready messages past the cursor, runs their copies on the workers, and
// records the outcomes and the cursor's move in the same transaction. n
// is the messages read (0 if another holds the lock); waiting says rows
// past the cursor wait for the watermark. Anything that ends it before
// the commit (a crash, a lost connection) rolls the whole batch back: the
// next batch, here or in another instance, runs its copies again
// (at-least-once); the records, done by position, are recorded once.
func (q *pgQueue) batch(c *cursor) (n int, waiting bool, err error) {
	ctx := q.hardCtx // not the fetch context: a graceful stop lets the batch finish
	conn, err := q.cpool.Acquire(ctx)
	if err != nil {
		return 0, false, err
	}
	defer conn.Release()
	tx, err := conn.Begin(ctx)
	if err != nil {
		return 0, false, err
	}
	defer func() {
		rctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = tx.Rollback(rctx)
	}()
	var locked bool
	if err := stmt(ctx, func(ctx context.Context) error {
		return tx.QueryRow(ctx, lockCursorSQL, c.kind, c.subscriber).Scan(&locked)
	}); err != nil || !locked {
		return 0, false, err
	}
	msgs, waiting, err := q.readCursor(ctx, tx, c)
	if err != nil || len(msgs) == 0 {
		return 0, waiting, err
	}
	readAt := time.Now()
	results, ok := q.runCopies(msgs)
	if !ok {
		return 0, false, ctx.Err() // crashing: roll back, nothing recorded
	}
	o := q.copyOutcomes(results)
	last := msgs[len(msgs)-1]
	err = stmt(ctx, func(ctx context.Context) error {
		_, err := tx.Exec(ctx, recordCursorSQL, c.kind, c.subscriber, last.xid, last.id,
			postgres.UUIDs(o.failedMsgs), o.failedIdx, o.failedErrs, o.delays, readAt)
		return err
	})
	if err == nil {
		err = stmt(ctx, tx.Commit)
	}
	if err != nil {
		// Nothing of the batch is recorded and the cursor has not
		// moved: the next batch runs these copies again.
		return 0, false, err
	}
	q.counted(o)
	return len(msgs), waiting, nil
}

// readCursor reads, in tx, the messages past c's position that are ready
// (below the watermark), at most CLAIM_BATCH; waiting says a row past
// them waits for the watermark.
func (q *pgQueue) readCursor(ctx context.Context, tx pgx.Tx, c *cursor) (msgs []message, waiting bool, err error) {
	err = stmt(ctx, func(ctx context.Context) error {
		rows, err := tx.Query(ctx, readCursorSQL, c.kind, c.subscriber, q.cfg.ClaimBatch)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var m message
			var ready bool
			if err := rows.Scan(&m.xid, &m.id, &m.idx, &m.failTimes, &m.enqueuedAt, &ready); err != nil {
				return err
			}
			if !ready {
				waiting = true
				q.watermarkWaits.Add(1)
				break
			}
			msgs = append(msgs, m)
		}
		return rows.Err()
	})
	return msgs, waiting, err
}

// batchOutcomes are a batch's copies by outcome: the done ones, and the
// failed ones as recordCursorSQL takes them (message, copy index, error,
// retry delay in ms or nil when dead), with the dead ones' ids apart.
type batchOutcomes struct {
	done                   []copyResult
	dead                   []string
	failedMsgs, failedErrs []string
	failedIdx              []int32
	delays                 []*int64
}

// copyOutcomes decides each copy's outcome (one attempt each: a retry is
// a new copy, after RETRY_BASE).
func (q *pgQueue) copyOutcomes(results []copyResult) batchOutcomes {
	var o batchOutcomes
	for _, r := range results {
		switch queue.Decide(r.err, 1, q.cfg.Worker.MaxAttempts) {
		case queue.OutcomeDone:
			o.done = append(o.done, r)
			continue
		case queue.OutcomeDead:
			o.delays = append(o.delays, nil)
			o.dead = append(o.dead, r.id)
		case queue.OutcomeRetry:
			d := queue.Backoff(q.cfg.Worker.RetryBase, 1).Milliseconds()
			o.delays = append(o.delays, &d)
		}
		o.failedMsgs, o.failedIdx, o.failedErrs = append(o.failedMsgs, r.message), append(o.failedIdx, int32(r.idx)), append(o.failedErrs, r.err.Error())
	}
	return o
}

// counted counts a committed batch's outcomes, wakes their waiters, and
// pokes the fetcher when a retry is due after its backoff.
func (q *pgQueue) counted(o batchOutcomes) {
	q.admission.Finished(len(o.done) + len(o.dead))
	for _, r := range o.done {
		q.stats.Inc(queue.CounterProcessed)
		q.stats.Since(queue.LatencyProcessing, r.enqueuedAt)
		q.hub.Wake(r.id)
	}
	for _, id := range o.dead {
		q.stats.Inc(queue.CounterDead)
		q.hub.Wake(id)
	}
	q.stats.Add(queue.CounterRetried, int64(len(o.failedMsgs)-len(o.dead)))
	if len(o.failedMsgs) > len(o.dead) {
		q.poke() // the fetcher: a retry is due after its backoff
	}
}

// copyResult is a copy's outcome in a batch.
type copyResult struct {
	result
	message string
	idx     int
}

// runCopies runs the batch's copies (the messages posted to this
// subscriber) on the workers, the same handler as every task's, and
// waits for their outcomes; ok is false if the queue crashed meanwhile.
func (q *pgQueue) runCopies(msgs []message) (out []copyResult, ok bool) {
	reply := make(chan result, len(msgs))
	byID := map[string]message{}
	var jobs []job
	for _, m := range msgs {
		if m.idx == nil {
			continue
		}
		j := job{id: queue.CopyID(m.id, *m.idx), attempts: 1, failTimes: m.failTimes, enqueuedAt: m.enqueuedAt, reply: reply}
		byID[j.id] = m
		jobs = append(jobs, j)
	}
	// Counted as held, so that the fetcher's claims leave the workers'
	// channel room for them.
	q.inflight.Add(int64(len(jobs)))
	defer q.inflight.Add(-int64(len(jobs)))
	for _, j := range jobs {
		q.stats.Inc(queue.CounterDelivered)
		q.stats.Since(queue.LatencyDelivery, j.enqueuedAt)
		select {
		case q.jobs <- j:
		case <-q.hardCtx.Done():
			return nil, false
		}
	}
	for range byID {
		select {
		case r := <-reply:
			out = append(out, copyResult{result: r, message: byID[r.id].id, idx: *byID[r.id].idx})
		case <-q.hardCtx.Done():
			return nil, false // the workers drop what they hold
		}
	}
	return out, true
}

// stmt runs one statement of a batch with the 10 s bound of the queue's
// statements.
func stmt(ctx context.Context, fn func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return fn(ctx)
}

// copyRange returns the bounds of the ids a copy's message may have: the
// ids that differ from the copy's in the last six bits (queue.CopyID XORs
// an index below queue.MaxSubscribers = 64 into the last byte).
func copyRange(id string) (lo, hi string) {
	u := uuid.MustParse(id)
	l, h := u, u
	l[15] &^= 0x3f
	h[15] |= 0x3f
	return l.String(), h.String()
}

// getCopySQL reads a task record by id: its tasks row, or else its
// derived record as a copy of a message (fanout_copies, whose message is
// found in the primary key range of copyRange). One statement, one
// snapshot: a copy that a batch moves into tasks meanwhile is seen in one
// place or the other, never in neither.
const getCopySQL = `
SELECT id::text, kind, status, attempts, enqueued_at, delivered_at, processed_at, last_error FROM tasks WHERE id = $1
UNION ALL
SELECT id::text, kind, status, attempts, enqueued_at, delivered_at, processed_at, last_error
  FROM fanout_copies WHERE message_id BETWEEN $2 AND $3 AND id = $1
LIMIT 1`

// Get implements queue.Backend: with the cursors design a copy may live
// as its message only.
func (q *pgQueue) Get(ctx context.Context, id string) (queue.Task, error) {
	if q.cfg.FanoutDesign != DesignCursors {
		return q.Store.Get(ctx, id)
	}
	lo, hi := copyRange(id)
	return q.Store.GetBy(ctx, id, getCopySQL, id, lo, hi)
}

// finishedCopiesSQL is records.Store's Finished plus the copies done as
// their message (fanout_copies), in one snapshot.
const finishedCopiesSQL = `
SELECT id::text FROM tasks WHERE id = ANY($1::uuid[]) AND status IN ('done', 'dead')
UNION ALL
SELECT c.id::text FROM unnest($1::uuid[], $2::uuid[], $3::uuid[]) AS r(id, lo, hi)
  JOIN LATERAL (SELECT f.id FROM fanout_copies f
                 WHERE f.message_id BETWEEN r.lo AND r.hi AND f.id = r.id AND f.status = 'done') c ON true`

// Finished implements queue.FinishedReader, the waits' shared re-read.
func (q *pgQueue) Finished(ctx context.Context, ids []string) ([]string, error) {
	if q.cfg.FanoutDesign != DesignCursors {
		return q.Store.Finished(ctx, ids)
	}
	los, his := make([]string, len(ids)), make([]string, len(ids))
	for i, id := range ids {
		los[i], his[i] = copyRange(id)
	}
	return q.Store.FinishedBy(ctx, finishedCopiesSQL, postgres.UUIDs(ids), postgres.UUIDs(los), postgres.UUIDs(his))
}

// pendingCopiesSQL counts the copies past their subscriber's cursor (up
// to $1), and the age of the oldest: the queued copies of the cursors
// design that have no tasks row. One index range per cursor.
const pendingCopiesSQL = `
SELECT count(*), coalesce(extract(epoch FROM clock_timestamp() - min(enqueued_at)), 0)::float8 FROM (
    SELECT m.enqueued_at FROM fanout_cursors c
      JOIN fanout_messages m ON m.kind = c.kind AND (m.xid, m.id) > (c.upto_xid, c.upto_id)
     WHERE c.subscriber = ANY(m.subscribers)
     LIMIT $1) p`

// pendingCopies runs pendingCopiesSQL on db.
func pendingCopies(ctx context.Context, db *pgxpool.Pool, limit int64) (n int64, age float64, err error) {
	if err = db.QueryRow(ctx, pendingCopiesSQL, limit).Scan(&n, &age); err != nil {
		return 0, 0, postgres.MapError("count pending copies", err)
	}
	return n, age, nil
}

// Depth implements queue.Backend: with the cursors design, the copies
// past their cursors are queued too.
func (q *pgQueue) Depth(ctx context.Context) (queue.Depth, error) {
	d, err := q.Store.Depth(ctx)
	if err != nil || q.cfg.FanoutDesign != DesignCursors {
		return d, err
	}
	n, age, err := pendingCopies(ctx, q.pool, 1<<62)
	if err != nil {
		return queue.Depth{}, err
	}
	d.Queued += n
	d.OldestQueuedAgeSeconds = max(d.OldestQueuedAgeSeconds, age)
	return d, nil
}

// deleteMessagesSQL is the cleaner's job over fanout_messages: up to $2
// messages that EVERY subscriber they were posted to has passed, by a
// batch committed more than $1 µs ago (the retention of a done copy,
// counted from its processing, as for task records). A subscriber
// without a cursor row (removed, and its row deleted) holds nothing back.
// Copies that failed live on in tasks, under the tasks job.
const deleteMessagesSQL = `
DELETE FROM fanout_messages WHERE id = ANY(ARRAY(
    SELECT m.id FROM fanout_messages m
     WHERE m.enqueued_at < now() - $1 * interval '1 microsecond'
       AND NOT EXISTS (
           SELECT 1 FROM unnest(m.subscribers) s(sub)
             JOIN fanout_cursors c ON c.kind = m.kind AND c.subscriber = s.sub
            WHERE coalesce((
                  SELECT b.done_at >= now() - $1 * interval '1 microsecond' FROM fanout_batches b
                   WHERE b.kind = m.kind AND b.subscriber = s.sub AND (b.upto_xid, b.upto_id) >= (m.xid, m.id)
                   ORDER BY b.upto_xid, b.upto_id LIMIT 1), true))
     ORDER BY m.xid, m.id
     LIMIT $2))`

// deleteBatchesSQL is the cleaner's job over fanout_batches: up to $2
// batch rows older than the retention $1 (µs) below which no message is
// left, so that no copy's times are read from them any more. (No message
// can still come below a batch: it was read below the watermark.)
const deleteBatchesSQL = `
DELETE FROM fanout_batches WHERE (kind, subscriber, upto_xid, upto_id) IN (
    SELECT b.kind, b.subscriber, b.upto_xid, b.upto_id FROM fanout_batches b
     WHERE b.done_at < now() - $1 * interval '1 microsecond'
       AND NOT EXISTS (SELECT 1 FROM fanout_messages m
                        WHERE m.kind = b.kind AND (m.xid, m.id) <= (b.upto_xid, b.upto_id))
     LIMIT $2)`

// cursorCleanerJobs are the cleaner's jobs of the cursors design, which
// run before the tasks job: messages, then the batch rows they leave.
func cursorCleanerJobs(db cleaner.Execer) []cleaner.Job {
	return []cleaner.Job{
		cleaner.SQLJob("fanout_messages", db, deleteMessagesSQL),
		cleaner.SQLJob("fanout_batches", db, deleteBatchesSQL),
	}
}
