package main

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/backoff"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/queue"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/queue/records"
)

// The consumer is a pipeline, so that record writes are grouped across
// workers instead of costing two single-row commits per delivery:
//
//	forward ──inbound──▶ intake ──jobs──▶ workers ──results──▶ completer
//	(tracks tags)        (DeliverMany:      (queue.Work)        (FinishMany: one
//	                      one statement                          statement per batch,
//	                      per batch)                             retries published with
//	                                                             pipelined confirms, then
//	                                                             acks with multiple)
//
// A delivery is acknowledged only after its outcome is recorded; one whose
// record cannot be written is requeued after a backoff (the stage sleeps,
// holding it unacknowledged, so a Postgres outage is no redelivery loop).
// The intake records at most RECORD_BATCH deliveries ahead of the workers
// (jobs is unbuffered), as no-rabbitmq claims at most CLAIM_BATCH.

// inbound is a received delivery: its tag on its channel's acker, its
// body and, from a subscriber's queue (FANOUT), the subscriber whose copy
// it delivers.
type inbound struct {
	acks       *acker
	tag        uint64
	body       []byte
	subscriber string
	received   time.Time
}

// job is a delivery whose record says it is open, for a worker.
type job struct {
	inbound
	msg message
	rec records.Delivery
}

// result is a job's attempt, for the completer.
type result struct {
	job
	err error
}

// collect gathers a batch from in: it waits for a first item, then takes
// more until max, until linger has passed since the first, or until in is
// closed. ok is false once in is closed (batch holds what came before).
func collect[T any](in <-chan T, max int, linger time.Duration) (batch []T, ok bool) {
	first, ok := <-in
	if !ok {
		return nil, false
	}
	batch = append(make([]T, 0, max), first)
	var timeout <-chan time.Time
	if linger > 0 {
		t := time.NewTimer(linger)
		defer t.Stop()
		timeout = t.C
	}
	for len(batch) < max {
		if linger <= 0 {
			select {
			case v, ok := <-in:
				if !ok {
					return batch, false
				}
				batch = append(batch, v)
				continue
			default:
				return batch, true
			}
		}
		select {
		case v, ok := <-in:
			if !ok {
				return batch, false
			}
			batch = append(batch, v)
		case <-timeout:
			return batch, true
		}
	}
	return batch, true
}

// recordTimeout bounds each batch statement.
const recordTimeout = 10 * time.Second

// failureBackoff is how long a stage holds a batch it could not record
// before requeueing it: doubling from 100ms to 5s while failures last.
func failureBackoff() backoff.Backoff {
	return backoff.Backoff{Initial: 100 * time.Millisecond, Max: 5 * time.Second}
}

// recordBatches is a recording stage's loop: it collects batches from in
// (RECORD_BATCH, RECORD_LINGER) until in is closed and records each with
// record, which shares one failure backoff across the stage's batches.
// Once the queue crashes, batches are dropped unrecorded.
func recordBatches[T any](q *mqQueue, in <-chan T, record func(batch []T, b *backoff.Backoff)) {
	b := failureBackoff()
	for {
		batch, ok := collect(in, q.cfg.RecordBatch, q.cfg.RecordLinger)
		if len(batch) > 0 && q.hardCtx.Err() == nil {
			record(batch, &b)
		}
		if !ok {
			return
		}
	}
}

// intake records deliveries in batches until inbound is closed, then
// closes jobs.
func (q *mqQueue) intake() {
	defer close(q.jobs)
	recordBatches(q, q.inbound, q.deliver)
}

// deliver records one batch of deliveries in one statement and hands the
// open ones to the workers. Duplicates (the record says done or dead, or
// the same task twice in the batch) are acknowledged and dropped.
func (q *mqQueue) deliver(batch []inbound, b *backoff.Backoff) {
	var open []job
	seen := make(map[string]bool, len(batch))
	for _, in := range batch {
		m, err := decode(in)
		if err != nil {
			q.log.Error("undecodable message dead-lettered", "body", string(in.body), "err", err)
			in.acks.nack(false, in.tag)
			continue
		}
		q.stats.Inc(queue.CounterDelivered)
		if seen[m.ID] {
			in.acks.ack(in.tag) // the first of the batch holds the task
			continue
		}
		seen[m.ID] = true
		open = append(open, job{inbound: in, msg: m})
	}
	if len(open) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(q.hardCtx, recordTimeout)
	recs, err := q.recordDeliveries(ctx, open)
	cancel()
	if q.hardCtx.Err() != nil {
		return // crashing: unacknowledged, the broker redelivers them
	}
	if err != nil {
		q.requeueLater(b, "recording deliveries failed", err, open)
		return
	}
	b.Reset()
	for _, j := range open {
		rec, ok := recs[j.msg.ID]
		if !ok {
			j.acks.ack(j.tag) // the record says done or dead: a duplicate
			continue
		}
		j.rec = rec
		if rec.Attempts == 1 { // first delivery: a retry's backoff is not delivery latency
			q.stats.Observe(queue.LatencyDelivery, j.received.Sub(j.msg.EnqueuedAt))
		}
		select {
		case q.jobs <- j:
		case <-q.hardCtx.Done():
			return
		}
	}
}

