package main

import (
	"encoding/json"
	"strconv"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/queue"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/queue/conformance"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/queue/records"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/ids"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/kittest"
)

// counter reads one of the service's /stats counters.
func counter(t testing.TB, tg *target, name string) int64 {
	t.Helper()
	return tg.App().stats.Snapshot().Counters[name]
}

// onlyTask returns the status and attempts of the target's one task
// record.
func onlyTask(t testing.TB, tg *target) (status string, attempts int) {
	t.Helper()
	if err := tg.pool.QueryRow(kittest.Context(t, 10*time.Second), `SELECT status, attempts FROM tasks`).Scan(&status, &attempts); err != nil {
		t.Fatal(err)
	}
	return status, attempts
}

// publishRaw publishes a task message to the work queue past the service,
// as a duplicate publish or a redelivery would bring it.
func publishRaw(t testing.TB, e env, m message) {
	t.Helper()
	body, _ := json.Marshal(m)
	if err := e.channel(t).PublishWithContext(kittest.Context(t, 10*time.Second), "", e.queue, false, false, amqp.Publishing{
		DeliveryMode: amqp.Persistent, ContentType: "application/json", Body: body,
	}); err != nil {
		t.Fatal(err)
	}
}

// queueDepth returns the ready messages of queue name.
func queueDepth(t testing.TB, e env, name string) int {
	t.Helper()
	q, err := e.channel(t).QueueDeclarePassive(name, true, false, false, false, amqp.Table{"x-queue-type": "classic"})
	if err != nil {
		t.Fatalf("inspect %s: %v", name, err)
	}
	return q.Messages
}

// TestRecordWritesAreBatched delivers n tasks to 8 concurrent workers and
// counts the record statements at the grouping layer: the deliveries are
// recorded by at most ceil(n/batch) statements, and so are the outcomes,
// instead of 2n single-row commits. Every task is recorded done after
// exactly one delivery: none lost, none doubled. The linger is long, so
// that only a full batch (or the last) is written, whatever the machine's
// load.
func TestRecordWritesAreBatched(t *testing.T) {
	t.Parallel()
	const n, batch = 400, 50
	e := newEnv(t)
	tg := startTarget(t, e, conformance.Settings{Workers: 8}, map[string]string{
		"RECORD_BATCH": strconv.Itoa(batch), "RECORD_LINGER": "1s", "PREFETCH": "1000",
	})
	post(t, tg.URL(), n, 0)
	waitDone(t, tg, n, 2*time.Minute)
	limit := int64((n + batch - 1) / batch)
	q := tg.App()
	if d, f := q.deliverStatements.Load(), q.finishStatements.Load(); d > limit || f > limit {
		t.Errorf("%d tasks recorded by %d delivery and %d outcome statements; want at most %d each", n, d, f, limit)
	} else {
		t.Logf("%d tasks: %d delivery statements, %d outcome statements", n, d, f)
	}
	var ok int
	if err := tg.pool.QueryRow(kittest.Context(t, 10*time.Second), `
SELECT count(*) FROM tasks WHERE status = 'done' AND attempts = 1 AND delivered_at IS NOT NULL AND processed_at IS NOT NULL`).Scan(&ok); err != nil {
		t.Fatal(err)
	}
	if ok != n {
		t.Errorf("%d of %d records done after exactly one delivery", ok, n)
	}
	for _, c := range []string{queue.CounterDelivered, queue.CounterProcessed} {
		if got := counter(t, tg, c); got != n {
			t.Errorf("%s = %d, want %d", c, got, n)
		}
	}
	// Every delivery was acknowledged: nothing is left for the broker
	// to requeue when the connection closes.
	tg.Stop()
	if d := queueDepth(t, e, e.queue); d != 0 {
		t.Errorf("%d messages back in the work queue after the stop, want 0", d)
	}
}

