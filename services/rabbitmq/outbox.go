package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/backoff"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/queue"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/queue/records"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/postgres"
)

// The repairs of the dual write (issue 14: a 16 s broker outage left 1,271
// recorded tasks that no message would ever deliver):
//
//   - the reconciler (both modes) publishes again the message of a task
//     left queued and never delivered for RECONCILE_AFTER;
//   - PUBLISH_MODE=outbox commits the record and an outbox row in one
//     transaction, and a relay publishes the rows (migration 0006).
//
// Both claim their rows in a transaction that stays open across the
// publish and its confirms (FOR UPDATE SKIP LOCKED: several instances take
// disjoint rows) and commit only after every confirm: a pass that dies
// before its commit changes nothing, and its rows are published again by
// the next pass (a duplicate, which the record makes harmless: a delivery
// of a done task is acked and dropped).

// Counter names of /stats that only this side has.
const (
	// CounterRepublished counts messages the reconciler published again.
	CounterRepublished = "republished"
	// CounterRelayed counts outbox rows published and deleted by the relay.
	CounterRelayed = "relayed"
)

const (
	// relayWorkers is how many relay passes run at once per instance: one
	// can claim and publish while the other waits for its confirms.
	relayWorkers = 2
	// relayPoll is how often an idle relay looks at the outbox anyway:
	// rows of another instance (or of one that died) are published
	// within it. Enqueues of this instance wake it at once.
	relayPoll = time.Second
	// passTimeout bounds one relay or reconciler pass once a broker
	// session is there: the claim, the publish with its confirms, the
	// delete and the commit.
	passTimeout = 10 * time.Second
)

// enqueueOutbox writes task records (kit's records.InsertTasksSQL, the one
// copy of that statement) and their outbox rows in one statement: one
// implicit transaction, one round trip per batch. The outbox rows are the
// messages ($6 to $9, in publish order): one per ordinary task, and one
// per fanned-out task for all its copies (migration 0007: fanout_of and
// copies set), so that the relay publishes once per posted task, as the
// dual write does. A data-modifying WITH runs to completion whether or not
// the outer statement reads it.
const enqueueOutbox = `
WITH t AS (` + records.InsertTasksSQL + `)
INSERT INTO outbox (task_id, enqueued_at, fanout_of, copies)
SELECT task_id, enqueued_at, fanout_of, copies
  FROM unnest($6::uuid[], $7::timestamptz[], $8::text[], $9::jsonb[])
       WITH ORDINALITY AS o(task_id, enqueued_at, fanout_of, copies, n)
 ORDER BY n`

// claimOutbox takes the oldest unpublished rows no other relay holds.
const claimOutbox = `
SELECT seq, task_id::text, enqueued_at, fanout_of, copies FROM outbox ORDER BY seq LIMIT $1 FOR UPDATE SKIP LOCKED`

// claimStranded takes up to $2 tasks queued and never delivered whose
// enqueue (or last republish) is more than $1 microseconds old and whose
// outbox row, if any, is gone (the relay publishes those), oldest first
// through tasks_open, skipping rows another instance's pass holds. It
// marks them republished: another pass sees them again only
// RECONCILE_AFTER later. The outer UPDATE tests its rows
// "(t.status = 'queued') IS TRUE": the same condition, but one the planner
// cannot match to the partial index tasks_open, which a long-lived table's
// statistics make look empty; it would walk the whole open backlog for
// the ids in hand instead of looking each up by primary key (kit's records
// package explains; TestStrandedClaimWalksThePrimaryKey).
const claimStranded = `
UPDATE tasks t SET republished_at = clock_timestamp()
 WHERE t.id = ANY(ARRAY(
        SELECT s.id FROM tasks s
         WHERE s.status = 'queued' AND s.delivered_at IS NULL
           AND coalesce(s.republished_at, s.enqueued_at) < clock_timestamp() - $1 * interval '1 microsecond'
           AND NOT EXISTS (SELECT 1 FROM outbox o WHERE o.task_id = s.id)
         ORDER BY s.enqueued_at
         LIMIT $2
           FOR UPDATE SKIP LOCKED))
   AND (t.status = 'queued') IS TRUE AND t.delivered_at IS NULL
RETURNING t.id::text, t.enqueued_at`

