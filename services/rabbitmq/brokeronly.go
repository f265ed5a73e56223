package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/queue"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/queue/records"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/httpapi"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/jsonbtext"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/postgres"
)

// PUBLISH_MODE=broker-only: what RabbitMQ does alone, one message per task
// and nothing else before the 202. POST /tasks and /tasks/batch publish
// the tasks themselves (message.Kind, Payload, FailTimes) as persistent
// messages with confirms, and write no row; the consumer records each
// task when it first takes it (deliverCarried: an upsert, in the intake's
// batch statement), and from there the pipeline's bookkeeping is the
// other modes' (FinishMany, retries through the delay queues, dead
// letters). Until a worker takes it, the broker alone holds the task:
//
//   - GET /tasks/{id} answers 404 (no record yet); GET /tasks/{id}/wait
//     waits for the record as for the outcome (queue.Options.LateRecords)
//     and answers 404 only if the id is still unknown at its timeout;
//   - GET /queue counts as queued the ready messages of the work queue,
//     the subscribers' queues and the delay queues (Depth), and the
//     backlog bound (MAX_BACKLOG) counts those plus the running records
//     (brokerBacklog); neither sees a message a consumer holds that the
//     intake has not recorded yet (up to PREFETCH per consuming channel
//     and instance);
//   - POST /payments stays the dual write: its payment row is Postgres's,
//     and its task's record commits with it;
//   - the messages must be persistent (DELIVERY_MODE=transient is
//     refused): nothing else would bring a lost one back.

// deliverCarriedSQL records one delivery of each task whose message
// carries it ($1 to $5: TaskColumns' arrays, sorted by id): a task seen
// for the first time is inserted as running, attempts 1, delivered now;
// one already recorded is updated as DeliverMany updates it, if it is
// still open. RETURNING gives the open tasks only: a task already done or
// dead is not returned, a duplicate to acknowledge and drop. The rows go
// in id order, so that concurrent batches of several instances lock in
// the same order.
const deliverCarriedSQL = `
INSERT INTO tasks AS t (id, kind, payload, fail_times, status, attempts, enqueued_at, delivered_at)
SELECT id, kind, payload, fail_times, 'running', 1, enqueued_at, clock_timestamp()
  FROM unnest($1::uuid[], $2::text[], $3::jsonb[], $4::int[], $5::timestamptz[]) AS u(id, kind, payload, fail_times, enqueued_at)
 ORDER BY id
    ON CONFLICT (id) DO UPDATE
   SET status = 'running', attempts = t.attempts + 1, delivered_at = coalesce(t.delivered_at, clock_timestamp())
 WHERE (t.status IN ('queued', 'running')) IS TRUE
RETURNING t.id::text, t.attempts, t.fail_times`

// deliverCarried records one delivery of each of msgs, tasks the messages
// carry, in one statement (deliverCarriedSQL) through the pipeline's
// pool. An id given twice would make the upsert fail: deliver gives each
// once.
func (q *mqQueue) deliverCarried(ctx context.Context, msgs []message) (map[string]records.Delivery, error) {
	msgs = slices.Clone(msgs)
	slices.SortFunc(msgs, func(a, b message) int { return strings.Compare(a.ID, b.ID) })
	tasks := make([]queue.NewTask, len(msgs))
	for i, m := range msgs {
		tasks[i] = queue.NewTask{ID: m.ID, Kind: m.Kind, Payload: m.Payload, FailTimes: m.FailTimes, EnqueuedAt: m.EnqueuedAt}
	}
	ids, kinds, payloads, fails, at := records.TaskColumns(tasks)
	rows, err := q.pipe.Pool.Query(ctx, deliverCarriedSQL, postgres.UUIDs(ids), kinds, payloads, fails, at)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	open := make(map[string]records.Delivery, len(msgs))
	for rows.Next() {
		var id string
		var d records.Delivery
		if err := rows.Scan(&id, &d.Attempts, &d.FailTimes); err != nil {
			return nil, err
		}
		open[id] = d
	}
	return open, rows.Err()
}

// checkCarried checks the task a message carries as the handler checks a
// request (kind, payload, fail_times), so that a message published past
// the service cannot hold the intake's batch statement back: the record
// would not be written, and the batch would be requeued forever. A
// message that fails is dead-lettered, as an undecodable one.
func checkCarried(m message) error {
	switch {
	case strings.TrimSpace(m.Kind) == "" || utf8.RuneCountInString(m.Kind) > queue.MaxKind || strings.ContainsRune(m.Kind, 0):
		return fmt.Errorf("bad task kind %q", m.Kind)
	case m.FailTimes < 0 || m.FailTimes > queue.MaxFailTimes:
		return fmt.Errorf("bad fail_times %d", m.FailTimes)
	case len(m.Payload) == 0 || m.Payload[0] != '{':
		return errors.New("the task's payload is not a JSON object")
	}
	return jsonbtext.Check(m.Payload)
}