// TestRecordDecidesOnRedelivery delivers a message again for a task whose
// record says done: it is acknowledged and dropped, without a second
// attempt or a second completion.
func TestRecordDecidesOnRedelivery(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tg := startTarget(t, e, conformance.Settings{Workers: 2}, nil)
	post(t, tg.URL(), 1, 0)
	waitDone(t, tg, 1, time.Minute)
	var m message
	if err := tg.pool.QueryRow(kittest.Context(t, 10*time.Second), `SELECT id::text, enqueued_at FROM tasks`).Scan(&m.ID, &m.EnqueuedAt); err != nil {
		t.Fatal(err)
	}
	publishRaw(t, e, m)
	kittest.Eventually(t, 30*time.Second, "the duplicate delivered", func() bool {
		return counter(t, tg, queue.CounterDelivered) == 2
	})
	tg.Stop() // flushes the acknowledgements; an unacknowledged message would go back to the queue
	status, attempts := onlyTask(t, tg)
	if status != queue.StatusDone || attempts != 1 {
		t.Errorf("after the duplicate: status %s, attempts %d; want done, 1", status, attempts)
	}
	if p := counter(t, tg, queue.CounterProcessed); p != 1 {
		t.Errorf("processed = %d, want 1 (the duplicate did not run)", p)
	}
	if d := queueDepth(t, e, e.queue); d != 0 {
		t.Errorf("%d messages in the work queue, want 0: the duplicate was acknowledged", d)
	}
}

// TestUnrecordableDeliveryRequeuedWithBackoff makes Postgres refuse every
// record update (a trigger raises): the deliveries are not acknowledged
// but requeued after a growing backoff, not in an instant loop. Once the
// records can be written the task completes after one recorded attempt.
func TestUnrecordableDeliveryRequeuedWithBackoff(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tg := startTarget(t, e, conformance.Settings{Workers: 2}, nil)
	ctx := kittest.Context(t, time.Minute)
	for _, sql := range []string{
		`CREATE FUNCTION refuse_updates() RETURNS trigger LANGUAGE plpgsql AS $$BEGIN RAISE EXCEPTION 'test: records refused'; END$$`,
		`CREATE TRIGGER refuse_updates BEFORE UPDATE ON tasks FOR EACH ROW EXECUTE FUNCTION refuse_updates()`,
	} {
		if _, err := tg.pool.Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}
	post(t, tg.URL(), 1, 0)
	const outage = 2 * time.Second
	time.Sleep(outage)
	// Backoff from 100ms, doubling (each delay at least half its ceiling):
	// a handful of deliveries in 2s; an instant requeue loop makes
	// hundreds.
	if d := counter(t, tg, queue.CounterDelivered); d < 1 || d > 8 {
		t.Errorf("%d deliveries during a %v outage; want 1 to 8 (requeued with backoff)", d, outage)
	} else {
		t.Logf("%d deliveries during a %v outage", d, outage)
	}
	if _, err := tg.pool.Exec(ctx, `DROP TRIGGER refuse_updates ON tasks`); err != nil {
		t.Fatal(err)
	}
	waitDone(t, tg, 1, time.Minute)
	var attempts int
	if err := tg.pool.QueryRow(ctx, `SELECT attempts FROM tasks`).Scan(&attempts); err != nil {
		t.Fatal(err)
	}
	if attempts != 1 {
		t.Errorf("attempts = %d, want 1: the refused deliveries were never recorded", attempts)
	}
}

// TestPipelineKeepsWorkingWithTheRequestPoolExhausted: under overload,
// in-flight requests hold every connection of the main pool. The consumer
// pipeline records through a pool of its own (PipelineConns), so tasks
// already queued keep completing: a service never starves the workers
// its clients wait for.
func TestPipelineKeepsWorkingWithTheRequestPoolExhausted(t *testing.T) {
	t.Parallel()
	const n = 100
	e := newEnv(t)
	tg := startTarget(t, e, conformance.Settings{Workers: 4}, map[string]string{"DATABASE_MAX_CONNS": "2"})
	kittest.HoldConns(t, tg.App().pool)
	tasks := make([]queue.NewTask, n)
	for i := range tasks {
		tasks[i] = queue.NewTask{ID: ids.New(), Kind: "t", Payload: json.RawMessage(`{}`), EnqueuedAt: time.Now()}
	}
	if err := records.InsertTasks(kittest.Context(t, time.Minute), tg.pool, tasks); err != nil {
		t.Fatal(err)
	}
	for _, task := range tasks {
		publishRaw(t, e, message{ID: task.ID, EnqueuedAt: task.EnqueuedAt})
	}
	waitDone(t, tg, n, time.Minute)
}