// enqueueToOutbox is Enqueue in outbox mode: the records and their outbox
// rows commit together, then the relay is woken. The broker plays no part
// in the answer: writes are taken while it is down, and wait in the outbox.
func (q *mqQueue) enqueueToOutbox(ctx context.Context, db records.Execer, tasks []queue.NewTask) error {
	ids, kinds, payloads, fails, at := records.TaskColumns(tasks)
	msgs := q.messages(tasks)
	n := len(msgs)
	oids, oat, ofan, ocopies := make([]string, n), make([]time.Time, n), make([]*string, n), make([]*string, n)
	for i, m := range msgs {
		oids[i], oat[i] = m.msg.ID, m.msg.EnqueuedAt
		if m.fanoutOf != "" {
			copies, err := json.Marshal(m.msg.Copies)
			if err != nil {
				return err
			}
			ofan[i], ocopies[i] = &m.fanoutOf, new(string(copies))
		}
	}
	_, err := db.Exec(ctx, enqueueOutbox, postgres.UUIDs(ids), kinds, payloads, fails, at, postgres.UUIDs(oids), oat, ofan, ocopies)
	return err
}

// outboxMessage is the message of an outbox row. A fanned-out task's row
// goes to its kind's exchange when this instance's FANOUT has the kind;
// otherwise (FANOUT changed since the enqueue) each copy goes to the work
// queue as an ordinary task's message, rather than to an exchange that may
// not exist (a publish to a missing exchange closes the channel).
func (q *mqQueue) outboxMessage(m message, fanoutOf *string) []outbound {
	if fanoutOf == nil {
		return []outbound{{key: q.cfg.Queue, msg: m}}
	}
	if subs := q.cfg.Worker.Fanout.Subscribers(*fanoutOf); len(subs) > 0 {
		return []outbound{{exchange: fanoutExchange(q.cfg.Queue, *fanoutOf), msg: m}}
	}
	out := make([]outbound, 0, len(m.Copies))
	for _, id := range m.Copies {
		out = append(out, outbound{key: q.cfg.Queue, msg: message{ID: id, EnqueuedAt: m.EnqueuedAt}})
	}
	return out
}

// pokeRelay wakes one idle relay worker (the other finds the rows on its
// next poll or pass).
func (q *mqQueue) pokeRelay() {
	select {
	case q.relayPoke <- struct{}{}:
	default:
	}
}

// startBackground starts the relay workers (outbox mode) and the
// reconciler (RECONCILE_AFTER > 0). They stop when Stop begins.
func (q *mqQueue) startBackground() {
	if q.cfg.PublishMode == PublishOutbox {
		for range relayWorkers {
			q.background.Go(q.relay)
		}
	}
	if q.cfg.ReconcileAfter > 0 {
		q.background.Go(q.reconcile)
	}
}

// relay publishes outbox rows until stop: on a poke or every relayPoll,
// batches until one is short.
func (q *mqQueue) relay() {
	b := failureBackoff()
	for {
		select {
		case <-q.stopCtx.Done():
			return
		case <-q.relayPoke:
		case <-time.After(relayPoll):
		}
		for q.stopCtx.Err() == nil {
			n, err := q.relayPass()
			if err != nil {
				if q.stopCtx.Err() != nil {
					return
				}
				wait := b.Next()
				q.log.Warn("outbox relay pass failed; the rows wait for the next", "backoff", wait, "err", err)
				if backoff.Sleep(q.stopCtx, wait) != nil {
					return
				}
				continue
			}
			b.Reset()
			if n < q.cfg.OutboxBatch {
				break
			}
		}
	}
}

// errRelayFault ends a pass that a test killed (mqQueue.relayKills).
var errRelayFault = errors.New("relay killed by a test")