// enqueueBrokerOnly is Enqueue with PUBLISH_MODE=broker-only: with a live
// broker session (else 503 not_recorded, nothing published), it publishes
// the tasks' messages, persistent, and returns once every one is
// confirmed. Nothing is recorded: the consumer records each task when it
// takes it. A publish that fails is a 503 of kind "unknown" naming the
// ids: the broker may hold some of them, which will run.
func (q *mqQueue) enqueueBrokerOnly(ctx context.Context, tasks []queue.NewTask) error {
	if err := q.awaitBroker(ctx); err != nil {
		return err
	}
	err := q.publish(ctx, q.messages(tasks), amqp.Persistent)
	return unconfirmed(tasks, false, err, "the %d task(s) were published to RabbitMQ but not every publish was confirmed; "+
		"those the broker took will run, so a retry may run them twice "+
		"(GET /tasks/{id} knows a task once a worker has taken it)")
}

// brokerReadTimeout bounds the broker reads of Depth and brokerBacklog
// beyond their context: a passive declare has no deadline of its own.
const brokerReadTimeout = 5 * time.Second

// taskQueues are the queues that hold tasks waiting for a worker: the
// work queue, each subscriber's queue (FANOUT) and the delay queues
// (a retry waits there for its backoff).
func (q *mqQueue) taskQueues() []string {
	var out []string
	for _, c := range q.consumed() {
		out = append(out, c.queue)
	}
	for n := 1; n < q.cfg.Worker.MaxAttempts; n++ {
		name, _ := q.retryQueue(n)
		out = append(out, name)
	}
	return out
}

// brokerReady counts the ready messages (not those a consumer holds) of
// taskQueues, by passive declares on a channel of its own (a failed
// passive declare closes its channel), on the consuming connection when
// there is one: the publishing connection may be held back by flow
// control. It waits for a live session up to ctx, and gives up at ctx
// or brokerReadTimeout (the declares go on in the background then, and
// end with the connection at the latest).
func (q *mqQueue) brokerReady(ctx context.Context) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, brokerReadTimeout)
	defer cancel()
	s, err := q.session(ctx)
	if err != nil {
		return 0, err
	}
	conn := s.conn
	if s.consConn != nil {
		conn = s.consConn
	}
	type result struct {
		n   int64
		err error
	}
	done := make(chan result, 1)
	go func() {
		ch, err := conn.Channel()
		if err != nil {
			done <- result{err: fmt.Errorf("open channel: %w", err)}
			return
		}
		defer func() { _ = ch.Close() }()
		var n int64
		for _, name := range q.taskQueues() {
			qi, err := ch.QueueDeclarePassive(name, true, false, false, false, nil)
			if err != nil {
				done <- result{err: fmt.Errorf("read the depth of %s: %w", name, err)}
				return
			}
			n += int64(qi.Messages)
		}
		done <- result{n: n}
	}()
	select {
	case r := <-done:
		if r.err != nil {
			return 0, fmt.Errorf("rabbitmq: %v: %w", r.err, httpapi.ErrUnavailable)
		}
		return r.n, nil
	case <-ctx.Done():
		return 0, fmt.Errorf("rabbitmq: reading the queues' depth: %w (%w)", httpapi.ErrUnavailable, ctx.Err())
	}
}

// countRunning counts the running task records, stopping at limit,
// through the pipeline's pool (the partial index tasks_open).
const countRunning = `SELECT count(*) FROM (SELECT 1 FROM tasks WHERE status = 'running' LIMIT $1) b`

// brokerBacklog is the backlog of MAX_BACKLOG with PUBLISH_MODE=broker-only
// (a queue.BacklogCounter): the ready messages of taskQueues (tasks no
// worker has taken, retries waiting) plus the running records (tasks in
// work). A task a consumer holds that the intake has not recorded yet is
// in neither, so the count is short by up to PREFETCH per consuming
// channel and instance; a payment's task, recorded queued at its enqueue,
// is counted once, by its message.
func (q *mqQueue) brokerBacklog(ctx context.Context, limit int64) (int64, error) {
	ready, err := q.brokerReady(ctx)
	if err != nil {
		return 0, err
	}
	var running int64
	if ready < limit {
		if err := q.pipe.Pool.QueryRow(ctx, countRunning, limit-ready).Scan(&running); err != nil {
			return 0, postgres.MapError("count running tasks", err)
		}
	}
	return min(ready+running, limit), nil
}

// Depth implements queue.Backend. In broker-only mode the tasks no worker
// has taken have no record yet: queued is then the ready messages of the
// broker's task queues (retries waiting in the delay queues included),
// running and dead are the records', and oldest_queued_age_s covers only
// the queued tasks that have a record (a retry waiting, a payment's task):
// the broker does not tell the age of the messages it holds. Otherwise it
// is the records' count (records.Store.Depth).
func (q *mqQueue) Depth(ctx context.Context) (queue.Depth, error) {
	d, err := q.Store.Depth(ctx)
	if err != nil || q.cfg.PublishMode != PublishBrokerOnly {
		return d, err
	}
	ready, err := q.brokerReady(ctx)
	if err != nil {
		return queue.Depth{}, err
	}
	d.Queued = ready
	return d, nil
}