// decode reads a delivery's message. From a subscriber's queue it is the
// subscriber's copy: the message of a fanned-out task names every copy,
// and this one takes its own id (and, when the message carries the task,
// its copy's kind); the copy is an ordinary task from then on (its retries
// go through the work queue). A message that carries its task is checked
// as the handler checks a request, so that its record cannot fail to be
// written for what it holds.
func decode(in inbound) (message, error) {
	var m message
	if err := json.Unmarshal(in.body, &m); err != nil {
		return message{}, err
	}
	if in.subscriber != "" {
		id, ok := m.Copies[in.subscriber]
		if !ok {
			return message{}, fmt.Errorf("no copy for subscriber %q", in.subscriber)
		}
		m.ID = id
		if m.Kind != "" {
			m.Kind = queue.CopyKind(m.Kind, in.subscriber)
		}
	}
	m.Copies = nil
	if !queue.ValidID(m.ID) {
		return message{}, fmt.Errorf("bad task id %q", m.ID)
	}
	if m.Kind != "" {
		if err := checkCarried(m); err != nil {
			return message{}, err
		}
	}
	return m, nil
}

// recordDeliveries records one delivery of each job in at most two
// statements: DeliverMany for the tasks recorded at their enqueue, and
// for messages that carry their task (PUBLISH_MODE=broker-only) the
// upsert that records the task at its first delivery (deliverCarried).
// The answer holds the open tasks, as DeliverMany's.
func (q *mqQueue) recordDeliveries(ctx context.Context, jobs []job) (map[string]records.Delivery, error) {
	var ids []string
	var carried []message
	for _, j := range jobs {
		if j.msg.Kind != "" {
			carried = append(carried, j.msg)
		} else {
			ids = append(ids, j.msg.ID)
		}
	}
	recs := map[string]records.Delivery{}
	if len(ids) > 0 {
		slices.Sort(ids)
		open, err := q.pipe.DeliverMany(ctx, ids)
		q.deliverStatements.Add(1)
		if err != nil {
			return nil, err
		}
		maps.Copy(recs, open)
	}
	if len(carried) > 0 {
		open, err := q.deliverCarried(ctx, carried)
		q.deliverStatements.Add(1)
		if err != nil {
			return nil, err
		}
		maps.Copy(recs, open)
	}
	return recs, nil
}

// requeueLater holds jobs unacknowledged for the stage's next backoff, then
// requeues them: never an instant redelivery loop while Postgres fails.
func (q *mqQueue) requeueLater(b *backoff.Backoff, what string, err error, jobs []job) {
	wait := b.Next()
	q.log.Warn(what+"; requeueing after a backoff", "deliveries", len(jobs), "backoff", wait, "err", err)
	if backoff.Sleep(q.hardCtx, wait) != nil {
		return // crashing or out of stop time: the broker redelivers them
	}
	for _, j := range jobs {
		j.acks.nack(true, j.tag)
	}
}

func (q *mqQueue) work() {
	for j := range q.jobs {
		err := queue.Work(q.hardCtx, q.cfg.Worker.Work, j.rec.Attempts, j.rec.FailTimes)
		if q.hardCtx.Err() != nil {
			continue // crashing: unacknowledged, the broker redelivers it
		}
		q.results <- result{j, err}
	}
}

// complete records outcomes in batches until results is closed, then
// sends every acknowledgement still waiting and closes pipelineDone.
func (q *mqQueue) complete() {
	defer close(q.pipelineDone)
	recordBatches(q, q.results, q.finish)
	if q.hardCtx.Err() == nil {
		q.mu.Lock()
		ackers := q.ackers
		q.mu.Unlock()
		for _, a := range ackers {
			a.flush()
		}
	}
}