// relayPass publishes one batch of outbox rows: it waits for a broker
// session (holding nothing: while the broker is down the rows wait), then
// claims, publishes with pipelined confirms, deletes and commits in one
// transaction. It returns how many rows it published.
func (q *mqQueue) relayPass() (int, error) {
	if _, err := q.session(q.stopCtx); err != nil {
		return 0, err
	}
	ctx, cancel := context.WithTimeout(q.stopCtx, passTimeout)
	defer cancel()
	var n int
	err := pgx.BeginFunc(ctx, q.relayPool, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, claimOutbox, q.cfg.OutboxBatch)
		if err != nil {
			return fmt.Errorf("claim outbox rows: %w", err)
		}
		var seqs []int64
		var msgs []outbound
		for rows.Next() {
			var seq int64
			var m message
			var fanoutOf *string
			if err := rows.Scan(&seq, &m.ID, &m.EnqueuedAt, &fanoutOf, &m.Copies); err != nil {
				rows.Close()
				return err
			}
			seqs = append(seqs, seq)
			msgs = append(msgs, q.outboxMessage(m, fanoutOf)...)
		}
		if err := rows.Err(); err != nil {
			return fmt.Errorf("claim outbox rows: %w", err)
		}
		if len(seqs) == 0 {
			return nil
		}
		if err := q.publish(ctx, msgs, q.deliveryMode()); err != nil {
			return err
		}
		if q.relayKills.Load() > 0 && q.relayKills.Add(-1) >= 0 {
			return errRelayFault // as a relay dying here: the rollback keeps the rows
		}
		if _, err := tx.Exec(ctx, `DELETE FROM outbox WHERE seq = ANY($1)`, seqs); err != nil {
			return fmt.Errorf("delete published outbox rows: %w", err)
		}
		n = len(seqs)
		return nil
	})
	if err != nil {
		return 0, postgres.MapError("outbox relay", err)
	}
	q.stats.Add(CounterRelayed, int64(n))
	return n, nil
}

// reconcile runs a pass every RECONCILE_INTERVAL until stop.
func (q *mqQueue) reconcile() {
	for {
		select {
		case <-q.stopCtx.Done():
			return
		case <-time.After(q.cfg.ReconcileInterval):
		}
		for q.stopCtx.Err() == nil {
			n, err := q.reconcilePass()
			if err != nil {
				if q.stopCtx.Err() == nil {
					q.log.Warn("reconciler pass failed; the next one tries again", "err", err)
				}
				break
			}
			if n < q.cfg.ReconcileBatch {
				break
			}
		}
	}
}

// reconcilePass publishes again the messages of one batch of stranded
// tasks (claimStranded), in the claim's transaction: it commits the claim
// only after every confirm. It returns how many it republished. It does
// nothing while the work queue holds ready messages.
func (q *mqQueue) reconcilePass() (int, error) {
	s, err := q.session(q.stopCtx)
	if err != nil {
		return 0, err
	}
	if ready, err := q.readyMessages(s); err != nil || ready > 0 {
		// A backlog in the broker: a task older than RECONCILE_AFTER may
		// be waiting in it, not missing. Republishing would duplicate
		// the backlog exactly when the consumers are behind; wait for
		// the queue to drain.
		return 0, err
	}
	ctx, cancel := context.WithTimeout(q.stopCtx, passTimeout)
	defer cancel()
	var n int
	err = pgx.BeginFunc(ctx, q.relayPool, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, claimStranded, q.cfg.ReconcileAfter.Microseconds(), q.cfg.ReconcileBatch)
		if err != nil {
			return fmt.Errorf("claim stranded tasks: %w", err)
		}
		var msgs []outbound
		for rows.Next() {
			var m message
			if err := rows.Scan(&m.ID, &m.EnqueuedAt); err != nil {
				rows.Close()
				return err
			}
			msgs = append(msgs, outbound{key: q.cfg.Queue, msg: m})
		}
		if err := rows.Err(); err != nil {
			return fmt.Errorf("claim stranded tasks: %w", err)
		}
		if len(msgs) == 0 {
			return nil
		}
		if err := q.publish(ctx, msgs, q.deliveryMode()); err != nil {
			return err
		}
		n = len(msgs)
		return nil
	})
	if err != nil {
		return 0, postgres.MapError("reconciler", err)
	}
	if n > 0 {
		q.log.Warn("republished the messages of tasks left queued", "tasks", n, "after", q.cfg.ReconcileAfter)
		q.stats.Add(CounterRepublished, int64(n))
	}
	return n, nil
}

// readyMessages is the count of ready messages (not those delivered and
// unacknowledged) of the work queue and every subscriber's queue (FANOUT),
// from passive declares on a channel of its own (a failed passive declare
// closes its channel).
func (q *mqQueue) readyMessages(s *session) (int, error) {
	ch, err := s.conn.Channel()
	if err != nil {
		return 0, fmt.Errorf("open channel: %w", err)
	}
	defer func() { _ = ch.Close() }()
	n := 0
	for _, c := range q.consumed() {
		qi, err := ch.QueueDeclarePassive(c.queue, true, false, false, false, nil)
		if err != nil {
			return 0, fmt.Errorf("read the depth of %s: %w", c.queue, err)
		}
		n += qi.Messages
	}
	return n, nil
}