// finish records a batch of outcomes in one statement, publishes the
// retries (one pipelined confirm batch), then settles the deliveries:
// done and duplicates acknowledged, dead rejected to the dead-letter
// exchange. The record decides: an outcome whose record was already done
// or dead is a duplicate, acknowledged without effect.
func (q *mqQueue) finish(batch []result, b *backoff.Backoff) {
	outcomes, byID := q.outcomes(batch)
	if len(outcomes) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(q.hardCtx, recordTimeout)
	defer cancel()
	changed, err := q.pipe.FinishMany(ctx, outcomes)
	q.finishStatements.Add(1)
	if q.hardCtx.Err() != nil {
		return
	}
	if err != nil {
		jobs := make([]job, 0, len(byID))
		for _, r := range byID {
			jobs = append(jobs, r.job)
		}
		q.requeueLater(b, "recording outcomes failed", err, jobs)
		return
	}
	b.Reset()
	q.publishRetries(ctx, b, q.settle(outcomes, byID, changed))
}

// outcomes are the records' outcomes of batch, one per task, sorted by
// id, and the result of each task by id. A second delivery of a
// task in work is acknowledged here: one outcome is recorded.
func (q *mqQueue) outcomes(batch []result) ([]records.Outcome, map[string]result) {
	outcomes := make([]records.Outcome, 0, len(batch))
	byID := make(map[string]result, len(batch))
	for _, r := range batch {
		if _, dup := byID[r.msg.ID]; dup {
			r.acks.ack(r.tag) // two deliveries of one task in work: one outcome is recorded
			continue
		}
		byID[r.msg.ID] = r
		o := records.Outcome{ID: r.msg.ID}
		switch queue.Decide(r.err, r.rec.Attempts, q.cfg.Worker.MaxAttempts) {
		case queue.OutcomeDone:
			o.Status = queue.StatusDone
		case queue.OutcomeDead:
			msg := r.err.Error()
			o.Status, o.LastError = queue.StatusDead, &msg
		case queue.OutcomeRetry:
			msg := r.err.Error()
			o.Status, o.LastError = queue.StatusQueued, &msg
		}
		outcomes = append(outcomes, o)
	}
	slices.SortFunc(outcomes, func(a, b records.Outcome) int { return strings.Compare(a.ID, b.ID) })
	return outcomes, byID
}

// settle acknowledges the deliveries whose outcome was recorded (done;
// or unchanged: a duplicate), rejects the dead ones to the dead-letter
// exchange, and returns the retries still to publish, each with its
// result.
func (q *mqQueue) settle(outcomes []records.Outcome, byID map[string]result, changed map[string]bool) []retry {
	var retries []retry
	for _, o := range outcomes {
		r := byID[o.ID]
		switch {
		case !changed[o.ID]:
			r.acks.ack(r.tag) // already done or dead: a duplicate
		case o.Status == queue.StatusDone:
			// Counted before the ack, a network write: the record is
			// already visible, and the count should trail it as little
			// as it can.
			q.admission.Finished(1)
			q.stats.Inc(queue.CounterProcessed)
			q.stats.Since(queue.LatencyProcessing, r.msg.EnqueuedAt)
			q.hub.Wake(o.ID)
			r.acks.ack(r.tag)
		case o.Status == queue.StatusDead:
			// Rejected without requeue: the work queue's dead-letter
			// exchange routes it to <queue>.dead.
			r.acks.nack(false, r.tag)
			q.admission.Finished(1)
			q.stats.Inc(queue.CounterDead)
			q.hub.Wake(o.ID)
		default:
			name, _ := q.retryQueue(r.rec.Attempts)
			retries = append(retries, retry{out: outbound{key: name, msg: r.msg}, r: r})
		}
	}
	return retries
}

// retry is a delivery to publish again to its delay queue, then
// acknowledge.
type retry struct {
	out outbound
	r   result
}

// publishRetries publishes retries to their delay queues (one pipelined
// confirm batch), then acknowledges their deliveries; on a failed
// publish they go back to the intake after a backoff.
func (q *mqQueue) publishRetries(ctx context.Context, b *backoff.Backoff, retries []retry) {
	if len(retries) == 0 {
		return
	}
	msgs := make([]outbound, len(retries))
	for i, x := range retries {
		msgs[i] = x.out
	}
	// Persistent whatever DELIVERY_MODE says: the reconciler republishes
	// only tasks never delivered, so a retry's message lost by a broker
	// restart would strand its task.
	if err := q.publish(ctx, msgs, amqp.Persistent); err != nil {
		jobs := make([]job, len(retries))
		for i, x := range retries {
			jobs[i] = x.r.job
		}
		q.requeueLater(b, "publishing retries failed", err, jobs)
		return
	}
	for _, x := range retries {
		x.r.acks.ack(x.r.tag)
	}
	q.stats.Add(queue.CounterRetried, int64(len(retries)))
}
